#pragma once
// TorchProcessGroup: one of our process groups (tcp by default; gloo or mpi underneath on
// request) behind PyTorch's c10d::ProcessGroup interface: what init_process_group("ddp") returns
// once `import ddp_torch` registered it. The constructor builds our group through the backend
// registry (comm/backend.h) over the c10d::Store PyTorch hands in (a PrefixStore per group), so
// every init method works; only the members construct it, and it blocks until every rank arrived
// (TimeoutError naming the missing keys). c10d's calling convention: every rank calls every
// collective in the same order, one contiguous tensor per call, of a supported dtype (float32/64,
// float16, bfloat16, int8, uint8, int32, int64), on the group's device. Ops return at once with a
// TorchWork; errors (ours, with op, sequence number and peer) surface from wait() and the future,
// argument errors from the call (InvalidArgument). Not supported, with a clear error: several
// tensors per call, PREMUL_SUM, sparse tensors but in allreduce SUM, recvAnysource on mpi
// underneath. Thread-safety: as c10d's, calls from one thread at a time per group.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <functional>
#include <memory>
#include <string>

#include "comm/process_group.h"
#include "common/timeouts.h"

namespace ddp::torch {

// How the destructor shuts the group down. Shutting down joins the group's threads, and they may
// need the GIL to finish what is in flight: a tensor whose Python object only our op still keeps
// (dropping it decrefs that object), a future's Python callback. Destroyed from Python with the
// GIL held, that is a deadlock, so the Python module installs a section that releases the GIL
// when the caller holds it (as PyTorch does for its own groups). Unset (C++ programs): runs as is.
using BlockingSection = void (*)(const std::function<void()>& body);
void set_blocking_section(BlockingSection section);

struct PluginOptions {
  std::string backend = "tcp";  // ours underneath: "tcp", "gloo", "mpi"
  Millis timeout = kDefaultCollectiveTimeout;
  std::string job_token;       // empty: DDP_JOB_TOKEN, else one made by rank 0
  std::string name = "world";  // in errors and logs; PyTorch's group name for subgroups
  // Each group rank's rank in PyTorch's default group (the mpi backend builds its communicator
  // from them); empty: 0..size-1, the default group itself.
  std::vector<int> global_ranks;
};

class TorchProcessGroup final : public c10d::ProcessGroup {
 public:
  TorchProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, PluginOptions options);
  ~TorchProcessGroup() override;

  const std::string getBackendName() const override { return "ddp"; }
  const comm::ProcessGroupPtr& group() const { return group_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

  // torch_process_group_p2p.cc. recvAnysource: the first message with the tag from any rank
  // (our recv_any); the Work's sourceRank() names the sender. monitoredBarrier: c10d's Gloo one,
  // messages included (rank 0 names the first late rank, or every one with wait_all_ranks); the
  // others fail when rank 0 does not answer within twice the timeout.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // torch_process_group_gather.cc
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  // Every rank passes inputs of the same shapes and dtype: one flat all_gather.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

 private:
  // alltoall_base with unequal splits (torch_process_group_alltoall.cc): agrees on every rank's
  // splits first (a small blocking all_gather: splits that do not pair up are an
  // InvalidArgument on every rank), then moves blocks padded to the largest split.
  c10::intrusive_ptr<c10d::Work> alltoall_uneven(at::Tensor& output, at::Tensor& input,
                                                 const std::vector<int64_t>& output_splits,
                                                 const std::vector<int64_t>& input_splits,
                                                 const c10d::AllToAllOptions& opts);

  // Sparse COO allreduce, SUM (torch_process_group_sparse.cc): every rank's indices and values
  // all-gathered and summed, blocking in the call (the counts must be agreed first).
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(at::Tensor& tensor, const c10d::AllreduceOptions& opts);

  comm::ProcessGroupPtr group_;
};

}  // namespace ddp::torch
