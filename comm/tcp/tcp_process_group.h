#pragma once
// TcpProcessGroup: the project's own backend ("tcp"), made by make_tcp_group (comm/backend.h).
// - Setup: one authenticated TCP connection per pair of ranks (peer_mesh.h) for send/recv and
//   liveness (a peer's EOF fails the group at once); collectives go through one Transport
//   (transport.h): shared memory, sockets, or both across hosts of several ranks each.
// - Collectives run in issue order on one worker thread, each with the group's next sequence
//   number; a small one issued while nothing is queued starts on the caller's thread and passes
//   to the worker if peers are late. send/recv complete independently, matched by (peer, tag).
//   Once an op fails, every pending and later op fails naming itself. AVG on integers truncates.
// - abort() wakes the socket engines and the shared-memory waits, and a hierarchy's child groups.
// - In place: reduce_scatter's output may be this rank's block of its input, all_gather's input
//   this rank's block of its output; no other overlap. CUDA buffers: InvalidArgument.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "comm/tcp/op.h"
#include "comm/tcp/transport.h"

namespace ddp::comm::tcp {

class SocketEngine;
class SocketCollectives;
struct HostLayout;
struct WayPolicy;

// The engine of a hierarchical group's step between hosts, DDP_TCP_INTER=socket|gloo|mpi (the
// same on every rank; default socket: this backend's sockets). Another engine's child group is
// made through this factory, which the backend registry (ddp_init) installs; without it, or
// for a backend that was not built, DDP_TCP_INTER other than socket is an InvalidArgument.
using InterNodeFactory = ProcessGroupPtr (*)(const std::string& backend, const GroupSetup& setup);
void set_inter_node_factory(InterNodeFactory factory);

class TcpProcessGroup final : public ProcessGroup {
 public:
  struct CreateOptions {
    // Every collective runs to its end on the thread that issues it, which the returned
    // (completed) Work then reports: a hierarchical group's children, whose ops its worker
    // issues one at a time and waits for at once (two thread hand-offs less per step).
    bool on_caller = false;
    // This process's job's ranks on this host, where the group's own layout does not show them
    // (a hierarchical group's child between hosts has one rank per host); 0: from the layout.
    int ranks_on_host = 0;
  };
  static std::shared_ptr<TcpProcessGroup> create(const GroupSetup& setup, CreateOptions options);
  static std::shared_ptr<TcpProcessGroup> create(const GroupSetup& setup) { return create(setup, {}); }
  ~TcpProcessGroup() override;

  std::string backend_name() const override { return "tcp"; }
  // "tcp: shared memory (cross-memory attach: every peer reachable)", "tcp: sockets, 2 connections
  // to each peer", "tcp: hierarchical, 2 hosts x 2 ranks; an all_reduce goes whole ... up to N bytes".
  std::string choices() const override;
  // On a shared-memory group (kShm): shared memory every rank maps (shm_region.h), whose
  // all_reduces, reduce_scatters and all_gathers run in place (shm_allreduce_direct.h,
  // shm_exchange_direct.h). On a hierarchical group: its host's group's memory, where its
  // all_reduces' steps within the host run in place so. Otherwise plain host memory.
  std::shared_ptr<GroupMemory> allocate(size_t bytes) override;

  // Introspection (tests, benchmarks).
  TransportKind transport() const { return transport_->kind(); }
  bool fingerprints() const { return fingerprints_; }
  const std::string& shm_name() const { return shm_name_; }  // empty unless kShm
  // Connections to each peer that carry collectives (DDP_TCP_SOCKET_STREAMS; 1 unless kSocket),
  // each set with its own engine and progress thread.
  int socket_streams() const { return static_cast<int>(engines_.size()); }
  uint64_t collectives_run() const { return collectives_run_.load(); }
  // Ops (all_reduce, reduce_scatter, all_gather) that ran in place in group memory (allocate):
  // kShm; kHierarchical, its steps within the host; 0 otherwise.
  uint64_t direct_ops() const { return transport_->counts().direct_ops; }
  // Ops (all_reduce, all_gather, reduce_scatter) that ran by cross-memory attach (shm_cross.h).
  uint64_t cross_memory_ops() const { return transport_->counts().cross_memory_ops; }
  // kHierarchical: the size up to which an all_reduce goes whole within the host, then across
  // (hierarchy_calibration.h); 0 otherwise.
  size_t hierarchy_small_bytes() const { return transport_->counts().small_bytes; }
  // kShm: every peer's memory is reachable (shm_allreduce_cross.h).
  bool cross_memory() const { return transport_->counts().cross_memory; }

  // A hierarchical parent's step of a small all_reduce it starts on its caller's thread
  // (buffer and op already checked): like all_reduce, but whatever CreateOptions::on_caller
  // says, the op polls here for at most `budget` (where it can start here at all: an eligible
  // op with nothing queued) and is left to this group's worker past that, as a group's own
  // caller's op is. The Work says whether it completed.
  WorkPtr all_reduce_within(const Buffer& buf, ReduceOp op, Millis timeout, std::chrono::microseconds budget);

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
  struct Task {
    OpContext ctx;
    Buffer in, out;
    WorkPtr work;
    bool started = false;  // begun on the caller's thread: the worker completes it (finish)
  };
  TcpProcessGroup(const GroupSetup& setup);
  void connect(const GroupSetup& setup, int ranks_on_host);
  // `cpus`: the CPUs this host's ranks share (local_cpus).
  void connect_hierarchy(const GroupSetup& setup, const HostLayout& layout, const WayPolicy& ways,
                         std::unique_ptr<SocketCollectives> flat);
  // Both take a resolved timeout (never kUseDefault); the first, the group's own budget.
  WorkPtr submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout);
  WorkPtr submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout, InlineBudget budget);
  WorkPtr post_p2p(bool is_send, Buffer buf, int peer, int tag, Millis timeout);
  void worker_loop();
  WorkPtr run_on_caller(Task& task, std::unique_lock<std::mutex>& lock);
  void execute(Task& task);
  // An op the transport finds eligible, on the caller's thread for at most `poll`.
  bool try_inline(Task& task, std::chrono::microseconds poll);
  template <typename F>
  std::exception_ptr guarded(F&& f);
  void shutdown() noexcept;

  std::string group_;
  std::shared_ptr<rdzv::Store> store_;  // group memory meets its peers here
  GroupHealth health_;
  bool fingerprints_ = true;
  std::string shm_name_;
  // One per connection set (DDP_TCP_SOCKET_STREAMS); the first carries everything, but the
  // large collective messages that stripe_plan puts on the others.
  std::vector<std::unique_ptr<SocketEngine>> engines_;
  std::unique_ptr<Transport> transport_;  // after engines_, which its sockets use

  std::mutex mu_;  // guards the sequence numbers and the queue
  std::condition_variable cv_;
  std::deque<Task> queue_;
  uint64_t next_seq_ = 0;
  uint64_t next_p2p_ = 0;
  bool stopping_ = false;
  bool busy_ = false;    // someone (the worker or an inline caller) is running an op
  InlineBudget inline_;  // the group's own ops' (DDP_TCP_INLINE_SPIN_US; kToTheEnd: on_caller)
  std::atomic<uint64_t> collectives_run_{0};
  // Threads blocked in wait() on this group's collectives (shared with their Works, which
  // may outlive the group): the shm waits poll only while one is.
  std::shared_ptr<std::atomic<int>> blocked_ = std::make_shared<std::atomic<int>>(0);
  // Returned for every op that completed on the caller's thread: a finished Work carries no
  // per-op state, and sharing one saves an allocation on the fast path.
  const WorkPtr inline_done_ = Work::completed("collective (completed on the caller's thread)");
  std::thread worker_;
};

}  // namespace ddp::comm::tcp
