#pragma once
// GlooProcessGroup: the ProcessGroup contract over Gloo 0.5 (make_gloo_group in comm/backend.h).
// - Collectives run on one worker thread per group, in issue order; send/recv are posted to Gloo
//   at issue time (two ranks that both send, then both receive, cannot deadlock) and complete in
//   issue order. Sizes, dtypes, reduce ops and roots are folded into each op's Gloo slot, so
//   ranks that disagree time out with an error instead of exchanging garbage (.cc: p2p_slot).
// - A Gloo timeout is a TimeoutError, a lost connection a NetworkError naming the peer; both name
//   the op and its number. The first failure, or abort(reason) (Aborted), breaks the group: its
//   Gloo context is aborted so peers blocked on us fail at once, and every later op fails with it.
// - Zero-length ops and world size 1 complete without Gloo; CUDA buffers are an InvalidArgument
//   (wrap the group with comm/nccl's staging). Many ranks may share a process (a device each).
//   SIGPIPE is set to ignored (if default) when the first group is built.
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "comm/backend.h"
#include "comm/gloo/gloo_collectives.h"
#include "comm/gloo/gloo_context.h"
#include "common/task_thread.h"

namespace ddp::comm::gloo_backend {

class GlooProcessGroup final : public ProcessGroup {
 public:
  explicit GlooProcessGroup(const GroupSetup& setup);
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }

 protected:
  WorkPtr do_send(Buffer buf, int dst, SendOptions opts) override;
  WorkPtr do_recv(Buffer buf, int src, RecvOptions opts) override;
  WorkPtr do_recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts) override;
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions opts) override;
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions opts) override;
  WorkPtr do_reduce(Buffer buf, ReduceOptions opts) override;
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) override;
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions opts) override;
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions opts) override;
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) override;
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) override;
  WorkPtr do_barrier(BarrierOptions opts) override;
  void do_abort(const std::string& reason) override;

 private:
  using Body = std::function<void(const OpArgs&)>;
  struct Op {
    std::string what;  // "gloo all_reduce #7 in group 'world'"
    uint32_t tag = 0;
    Millis timeout{0};
    int peer = -1;  // send/recv: the other rank
  };

  // Takes the next sequence number. Must hold issue_mu_. Timeouts are resolved (ProcessGroup).
  Op next_op(const char* name, Millis timeout, int peer = -1);
  // Queues body to run on the worker; `local` ops (no communication needed) finish at once.
  WorkPtr submit(const char* name, Millis timeout, bool local, uint16_t signature, Body body);
  // peer -1 with `source`: a recv from any other rank (Gloo's recv from a list of ranks).
  WorkPtr submit_p2p(bool is_send, Buffer buf, int peer, int tag, Millis timeout,
                     std::shared_ptr<int> source = nullptr);
  void run(const Op& op, const WorkPtr& work, const Body& body) noexcept;
  // Every rank whose collective fails says so in the store (report_failure); after a timeout in
  // which gloo did not say which peer, the ranks that did not report the same failure within a
  // short grace are named (silent_ranks: "; silent: ranks [..] ...", or ""). Inference, and
  // labelled so: they are stopped, cut off or dead — or late. So are they after a lost
  // connection to a peer that reported the same failure (gave_up_too: it timed out and hung up).
  void report_failure(const Op& op) noexcept;
  std::string gave_up_too(const Op& op, int peer) noexcept;
  std::string silent_ranks(const Op& op) noexcept;
  std::exception_ptr translate(const Op& op) noexcept;  // from the exception being handled
  // What `op` fails with once the group is broken: Aborted naming it after abort(), else the
  // first failure; null while the group is whole.
  std::exception_ptr broken(const Op& op);
  void break_group(const Op& op, const std::exception_ptr& error) noexcept;

  GroupSetup setup_;
  std::unique_ptr<GlooContext> context_;  // null when the world size is 1
  std::mutex issue_mu_;                   // issue order == sequence order == queue order
  uint64_t next_seq_ = 1;
  // Sends and recvs are numbered apart (in their descriptions only; Gloo matches them by slot):
  // ranks issue different numbers of them, and the collectives' numbers must still agree.
  uint64_t next_p2p_ = 1;
  std::mutex broken_mu_;
  std::exception_ptr broken_;
  std::optional<std::string> aborted_;  // abort()'s reason, when it came first
  std::unique_ptr<TaskThread> worker_;  // declared last: joined before the rest is destroyed
};

}  // namespace ddp::comm::gloo_backend
