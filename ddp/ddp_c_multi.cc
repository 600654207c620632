// The C ABI's multi-buffer collectives (ddp_c.h): C arrays of pointers to comm::Buffer lists,
// then ProcessGroup::*_multi, blocking.
#include <vector>

#include "common/error.h"
#include "ddp/ddp_c_internal.h"

namespace ddp::capi {
namespace {

// n views of count elements: on devices[i] when given, else where the group's buffers live.
std::vector<comm::Buffer> list_of(const comm::ProcessGroup& pg, const void* const* ptrs, const int* devices,
                                  int n, size_t count, int dtype) {
  if (n <= 0) DDP_THROW(InvalidArgument, "multi-buffer op: ", n, " buffers (at least one)");
  if (ptrs == nullptr) DDP_THROW(InvalidArgument, "multi-buffer op: NULL buffer array");
  std::vector<comm::Buffer> list;
  for (int i = 0; i < n; ++i) {
    comm::Buffer b = buffer_of(ptrs[i], count, dtype, devices ? devices[i] : -1);
    if (!devices) b.device = pg.buffer_device();
    list.push_back(b);
  }
  return list;
}

template <typename Issue>
int run_blocking(Issue&& issue) noexcept {
  return guard([&] { issue()->wait(); });
}

}  // namespace
}  // namespace ddp::capi

using namespace ddp;
using namespace ddp::capi;

extern "C" {

int ddp_all_reduce_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count,
                         int dtype, int op) {
  return run_blocking([&] {
    auto pg = group_of(g);
    return pg->all_reduce_multi(list_of(*pg, bufs, devices, n, count, dtype), {op_of(op)});
  });
}

int ddp_broadcast_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count, int dtype,
                        int root, int root_index) {
  return run_blocking([&] {
    auto pg = group_of(g);
    return pg->broadcast_multi(list_of(*pg, bufs, devices, n, count, dtype), {root, root_index});
  });
}

int ddp_reduce_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count, int dtype,
                     int op, int root, int root_index) {
  return run_blocking([&] {
    auto pg = group_of(g);
    return pg->reduce_multi(list_of(*pg, bufs, devices, n, count, dtype), {root, root_index, op_of(op)});
  });
}

int ddp_all_gather_multi(ddp_group_t* g, const void* const* in, void* const* out, const int* devices, int n,
                         size_t count, int dtype) {
  return run_blocking([&] {
    auto pg = group_of(g);
    const size_t total = count * static_cast<size_t>(n) * static_cast<size_t>(pg->size());
    return pg->all_gather_multi(list_of(*pg, in, devices, n, count, dtype),
                                list_of(*pg, out, devices, n, total, dtype));
  });
}

}  // extern "C"
