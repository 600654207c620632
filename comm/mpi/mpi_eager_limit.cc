#include "comm/mpi/mpi_eager_limit.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

namespace ddp::comm::mpi_backend {
namespace {

constexpr size_t kHeaderAllowance = 64;
constexpr size_t kSmallestUseful = 1024;

// One MPI_T control variable of an integer type, or 0.
size_t read_cvar(const char* name) {
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int verbosity = 0, bind = 0, scope = 0;
  if (MPI_T_cvar_get_info(index, nullptr, nullptr, &verbosity, &type, nullptr, nullptr, nullptr, &bind,
                          &scope) != MPI_SUCCESS) {
    return 0;
  }
  MPI_T_cvar_handle handle = nullptr;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return 0;
  std::array<std::byte, 16> raw{};  // the widest integer type it may be, with room
  auto as = [&raw]<typename T>() {
    T v{};
    std::memcpy(&v, raw.data(), sizeof v);
    return v;
  };
  size_t value = 0;
  if (count == 1 && MPI_T_cvar_read(handle, raw.data()) == MPI_SUCCESS) {
    if (type == MPI_INT) value = static_cast<size_t>(std::max(0, as.operator()<int>()));
    if (type == MPI_UNSIGNED) value = as.operator()<unsigned>();
    if (type == MPI_UNSIGNED_LONG) value = as.operator()<unsigned long>();
    if (type == MPI_UNSIGNED_LONG_LONG) value = as.operator()<unsigned long long>();
  }
  MPI_T_cvar_handle_free(&handle);
  return value;
}

}  // namespace

size_t mpi_eager_limit() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
  size_t limit = 0;
  for (const char* name : {"btl_vader_eager_limit", "btl_tcp_eager_limit"}) {
    const size_t v = read_cvar(name);
    if (v > 0) limit = limit == 0 ? v : std::min(limit, v);
  }
  MPI_T_finalize();
  return limit;
}

size_t eager_piece_bytes(size_t eager_limit) {
  if (eager_limit < kSmallestUseful + kHeaderAllowance) return 0;
  return (eager_limit - kHeaderAllowance) / 64 * 64;
}

}  // namespace ddp::comm::mpi_backend
