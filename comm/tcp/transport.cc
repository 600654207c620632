#include "comm/tcp/transport.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "comm/tcp/hierarchical_collectives.h"
#include "comm/tcp/shm_collectives.h"
#include "comm/tcp/shm_region.h"
#include "comm/tcp/socket_collectives.h"
#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::tcp {

using Micros = std::chrono::microseconds;

namespace {

class LocalTransport final : public Transport {
 public:
  TransportKind kind() const override { return TransportKind::kLocal; }
  bool eligible(const OpDesc&, const Buffer&) const override { return false; }
  bool start(OpContext& ctx, const Buffer& in, const Buffer& out, Micros) override {
    run(ctx, in, out);
    return true;
  }
  void finish(const OpContext&, const Buffer&, const Buffer&) override {}
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out) override {
    switch (ctx.desc.kind) {
      case OpKind::kAllGather:
      case OpKind::kGather:
      case OpKind::kScatter:
      case OpKind::kReduceScatter:
      case OpKind::kAllToAll:
        if (in.data != out.data && out.bytes() > 0) std::memmove(out.data, in.data, out.bytes());
        break;
      default: break;
    }
  }
  std::shared_ptr<GroupMemory> allocate(size_t) override { return nullptr; }
  Micros poll_for(size_t) const override { return Micros{0}; }
  std::string choices() const override { return "tcp: one rank"; }
  TransportCounts counts() const override { return {}; }
};

class RegionMemory final : public GroupMemory {
 public:
  explicit RegionMemory(std::shared_ptr<ShmRegion> region)
      : GroupMemory(region->mine(), region->bytes(), true), region_(std::move(region)) {}

 private:
  std::shared_ptr<ShmRegion> region_;
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(ShmTransportOptions o) : o_(std::move(o)) {}
  TransportKind kind() const override { return TransportKind::kShm; }
  bool eligible(const OpDesc& d, const Buffer& in) const override {
    return o_.shm->resumable(d, in) && in.bytes() <= o_.inline_max_bytes;
  }
  // No deadline yet: a clock read saved on the fast path (the budget is microseconds to
  // milliseconds, timeouts are seconds); the worker sets it if it takes over.
  bool start(OpContext& ctx, const Buffer& in, const Buffer& out, Micros budget) override {
    return o_.shm->start(ctx, in, out, static_cast<int>(budget.count()));
  }
  void finish(const OpContext& ctx, const Buffer& in, const Buffer& out) override {
    o_.shm->finish(ctx, in, out);
  }
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out) override { o_.shm->run(ctx, in, out); }
  void abort(const std::string&) override { o_.shm->segment().wake(); }  // the health is broken first
  std::shared_ptr<GroupMemory> allocate(size_t bytes) override;
  Micros poll_for(size_t) const override { return Micros{0}; }  // shm ops mostly finish inline
  std::string choices() const override {
    return detail::str("tcp: shared memory (cross-memory attach: ",
                       o_.shm->cross_reachable() ? "every peer reachable" : "off or out of reach", ")");
  }
  TransportCounts counts() const override {
    return {o_.shm->direct_runs(), o_.shm->cross_runs(), 0, o_.shm->cross_reachable()};
  }

 private:
  ShmTransportOptions o_;
  std::atomic<uint64_t> regions_made_{0};
  std::atomic<bool> warned_memory_{false};  // group memory fell back to plain (said once)
};

std::shared_ptr<GroupMemory> ShmTransport::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  ShmRegion::Setup s;
  s.store = o_.store;
  s.rank = o_.rank;
  s.world = o_.world;
  s.id = regions_made_.fetch_add(1);
  s.bytes = bytes;
  s.timeout = o_.timeout;
  std::shared_ptr<ShmRegion> region;
  try {
    region = ShmRegion::create(s);
  } catch (const BackendError& e) {
    // Some rank's /dev/shm had no room (every rank sees it: ShmRegion): plain memory, which
    // every op takes as well, only not in place.
    if (!warned_memory_.exchange(true)) {
      logger("tcp")->warn("{}: group '{}' gives plain host memory instead (nothing in place; said once)",
                          e.what(), o_.group);
    }
    return nullptr;
  }
  o_.shm->add_region(region);
  return std::make_shared<RegionMemory>(std::move(region));
}

class SocketTransport final : public Transport {
 public:
  SocketTransport(std::unique_ptr<SocketCollectives> sockets, int streams)
      : sockets_(std::move(sockets)), streams_(streams) {}
  TransportKind kind() const override { return TransportKind::kSocket; }
  bool eligible(const OpDesc& d, const Buffer& in) const override { return sockets_->resumable(d, in); }
  bool start(OpContext& ctx, const Buffer& in, const Buffer&, Micros budget) override {
    ctx.deadline = Deadline(ctx.timeout);  // its messages carry it from the start
    return sockets_->start(ctx, in, budget);
  }
  void finish(const OpContext& ctx, const Buffer& in, const Buffer&) override { sockets_->finish(ctx, in); }
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out) override {
    sockets_->run(ctx, in, out);
  }
  std::shared_ptr<GroupMemory> allocate(size_t) override { return nullptr; }
  // A wait polls as a wait for a message that size would.
  Micros poll_for(size_t bytes) const override { return sockets_->poll_for(bytes); }
  std::string choices() const override {
    return detail::str("tcp: sockets, ", streams_, " connection(s) to each peer");
  }
  TransportCounts counts() const override { return {}; }

 private:
  std::unique_ptr<SocketCollectives> sockets_;
  int streams_;
};

std::string large_way_text(const std::vector<LargeWay>& ways, bool routed) {
  auto text = [routed](LargeWay w) {
    switch (w) {
      case LargeWay::kFlat:
        return routed ? "flat, its hops within a host through shared memory"
                      : "flat over the group's sockets";
      case LargeWay::kOverlapped: return "split, its steps within and across hosts overlapped";
      case LargeWay::kSplit: break;
    }
    return "split, its steps in turn";
  };
  std::string all;
  for (LargeWay w : ways) all += detail::str(all.empty() ? "" : "; or ", text(w));
  if (ways.size() == 1) return all;
  return detail::str(all, "; whichever is measured faster while it runs (the first until then)");
}

class HierarchicalTransport final : public Transport {
 public:
  HierarchicalTransport(std::unique_ptr<HierarchicalCollectives> hierarchy,
                        std::unique_ptr<SocketCollectives> flat, std::string group)
      : flat_(std::move(flat)), hierarchy_(std::move(hierarchy)), group_(std::move(group)) {}
  TransportKind kind() const override { return TransportKind::kHierarchical; }
  bool eligible(const OpDesc& d, const Buffer& in) const override { return hierarchy_->starts_here(d, in); }
  bool start(OpContext& ctx, const Buffer& in, const Buffer&, Micros budget) override {
    ctx.deadline = Deadline(ctx.timeout);  // its child ops get what is left of it
    return hierarchy_->start(ctx, in, budget, step_);
  }
  void finish(const OpContext& ctx, const Buffer& in, const Buffer&) override {
    hierarchy_->finish(ctx, in, step_);
  }
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out) override {
    hierarchy_->run(ctx, in, out);
  }
  // Every rank calls it, so every rank of each host calls its host's group.
  std::shared_ptr<GroupMemory> allocate(size_t bytes) override {
    auto memory = hierarchy_->local()->allocate(bytes);
    logger("tcp")->debug("group '{}' (hierarchical): {} bytes of group memory from its host's group, {}",
                         group_, bytes, memory->shared() ? "shared" : "plain");
    return memory;
  }
  Micros poll_for(size_t bytes) const override { return flat_ ? flat_->poll_for(bytes) : Micros{0}; }
  std::string choices() const override {
    return detail::str("tcp: hierarchical; an all_reduce goes whole within the host, then across, up to ",
                       hierarchy_->small_bytes(),
                       " bytes (DDP_TCP_HIERARCHY_SMALL_BYTES; measured unless set); above, ",
                       large_way_text(hierarchy_->large_ways(), hierarchy_->routed()),
                       " (DDP_TCP_HIERARCHY_LARGE, DDP_TCP_HIERARCHY_OVERLAP)");
  }
  TransportCounts counts() const override {
    return {hierarchy_->local()->direct_ops(), 0, hierarchy_->small_bytes(), false};
  }
  void abort(const std::string& reason) override {
    hierarchy_->local()->abort(reason);
    hierarchy_->cross()->abort(reason);
  }

 private:
  std::unique_ptr<SocketCollectives> flat_;  // before hierarchy_, which points at it
  std::unique_ptr<HierarchicalCollectives> hierarchy_;
  std::string group_;
  HierarchicalStart step_;  // the op start() left: its child op in flight
};

}  // namespace

std::unique_ptr<Transport> local_transport() { return std::make_unique<LocalTransport>(); }

std::unique_ptr<Transport> shm_transport(ShmTransportOptions options) {
  return std::make_unique<ShmTransport>(std::move(options));
}

std::unique_ptr<Transport> socket_transport(std::unique_ptr<SocketCollectives> sockets, int streams) {
  return std::make_unique<SocketTransport>(std::move(sockets), streams);
}

std::unique_ptr<Transport> hierarchical_transport(std::unique_ptr<HierarchicalCollectives> hierarchy,
                                                  std::unique_ptr<SocketCollectives> flat,
                                                  std::string group) {
  return std::make_unique<HierarchicalTransport>(std::move(hierarchy), std::move(flat), std::move(group));
}

}  // namespace ddp::comm::tcp
