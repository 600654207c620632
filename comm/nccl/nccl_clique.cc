#include "comm/nccl/nccl_clique.h"

#include <chrono>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"

// How the clique is built, used and torn down (the contract: nccl_clique.h).
// (nccl_multi.cc): K communicators, one per local device, in a clique of world × K NCCL ranks.
// Communicator i is NCCL rank process_rank × K + i on devices[i] and has a stream of its own.
// - init() creates the K communicators inside one ncclGroupStart/End, with cudaSetDevice before
//   each ncclCommInitRankConfig (NCCL's "multiple devices per thread"). They are non-blocking:
//   init returns what ncclGroupEnd returned, often ncclInProgress; the caller polls
//   async_error() until the clique is ready (or its deadline passes), then calls mark_ready().
// - An op: wait_for(home stream) (every device's stream waits for the caller's work on that
//   device's legacy default stream and for the group's stream), the NCCL calls on comm(i) and
//   stream(i) inside one group, then join_into(home stream) so the group's stream (and the
//   event the group's watcher polls) completes only after every device's stream did.

// - abort() (noexcept, any thread, once) aborts every communicator so hung kernels exit; the
//   destructor finalizes and destroys a ready clique, aborts one that never became ready, and
//   frees its streams and events. Errors: BackendError naming the CUDA call and the device.
// Not thread-safe apart from abort() and async_error(): the group issues from one thread at a time.

namespace ddp::comm::nccl_backend {
namespace {

void check(cudaError_t rc, const std::string& what, const char* call, int device) {
  if (rc != cudaSuccess) {
    cudaGetLastError();
    DDP_THROW(BackendError, what, ": ", call, " on cuda:", device, ": ", cudaGetErrorString(rc));
  }
}

}  // namespace

NcclClique::NcclClique(CliqueOptions options) : options_(std::move(options)) {
  const size_t k = size();
  comms_.assign(k, nullptr);
  streams_.assign(k, nullptr);
  ready_.assign(k, nullptr);
  done_.assign(k, nullptr);
  try {
    for (size_t i = 0; i < k; ++i) {
      const int dev = options_.devices[i];
      set_device(dev);
      check(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking), options_.what, "cudaStreamCreate",
            dev);
      check(cudaEventCreateWithFlags(&ready_[i], cudaEventDisableTiming), options_.what, "cudaEventCreate",
            dev);
      check(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming), options_.what, "cudaEventCreate",
            dev);
    }
    set_device(options_.home_device);
    check(cudaEventCreateWithFlags(&home_ready_, cudaEventDisableTiming), options_.what, "cudaEventCreate",
          options_.home_device);
  } catch (...) {
    release_cuda();
    throw;
  }
}

NcclClique::~NcclClique() {
  const State s = state_.load();
  if (s == kReady) {
    finalize_and_destroy();
  } else if (s == kBuilding) {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) ncclCommAbort(c);
    }
  }
  release_cuda();
}

void NcclClique::release_cuda() noexcept {
  for (size_t i = 0; i < size(); ++i) {
    cudaSetDevice(options_.devices[i]);
    if (streams_[i] != nullptr) cudaStreamDestroy(streams_[i]);
    if (ready_[i] != nullptr) cudaEventDestroy(ready_[i]);
    if (done_[i] != nullptr) cudaEventDestroy(done_[i]);
  }
  cudaSetDevice(options_.home_device);
  if (home_ready_ != nullptr) cudaEventDestroy(home_ready_);
}

ncclResult_t NcclClique::init(const ncclUniqueId& id, int nranks, int first_rank) {
  ncclResult_t first_error = ncclGroupStart();
  if (first_error != ncclSuccess) return first_error;
  for (size_t i = 0; i < size(); ++i) {
    if (cudaSetDevice(options_.devices[i]) != cudaSuccess) {
      cudaGetLastError();
      first_error = ncclUnhandledCudaError;
      break;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so a process that never arrives is a timeout, not a hang
    ncclResult_t rc =
        ncclCommInitRankConfig(&comms_[i], nranks, id, first_rank + static_cast<int>(i), &config);
    if (rc != ncclSuccess && rc != ncclInProgress && first_error == ncclSuccess) first_error = rc;
  }
  const ncclResult_t end = ncclGroupEnd();
  cudaSetDevice(options_.home_device);
  return first_error != ncclSuccess ? first_error : end;
}

void NcclClique::set_device(int device) const {
  check(cudaSetDevice(device), options_.what, "cudaSetDevice", device);
}

void NcclClique::wait_for(cudaStream_t home) {
  set_device(options_.home_device);
  check(cudaEventRecord(home_ready_, home), options_.what, "cudaEventRecord", options_.home_device);
  for (size_t i = 0; i < size(); ++i) {
    const int dev = options_.devices[i];
    set_device(dev);
    check(cudaEventRecord(ready_[i], nullptr), options_.what, "cudaEventRecord", dev);  // legacy stream
    check(cudaStreamWaitEvent(streams_[i], ready_[i], 0), options_.what, "cudaStreamWaitEvent", dev);
    check(cudaStreamWaitEvent(streams_[i], home_ready_, 0), options_.what, "cudaStreamWaitEvent", dev);
  }
  set_device(options_.home_device);
}

void NcclClique::join_into(cudaStream_t home) {
  for (size_t i = 0; i < size(); ++i) {
    const int dev = options_.devices[i];
    set_device(dev);
    check(cudaEventRecord(done_[i], streams_[i]), options_.what, "cudaEventRecord", dev);
  }
  set_device(options_.home_device);
  for (size_t i = 0; i < size(); ++i) {
    check(cudaStreamWaitEvent(home, done_[i], 0), options_.what, "cudaStreamWaitEvent", options_.home_device);
  }
}

ncclResult_t NcclClique::async_error() const {
  if (state_.load() == kAborted) return ncclSuccess;  // the handles are gone; the abort was reported
  ncclResult_t result = ncclSuccess;
  for (ncclComm_t c : comms_) {
    if (c == nullptr) continue;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(c, &async);
    if (rc != ncclSuccess) return rc;
    if (async == ncclInProgress) {
      result = ncclInProgress;
    } else if (async != ncclSuccess) {
      return async;
    }
  }
  return result;
}

void NcclClique::abort() noexcept {
  if (state_.exchange(kAborted) == kAborted) return;
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommAbort(c);
  }
}

void NcclClique::finalize_and_destroy() noexcept {
  // Finalize all K first: they are non-blocking, so each returns at once and no communicator
  // waits on a sibling this thread has not reached yet; destroy once all are quiescent.
  for (ncclComm_t c : comms_) ncclCommFinalize(c);
  const Deadline deadline(options_.finalize_timeout);
  ncclResult_t rc = async_error();
  while (rc == ncclInProgress && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rc = async_error();
  }
  for (ncclComm_t c : comms_) {
    if (rc == ncclSuccess) {
      ncclCommDestroy(c);
    } else {
      ncclCommAbort(c);  // stuck or failed: abort frees as well
    }
  }
}

}  // namespace ddp::comm::nccl_backend
