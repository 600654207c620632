// The C ABI: errors, process groups and collectives. The engine part is in ddp_c_engine.cc.
#include "ddp/ddp_c.h"

#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#ifndef DDP_VERSION
#error "DDP_VERSION comes from CMake (ddp/CMakeLists.txt)"
#endif

#include "comm/init.h"
#include "common/error.h"
#include "ddp/ddp_c_internal.h"

namespace ddp::capi {
namespace {
thread_local std::string last_error;
}  // namespace

int fail(int status, const std::string& message) {
  last_error = message;
  return status;
}

int status_of_current_exception() {
  try {
    throw;
  } catch (const TimeoutError& e) {
    return fail(DDP_ERROR_TIMEOUT, e.what());
  } catch (const NetworkError& e) {
    return fail(DDP_ERROR_NETWORK, e.what());
  } catch (const StoreError& e) {
    return fail(DDP_ERROR_STORE, e.what());
  } catch (const NotInitialized& e) {  // an InvalidArgument in C++; its own code in C
    return fail(DDP_ERROR_NOT_INITIALIZED, e.what());
  } catch (const InvalidArgument& e) {
    return fail(DDP_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const BackendError& e) {
    return fail(DDP_ERROR_BACKEND, e.what());
  } catch (const SystemError& e) {
    return fail(DDP_ERROR_SYSTEM, e.what());
  } catch (const std::bad_alloc&) {
    return fail(DDP_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(DDP_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(DDP_ERROR_INTERNAL, "unknown exception");
  }
}

comm::ProcessGroupPtr group_of(ddp_group_t* g) {
  if (g) {
    if (!g->pg) DDP_THROW(InvalidArgument, "group handle is empty");
    return g->pg;
  }
  return default_group();
}

comm::DType dtype_of(int dtype) {
  if (dtype < DDP_FLOAT32 || dtype > DDP_INT64) DDP_THROW(InvalidArgument, "unknown ddp_dtype ", dtype);
  return static_cast<comm::DType>(dtype);
}

comm::Device device_of(int device) {
  if (device < 0) return {};
  return {comm::DeviceType::kCuda, device};
}

comm::Buffer buffer_of(const void* data, size_t count, int dtype, int device) {
  if (!data && count > 0) DDP_THROW(InvalidArgument, "NULL buffer with count ", count);
  return comm::Buffer{const_cast<void*>(data), count, dtype_of(dtype), device_of(device)};
}

Millis millis_of(int64_t timeout_ms) { return timeout_ms <= 0 ? kUseDefault : Millis(timeout_ms); }

comm::ReduceOp op_of(int op) {
  if (op < DDP_SUM || op > DDP_BXOR) DDP_THROW(InvalidArgument, "unknown ddp_reduce_op ", op);
  return static_cast<comm::ReduceOp>(op);
}

namespace {

// A collective's buffer lives where the group's buffers do: host memory, or the GPU of an
// nccl group (so C callers pass device pointers to nccl and host pointers elsewhere).
comm::Buffer group_buffer(const comm::ProcessGroup& pg, const void* data, size_t count, int dtype) {
  comm::Buffer b = buffer_of(data, count, dtype);
  b.device = pg.buffer_device();
  return b;
}

// Issues an op; blocking when `work` is NULL, else hands the Work out.
template <typename Issue>
int run_op(ddp_work_t** work, Issue&& issue) noexcept {
  return guard([&] {
    comm::WorkPtr w = issue();
    if (!work) {
      w->wait();
      return;
    }
    *work = new ddp_work{std::move(w)};  // NOLINT(bugprone-unhandled-exception-at-new): guard() catches it
  });
}

}  // namespace
}  // namespace ddp::capi

using namespace ddp;
using namespace ddp::capi;

extern "C" {

const char* ddp_last_error(void) { return ddp::capi::last_error.c_str(); }

const char* ddp_status_name(int status) {
  switch (status) {
    case DDP_OK: return "ok";
    case DDP_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case DDP_ERROR_TIMEOUT: return "timeout";
    case DDP_ERROR_NETWORK: return "network error";
    case DDP_ERROR_STORE: return "store error";
    case DDP_ERROR_BACKEND: return "backend error";
    case DDP_ERROR_SYSTEM: return "system error";
    case DDP_ERROR_NOT_INITIALIZED: return "not initialized";
    case DDP_ERROR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

const char* ddp_version(void) { return DDP_VERSION; }  // CMake's project version

int ddp_init_process_group(const char* backend, const char* init_method, int rank, int world_size,
                           int64_t timeout_ms) {
  return guard([&] {
    InitOptions o;
    if (backend) o.backend = backend;
    if (init_method) o.init_method = init_method;
    o.rank = rank;
    o.world_size = world_size;
    o.timeout = millis_of(timeout_ms);
    init_process_group(o);
  });
}

int ddp_finalize(void) {
  destroy_process_group();
  return DDP_OK;
}

int ddp_is_initialized(void) { return is_initialized() ? 1 : 0; }

int ddp_get_rank(ddp_group_t* g, int* rank) {
  return guard([&] {
    DDP_CHECK(rank != nullptr, "ddp_get_rank: NULL output");
    *rank = group_of(g)->rank();
  });
}

int ddp_get_world_size(ddp_group_t* g, int* world_size) {
  return guard([&] {
    DDP_CHECK(world_size != nullptr, "ddp_get_world_size: NULL output");
    *world_size = group_of(g)->size();
  });
}

int ddp_new_group(const int* ranks, int n, ddp_group_t** group) {
  return guard([&] {
    DDP_CHECK(group != nullptr && (ranks != nullptr || n == 0), "ddp_new_group: NULL argument");
    DDP_CHECK(n >= 0, "ddp_new_group: negative count ", n);
    comm::ProcessGroupPtr pg = new_group(std::vector<int>(ranks, ranks + n));
    *group = pg ? new ddp_group{std::move(pg)} : nullptr;
  });
}

void ddp_group_free(ddp_group_t* group) { delete group; }

namespace {
// What ddp_mem_alloc handed out, by address, until ddp_mem_free.
std::mutex g_memory_mu;
std::unordered_map<void*, std::shared_ptr<comm::GroupMemory>> g_memory;
}  // namespace

int ddp_mem_alloc(ddp_group_t* g, size_t bytes, void** data) {
  return guard([&] {
    DDP_CHECK(data != nullptr, "ddp_mem_alloc: NULL argument");
    auto memory = group_of(g)->allocate(bytes);
    std::lock_guard<std::mutex> lock(g_memory_mu);
    g_memory.emplace(memory->data(), memory);
    *data = memory->data();
  });
}

int ddp_mem_free(void* data) {
  return guard([&] {
    if (data == nullptr) return;
    std::shared_ptr<comm::GroupMemory> memory;  // released outside the lock
    std::lock_guard<std::mutex> lock(g_memory_mu);
    auto it = g_memory.find(data);
    DDP_CHECK(it != g_memory.end(), "ddp_mem_free: ", data, " was not returned by ddp_mem_alloc");
    memory = std::move(it->second);
    g_memory.erase(it);
  });
}

int ddp_isend(ddp_group_t* g, const void* buf, size_t count, int dtype, int dst, int tag, ddp_work_t** work) {
  return run_op(work, [&] {
    auto pg = group_of(g);
    return pg->send(group_buffer(*pg, buf, count, dtype), dst, {tag});
  });
}
int ddp_irecv(ddp_group_t* g, void* buf, size_t count, int dtype, int src, int tag, ddp_work_t** work) {
  return run_op(work, [&] {
    auto pg = group_of(g);
    return pg->recv(group_buffer(*pg, buf, count, dtype), src, {tag});
  });
}
int ddp_ibroadcast(ddp_group_t* g, void* buf, size_t count, int dtype, int root, ddp_work_t** work) {
  return run_op(work, [&] {
    auto pg = group_of(g);
    return pg->broadcast(group_buffer(*pg, buf, count, dtype), {root});
  });
}
int ddp_iall_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op, ddp_work_t** work) {
  return run_op(work, [&] {
    auto pg = group_of(g);
    return pg->all_reduce(group_buffer(*pg, buf, count, dtype), {op_of(op)});
  });
}
int ddp_iall_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, ddp_work_t** work) {
  return run_op(work, [&] {
    auto pg = group_of(g);
    return pg->all_gather(group_buffer(*pg, in, count, dtype),
                          group_buffer(*pg, out, count * pg->size(), dtype));
  });
}

int ddp_send(ddp_group_t* g, const void* buf, size_t count, int dtype, int dst, int tag) {
  return ddp_isend(g, buf, count, dtype, dst, tag, nullptr);
}
int ddp_recv(ddp_group_t* g, void* buf, size_t count, int dtype, int src, int tag) {
  return ddp_irecv(g, buf, count, dtype, src, tag, nullptr);
}
int ddp_broadcast(ddp_group_t* g, void* buf, size_t count, int dtype, int root) {
  return ddp_ibroadcast(g, buf, count, dtype, root, nullptr);
}
int ddp_all_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op) {
  return ddp_iall_reduce(g, buf, count, dtype, op, nullptr);
}
int ddp_all_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype) {
  return ddp_iall_gather(g, in, out, count, dtype, nullptr);
}
int ddp_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op, int root) {
  return run_op(nullptr, [&] {
    auto pg = group_of(g);
    return pg->reduce(group_buffer(*pg, buf, count, dtype), {root, op_of(op)});
  });
}
int ddp_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int root) {
  return run_op(nullptr, [&] {
    auto pg = group_of(g);
    // Only the root needs the large buffer (torch.distributed's gather_list): NULL elsewhere.
    size_t big = out ? count * pg->size() : 0;
    return pg->gather(group_buffer(*pg, in, count, dtype), group_buffer(*pg, out, big, dtype), {root});
  });
}
int ddp_scatter(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int root) {
  return run_op(nullptr, [&] {
    auto pg = group_of(g);
    size_t big = in ? count * pg->size() : 0;
    return pg->scatter(group_buffer(*pg, in, big, dtype), group_buffer(*pg, out, count, dtype), {root});
  });
}
int ddp_reduce_scatter(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int op) {
  return run_op(nullptr, [&] {
    auto pg = group_of(g);
    return pg->reduce_scatter(group_buffer(*pg, in, count * pg->size(), dtype),
                              group_buffer(*pg, out, count, dtype), {op_of(op)});
  });
}
int ddp_all_to_all(ddp_group_t* g, const void* in, void* out, size_t count, int dtype) {
  return run_op(nullptr, [&] {
    auto pg = group_of(g);
    return pg->all_to_all(group_buffer(*pg, in, count, dtype), group_buffer(*pg, out, count, dtype));
  });
}
int ddp_barrier(ddp_group_t* g) {
  return run_op(nullptr, [&] { return group_of(g)->barrier(); });
}
int ddp_monitored_barrier(ddp_group_t* g, int64_t timeout_ms) {
  return guard([&] { group_of(g)->monitored_barrier(millis_of(timeout_ms)); });
}

int ddp_work_wait(ddp_work_t* work, int64_t timeout_ms) {
  return guard([&] {
    DDP_CHECK(work != nullptr && work->work, "ddp_work_wait: NULL work");
    work->work->wait(millis_of(timeout_ms));
  });
}

int ddp_work_is_completed(ddp_work_t* work, int* completed) {
  return guard([&] {
    DDP_CHECK(work != nullptr && work->work && completed != nullptr, "ddp_work_is_completed: NULL argument");
    *completed = work->work->is_completed() ? 1 : 0;
  });
}

void ddp_work_free(ddp_work_t* work) { delete work; }

}  // extern "C"
