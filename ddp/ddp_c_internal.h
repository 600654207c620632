#pragma once
// Shared by the C ABI's translation units: the handle structs and the exception-to-status
// boundary. Nothing here is part of the public ABI.
#include <memory>
#include <optional>
#include <string>

#include "comm/process_group.h"
#include "ddp/ddp_c.h"
#include "ddp/engine.h"
#include "ddp/join.h"

struct ddp_group {
  ddp::comm::ProcessGroupPtr pg;
};

struct ddp_work {
  ddp::comm::WorkPtr work;
};

struct ddp_engine {
  std::unique_ptr<ddp::Engine> engine;
  std::unique_ptr<ddp::Join> join;
};

namespace ddp::capi {

// Records the message for ddp_last_error() and returns the status.
int fail(int status, const std::string& message);
// Maps the exception in flight to its status (call inside a catch block).
int status_of_current_exception();

// Runs f; returns DDP_OK or the status of what it threw. Nothing escapes into C.
template <typename F>
int guard(F&& f) noexcept {
  try {
    f();
    return DDP_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

comm::ProcessGroupPtr group_of(ddp_group_t* g);  // NULL: the default group
comm::DType dtype_of(int dtype);
comm::Device device_of(int device);
comm::Buffer buffer_of(const void* data, size_t count, int dtype, int device = -1);
Millis millis_of(int64_t timeout_ms);  // <= 0: kUseDefault
comm::ReduceOp op_of(int op);

}  // namespace ddp::capi
