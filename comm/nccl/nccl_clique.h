#pragma once
// NcclClique: one process's share of a communicator clique for the multi-buffer ops
// (nccl_multi.cc): K communicators, one per local device, in a clique of world x K NCCL ranks;
// communicator i is NCCL rank process_rank x K + i on devices[i], with a stream of its own.
// init() starts them non-blocking (poll async_error(), then mark_ready()); an op waits for the
// home stream, issues on every comm(i)/stream(i) in one group, then joins back into it.
// abort() (noexcept, any thread) aborts every communicator. Errors: BackendError naming the
// CUDA call and the device. Not thread-safe apart from abort() and async_error(). How:
// nccl_clique.cc.
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
