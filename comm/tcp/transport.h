#pragma once
// Transport: how a TcpProcessGroup moves its collectives: shared memory on one host
// (shm_collectives.h), sockets (socket_collectives.h), both at once across hosts
// (hierarchical_collectives.h), or one rank alone. The group only queues ops, dispatches each to
// its one transport and waits; the transport says which ops may start on the caller's thread,
// runs them, gives group memory, and names what it chose. Ops come from one thread at a time
// (the group's worker, or a caller running one while the worker is idle); allocate() from any
// thread (it is collective), the const members from any.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/group_memory.h"
#include "comm/tcp/op.h"
#include "comm/tcp/plan.h"

namespace ddp::rdzv {
class Store;
}

namespace ddp::comm::tcp {

class ShmCollectives;
class SocketCollectives;
class HierarchicalCollectives;

// Where an op may run before the group's worker takes it.
struct InlineBudget {
  enum class Mode : uint8_t {
    kNever,     // queued for the worker
    kPoll,      // starts on the caller's thread where eligible, its waits polling for `poll`
    kToTheEnd,  // runs to its end on the caller's thread (a hierarchical group's children)
  };
  Mode mode = Mode::kNever;
  std::chrono::microseconds poll{0};
};

// What a transport did, for tests and benchmarks.
struct TransportCounts {
  uint64_t direct_ops = 0;        // ran in place in group memory (shm_allreduce_direct.h)
  uint64_t cross_memory_ops = 0;  // ran by cross-memory attach (shm_cross.h)
  size_t small_bytes = 0;         // hierarchical: the small path's limit (hierarchy_calibration.h)
  bool cross_memory = false;      // shared memory: every peer's memory is reachable
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportKind kind() const = 0;
  // Whether start() may take the op (it may return before the op is done).
  virtual bool eligible(const OpDesc& d, const Buffer& in) const = 0;
  // An eligible op, as far as it gets with each wait polling at most `budget`: true when done.
  // Otherwise the transport keeps it and finish() completes it before any other op. Sets
  // ctx.deadline where the op's messages carry it from the start.
  virtual bool start(OpContext& ctx, const Buffer& in, const Buffer& out,
                     std::chrono::microseconds budget) = 0;
  virtual void finish(const OpContext& ctx, const Buffer& in, const Buffer& out) = 0;
  virtual void run(const OpContext& ctx, const Buffer& in, const Buffer& out) = 0;  // start to end
  // Group memory (ProcessGroup::allocate); nullptr: plain host memory.
  virtual std::shared_ptr<GroupMemory> allocate(size_t bytes) = 0;
  // How long a wait for an op of `bytes` polls before it sleeps.
  virtual std::chrono::microseconds poll_for(size_t bytes) const = 0;
  virtual std::string choices() const = 0;  // ProcessGroup::choices
  virtual TransportCounts counts() const = 0;
  // The group was aborted (ProcessGroup::abort; its health records it): groups the transport
  // runs its steps on (a hierarchy's host and cross-host groups) are aborted too. Any thread.
  virtual void abort(const std::string& /*reason*/) {}
};

// World size 1: every collective is a copy at most.
std::unique_ptr<Transport> local_transport();

// Shared memory; its group memory meets in `store` (shm_region.h).
struct ShmTransportOptions {
  std::unique_ptr<ShmCollectives> shm;
  rdzv::Store* store = nullptr;  // outlives the transport (the group holds it)
  std::string group;
  int rank = 0, world = 1;
  Millis timeout{0};
  size_t inline_max_bytes = 0;  // the largest all_reduce eligible to start inline
};
std::unique_ptr<Transport> shm_transport(ShmTransportOptions options);

std::unique_ptr<Transport> socket_transport(std::unique_ptr<SocketCollectives> sockets, int streams);

// `flat`: the group's own sockets (its flat all_reduces and the ops that run flat), which
// `hierarchy` points at.
std::unique_ptr<Transport> hierarchical_transport(std::unique_ptr<HierarchicalCollectives> hierarchy,
                                                  std::unique_ptr<SocketCollectives> flat, std::string group);

}  // namespace ddp::comm::tcp
