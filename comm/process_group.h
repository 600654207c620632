#pragma once
// ProcessGroup: a fixed set of ranks and the collectives among them. Every backend (tcp, gloo,
// mpi, nccl) keeps this contract, checked by the conformance suite:
// - Every rank calls collectives in the same order; each op takes the group's next sequence
//   number, which tags its messages and is named in every error about it. Ops return a Work at
//   once and complete in issue order; buffers stay alive and untouched until then. Zero-length
//   buffers are valid no-ops. Arguments are checked by the call itself (see the ops below).
// - A timeout is a TimeoutError naming the op, its number and the missing ranks; a lost peer a
//   NetworkError naming it, and every pending and later op fails with it (rebuild the group).
// - abort(reason), any thread: pending and later ops fail at once with Aborted naming the op and
//   the reason (mpi: a collective MPI already runs ends at its deadline); only this process's
//   group is aborted. Multi-buffer ops (the seed's *_multigpu): virtual rank r*K + i is buffer i
//   of rank r; K, count, dtype and root agree on every rank or all get InvalidArgument.
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/group_memory.h"
#include "comm/types.h"
#include "comm/work.h"
#include "common/timeouts.h"

namespace ddp::comm {

struct SendOptions {
  int tag = 0;
  Millis timeout = kUseDefault;
};
struct RecvOptions {
  int tag = 0;
  Millis timeout = kUseDefault;
};
struct BroadcastOptions {
  int root = 0;
  Millis timeout = kUseDefault;
};
struct AllReduceOptions {
  ReduceOp op = ReduceOp::kSum;
  Millis timeout = kUseDefault;
};
struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  Millis timeout = kUseDefault;
};
struct AllGatherOptions {
  Millis timeout = kUseDefault;
};
struct GatherOptions {
  int root = 0;
  Millis timeout = kUseDefault;
};
struct ScatterOptions {
  int root = 0;
  Millis timeout = kUseDefault;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::kSum;
  Millis timeout = kUseDefault;
};
struct AllToAllOptions {
  Millis timeout = kUseDefault;
};
struct BarrierOptions {
  Millis timeout = kUseDefault;
};
// Multi-buffer ops: the root is buffer `root_index` of rank `root`.
struct BroadcastMultiOptions {
  int root = 0;
  int root_index = 0;
  Millis timeout = kUseDefault;
};
struct ReduceMultiOptions {
  int root = 0;
  int root_index = 0;
  ReduceOp op = ReduceOp::kSum;
  Millis timeout = kUseDefault;
};

class ProcessGroup {
 public:
  struct Options {
    Millis timeout = kDefaultCollectiveTimeout;
  };

  ProcessGroup(int rank, int size, Options options);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Millis timeout() const { return options_.timeout; }
  virtual std::string backend_name() const = 0;
  // Where this group's buffers must live: the host for host backends (tcp, gloo, mpi; tcp may
  // also stage CUDA buffers), the group's GPU for nccl. Small bookkeeping collectives on host
  // values (the DDP engine's checks and join votes) stage through it when it is not the host.
  virtual Device buffer_device() const { return Device{}; }
  // What the backend chose for this group when it was made, in one line for people (its
  // transport, thresholds it measured); empty when there is nothing to say. Benchmarks print it
  // beside their figures.
  virtual std::string choices() const { return {}; }

  // The ops. Each one validates its arguments on the calling thread (InvalidArgument naming the
  // op and the problem: a peer or root outside the group, a send or recv to this rank, a buffer
  // not where the backend takes it (check_device) or null with a count, a bitwise op on a
  // floating dtype, sizes that disagree, an all_to_all that does not split evenly), resolves
  // the options' defaults (timeout kUseDefault -> timeout()), then hands the op to the
  // backend's do_… method. Not virtual: every backend follows the same rules.
  WorkPtr send(Buffer buf, int dst, SendOptions opts = {});
  WorkPtr recv(Buffer buf, int src, RecvOptions opts = {});
  // A recv from whichever rank's message with this tag comes first (MPI_ANY_SOURCE); *source is
  // that rank once the Work completed. tcp and gloo; other backends refuse it (InvalidArgument).
  // On tcp a recv posted for one rank alone takes that rank's messages before it; gloo keeps
  // its own order.
  WorkPtr recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts = {});
  WorkPtr broadcast(Buffer buf, BroadcastOptions opts = {});
  WorkPtr all_reduce(Buffer buf, AllReduceOptions opts = {});
  WorkPtr reduce(Buffer buf, ReduceOptions opts = {});
  WorkPtr all_gather(Buffer input, Buffer output, AllGatherOptions opts = {});
  // Non-roots' output is not used (nor checked).
  WorkPtr gather(Buffer input, Buffer output, GatherOptions opts = {});
  // Non-roots' input is not used (nor checked).
  WorkPtr scatter(Buffer input, Buffer output, ScatterOptions opts = {});
  WorkPtr reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts = {});
  // Sizes: all_gather and gather outputs, scatter and reduce_scatter inputs hold world_size x
  // the per-rank count; all_to_all sends input.count / world_size elements to each rank.
  WorkPtr all_to_all(Buffer input, Buffer output, AllToAllOptions opts = {});
  WorkPtr barrier(BarrierOptions opts = {});

  // Multi-buffer ops (see the contract above). Every buffer in a list has the same count and
  // dtype, none overlaps another, and each is where the backend takes it. all_reduce_multi and
  // broadcast_multi leave the result in every buffer; reduce_multi only in buffer root_index of
  // the root (the others, and every non-root buffer, are inputs, left untouched). all_gather_multi:
  // K inputs of n elements and K outputs of world × K × n, each output receiving input i of rank
  // r at element (r*K + i) × n. AVG divides by world × K. The list itself is only read during
  // the call; the buffers must live until the Work completes. Host backends reduce a process's
  // buffers locally and run one collective (comm/multi_buffer.h); nccl runs one communicator per
  // local device in a group call.
  WorkPtr all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts = {});
  WorkPtr broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts = {});
  WorkPtr reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts = {});
  WorkPtr all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                           AllGatherOptions opts = {});

  // Host memory for this group's buffers (comm/group_memory.h). Collective: every rank calls
  // it with the same bytes, in the same order, as when creating a group. tcp on one host gives
  // shared memory its all_reduce works on in place; other backends (and tcp across hosts) give
  // plain host memory. Errors: what the allocation or the exchange with the peers raised
  // (a rank asking for a different size: InvalidArgument naming both).
  virtual std::shared_ptr<GroupMemory> allocate(size_t bytes);

  // Fails every pending and later op of this group with Aborted (common/error.h): "<op and its
  // sequence number>: aborted: <reason>". Thread-safe, idempotent (the first call's reason
  // stays), callable from any thread while ops are pending (a watcher's, a signal loop's); it
  // never blocks on the pending ops. The first failure wins: a group already broken by a lost
  // peer or a timeout keeps failing with that error. The group is unusable afterwards;
  // destroying it does not wait for the aborted ops' timeouts. Per backend (docs/backends.md, "Abort"): tcp
  // wakes its socket engines and its shared-memory waits at once; gloo aborts its Gloo context; nccl aborts
  // its communicators (ncclCommAbort); mpi refuses later ops, but a collective MPI already runs cannot be
  // cancelled: it ends at its deadline (or when its peers arrive). Decorators forward it to the group they
  // wrap.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // Barrier through rank 0 with send/recv; on timeout the error names every rank that did not
  // arrive. Synchronous. Implemented once here on top of send/recv, with host tokens: a group
  // whose buffers live on a GPU (nccl) refuses it (InvalidArgument naming the way out).
  void monitored_barrier(Millis timeout = kUseDefault);

 protected:
  // The backend's ops: called with validated arguments and every default resolved (the
  // timeout is never kUseDefault here).
  virtual WorkPtr do_send(Buffer buf, int dst, SendOptions opts) = 0;
  virtual WorkPtr do_recv(Buffer buf, int src, RecvOptions opts) = 0;
  // Default: InvalidArgument naming the backend (tcp and gloo override it).
  virtual WorkPtr do_recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts);
  virtual WorkPtr do_broadcast(Buffer buf, BroadcastOptions opts) = 0;
  virtual WorkPtr do_all_reduce(Buffer buf, AllReduceOptions opts) = 0;
  virtual WorkPtr do_reduce(Buffer buf, ReduceOptions opts) = 0;
  virtual WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) = 0;
  virtual WorkPtr do_gather(Buffer input, Buffer output, GatherOptions opts) = 0;
  virtual WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions opts) = 0;
  virtual WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) = 0;
  virtual WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) = 0;
  virtual WorkPtr do_barrier(BarrierOptions opts) = 0;
  // Multi-buffer ops, called with validated lists (non-empty, same count and dtype, no overlap)
  // and the timeout resolved. Default (host backends): comm/multi_buffer.h, over the ops above.
  // Decorators forward them; nccl overrides them with its per-device communicators.
  virtual WorkPtr do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts);
  virtual WorkPtr do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts);
  virtual WorkPtr do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts);
  virtual WorkPtr do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                                      AllGatherOptions opts);

  // The backend's abort (see abort()): called once, with the first reason.
  virtual void do_abort(const std::string& reason) = 0;

  // Whether the backend takes `b` where it lives. Default: on buffer_device(). Backends with a
  // rule of their own (MPI's int counts, a decorator that stages device buffers) override it.
  virtual void check_device(const char* op, const Buffer& b) const;
  // Whether the backend takes a multi-buffer list where its buffers live. Default: check_device
  // on each. nccl overrides it: a list of one on the group's device, or K CUDA buffers on K
  // distinct devices (one communicator per device).
  virtual void check_list_devices(const char* op, std::span<const Buffer> list) const;
  Millis resolve(Millis timeout) const { return timeout == kUseDefault ? options_.timeout : timeout; }

 private:
  // Shared argument checks; throw InvalidArgument naming the op and the problem.
  void check_peer(const char* op, int peer) const;
  void check_p2p(const char* op, const Buffer& buf, int peer) const;
  void check_buffer(const char* op, const Buffer& b) const;  // check_device, then not null
  void check_not_null(const char* op, const Buffer& b) const;
  void check_reduce(const char* op, const Buffer& buf, ReduceOp rop) const;
  void check_sizes(const char* op, const Buffer& small, const Buffer& large) const;  // large = world × small
  // gather, scatter: `each` on every rank, `at_root` (world × each) only the root's.
  void check_rooted(const char* op, int root, const Buffer& each, const Buffer& at_root) const;
  void check_same(const char* op, const Buffer& a, const Buffer& b) const;  // same dtype and count
  void check_split(const char* op, const Buffer& b) const;                  // count % world == 0
  // A multi-buffer list: non-empty, check_list_devices, none null, same count and dtype, no two
  // overlapping.
  void check_list(const char* op, std::span<const Buffer> list) const;
  // broadcast_multi, reduce_multi: the root a rank of the group, the list checked, the root
  // index in the list.
  void check_rooted_list(const char* op, int root, int root_index, std::span<const Buffer> list) const;

  int rank_;
  int size_;
  Options options_;
  std::atomic<bool> aborted_{false};
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace ddp::comm
