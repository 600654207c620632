#pragma once
// NcclClique: one process's share of a communicator clique for the multi-buffer ops
// (nccl_multi.cc): K communicators, one per local device, in a clique of world × K NCCL ranks.
// Communicator i is NCCL rank process_rank × K + i on devices[i] and has a stream of its own.
//
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
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <string>
#include <vector>

#include "common/timeouts.h"

namespace ddp::comm::nccl_backend {

struct CliqueOptions {
  std::vector<int> devices;  // distinct CUDA ordinals, one per buffer
  int home_device = 0;       // the group's device (its stream and watcher event live there)
  Millis finalize_timeout{30'000};
  std::string what;  // for errors: "nccl group 'world': clique of 2 × 4"
};

class NcclClique {
 public:
  explicit NcclClique(CliqueOptions options);  // streams and events; throws BackendError
  ~NcclClique();
  NcclClique(const NcclClique&) = delete;
  NcclClique& operator=(const NcclClique&) = delete;

  // ncclCommInitRankConfig for every device, ranks first_rank .. first_rank + K - 1 of nranks.
  ncclResult_t init(const ncclUniqueId& id, int nranks, int first_rank);
  void mark_ready() { state_ = kReady; }

  size_t size() const { return options_.devices.size(); }
  const std::vector<int>& devices() const { return options_.devices; }
  ncclComm_t comm(size_t i) const { return comms_[i]; }
  cudaStream_t stream(size_t i) const { return streams_[i]; }
  const std::vector<ncclComm_t>& comms() const { return comms_; }

  void wait_for(cudaStream_t home);
  void join_into(cudaStream_t home);
  // The first communicator error (neither ncclSuccess nor ncclInProgress); else ncclInProgress
  // while any communicator is still in progress; else ncclSuccess.
  ncclResult_t async_error() const;
  void abort() noexcept;

 private:
  enum State { kBuilding, kReady, kAborted };
  void set_device(int device) const;
  void finalize_and_destroy() noexcept;
  void release_cuda() noexcept;

  CliqueOptions options_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> ready_;  // per device: the caller's legacy stream reached this op
  std::vector<cudaEvent_t> done_;   // per device: this op's calls on stream(i) are done
  cudaEvent_t home_ready_ = nullptr;
  std::atomic<State> state_{kBuilding};
};

}  // namespace ddp::comm::nccl_backend
