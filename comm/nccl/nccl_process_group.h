#pragma once
// NcclProcessGroup: the ProcessGroup contract over NCCL (make_nccl_group in comm/backend.h).
// One CUDA device per group (LOCAL_RANK, else the rank, modulo the visible devices); buffers
// must be CUDA views on it (InvalidArgument). Rank 0's ncclUniqueId goes through the store; a
// rank that never arrives is a TimeoutError, never a hang. Ops run on the group's own stream and
// complete in issue order; an async NCCL error or an op past its deadline aborts the
// communicator and fails that op and every later one (rebuild the group). Bitwise reductions
// are an InvalidArgument; send/recv ignore the tag. Multi-buffer ops run on a clique per device
// list (nccl_clique.h). How: nccl_process_group.cc.
#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/multi_buffer.h"
#include "comm/nccl/cuda_memory.h"
#include "comm/nccl/nccl_clique.h"
#include "common/deadline.h"

namespace ddp::comm::nccl_backend {

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(const GroupSetup& setup);
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }
  int device() const { return device_; }
  Device buffer_device() const override { return Device{DeviceType::kCuda, device_}; }

 protected:
  WorkPtr do_send(Buffer buf, int dst, SendOptions opts) override;
  WorkPtr do_recv(Buffer buf, int src, RecvOptions opts) override;
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions opts) override;
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions opts) override;
  WorkPtr do_reduce(Buffer buf, ReduceOptions opts) override;
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) override;
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions opts) override;
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions opts) override;
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) override;
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) override;
  WorkPtr do_barrier(BarrierOptions opts) override;
  // The watchdog's path: the communicators are aborted (ncclCommAbort), every pending and later
  // op fails with Aborted naming the group and the reason (like any first failure here, not each op).
  void do_abort(const std::string& reason) override;
  // nccl_multi.cc
  WorkPtr do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) override;
  WorkPtr do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) override;
  WorkPtr do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) override;
  WorkPtr do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                              AllGatherOptions opts) override;
  void check_list_devices(const char* op, std::span<const Buffer> list) const override;

 private:
  // Queues the op's NCCL calls on stream_; throws (via settle) on failure.
  using Launch = std::function<void(cudaStream_t, const Deadline&)>;
  struct Pending {
    std::string what;
    WorkPtr work;
    cudaEvent_t event = nullptr;
    Clock::time_point deadline;
    Millis timeout{0};
  };

  WorkPtr submit(const char* name, Millis timeout, bool local, const Launch& launch,
                 const std::string& detail = "");
  // Waits out ncclInProgress (non-blocking communicators: `comms`, else the group's) until the
  // deadline; throws mapped errors.
  void settle(const std::string& what, ncclResult_t rc, const Deadline& deadline,
              std::span<const ncclComm_t> comms = {});
  void watch();
  // gather (kToRoot) and scatter: every rank's `part`, the root's `whole` (world × part), the
  // root's own block copied on its stream, the others' moved by grouped ncclSend/ncclRecv.
  enum class Flow { kToRoot, kFromRoot };
  WorkPtr rooted(const char* op, Flow flow, Buffer part, Buffer whole, int root, Millis timeout);
  // The first async error of the group's communicator or of any clique's (ncclSuccess if none).
  ncclResult_t async_error() const;

  // nccl_multi_setup.cc. One call of buffer i's op: on communicator `comm` and stream `s`.
  using PerBuffer = std::function<ncclResult_t(ncclComm_t comm, cudaStream_t s, size_t i)>;
  struct MultiOp {
    const char* name;  // "all_reduce_multi"
    const char* call;  // "ncclAllReduce"
    Millis timeout;
    std::span<const Buffer> list;  // where the calls run: buffer i's device
    multi::ListShape shape;        // what every rank must agree on
    PerBuffer per_buffer;
  };
  WorkPtr submit_multi(const MultiOp& op);
  // The shape agreement; returns whether any rank lacks the clique for its device list.
  bool agree_multi(const char* op, const multi::ListShape& shape, bool lacking, Millis timeout);
  NcclClique& clique_for(const std::vector<int>& devices, bool create, const Deadline& deadline);
  void fail_all(std::exception_ptr error) noexcept;
  std::exception_ptr nccl_error(const std::string& what, ncclResult_t rc) const;

  std::string name_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;  // recorded on the legacy stream before each op
  void* scratch_ = nullptr;             // one int32 on the device, for barrier
  std::shared_ptr<rdzv::Store> store_;  // for the cliques' unique ids

  std::mutex multi_mu_;  // one multi-buffer op at a time: agreement, clique cache, issue
  cuda::DeviceMemory agree_scratch_;
  std::map<std::vector<int>, NcclClique*> clique_by_devices_;
  int cliques_made_ = 0;  // the same on every rank: cliques are created collectively

  std::mutex issue_mu_;  // NCCL calls of this communicator come from one thread at a time
  uint64_t next_seq_ = 1;

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::exception_ptr broken_;
  bool aborted_ = false;
  bool stop_ = false;
  std::vector<cudaEvent_t> retired_;  // events of failed ops, destroyed once the watcher stopped
  std::vector<std::unique_ptr<NcclClique>> cliques_;  // every clique made, until destruction
  std::thread watcher_;
};

}  // namespace ddp::comm::nccl_backend
