#include "comm/tcp/shm_collectives.h"

#include <array>
#include <atomic>
#include <optional>

#include "comm/tcp/cross_memory.h"
#include "comm/tcp/plan.h"
#include "comm/tcp/shm_allreduce_chunked.h"
#include "comm/tcp/shm_allreduce_cross.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_channel.h"
#include "comm/tcp/shm_exchange.h"
#include "comm/tcp/shm_exchange_cross.h"
#include "comm/tcp/shm_exchange_direct.h"
#include "comm/tcp/shm_oneshot.h"
#include "comm/tcp/shm_reduce.h"
#include "comm/tcp/shm_region.h"
#include "common/log.h"
#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

// The first peer whose memory this rank cannot reach (each announced itself before the
// group's set-up barrier: ShmSegment::announce), or -1 when it can reach all.
int unreachable_peer(const ShmSegment& segment, int rank, int world) {
  for (int p = 0; p < world; ++p) {
    if (p != rank && !cross_reachable(segment.probe_of(p))) return p;
  }
  return -1;
}

using Step = bool (*)(ShmChannel&, ShmStep&);

// Each shared-memory algorithm's step (plan.h names them).
Step step_of(Algorithm a) {
  switch (a) {
    case Algorithm::kShmAllGatherOneshotCross: return all_gather_oneshot_cross_step;
    case Algorithm::kShmAllReduceChunked: return allreduce_chunked_step;
    case Algorithm::kShmAllReduceDirect: return allreduce_direct_step;
    case Algorithm::kShmAllReduceCross: return allreduce_cross_step;
    case Algorithm::kShmReduce: return reduce_step;
    case Algorithm::kShmBroadcast: return broadcast_step;
    case Algorithm::kShmAllGather: return all_gather_step;
    case Algorithm::kShmScatter: return scatter_step;
    case Algorithm::kShmReduceScatter: return reduce_scatter_step;
    case Algorithm::kShmAllToAll: return all_to_all_step;
    case Algorithm::kShmAllGatherDirect: return all_gather_direct_step;
    case Algorithm::kShmReduceScatterDirect: return reduce_scatter_direct_step;
    case Algorithm::kShmAllGatherCross: return all_gather_cross_step;
    case Algorithm::kShmReduceScatterCross: return reduce_scatter_cross_step;
    default: return oneshot_step;
  }
}

}  // namespace

struct ShmCollectives::Impl {
  ShmChannel channel;
  ShmProgress progress;
  GroupFacts facts;  // plan()'s
  Step algorithm = nullptr;
  ShmRegions regions;
  std::optional<DirectView> direct;  // the running op's buffer in group memory
  std::atomic<uint64_t> direct_runs{0};
  bool cross = false;         // every peer's memory is reachable (cross-memory attach)
  std::vector<char> scratch;  // a slot's bytes: a peer's chunk, read by cross-memory attach
  std::atomic<uint64_t> cross_runs{0};
  // Store modes (shm_store_choice.h), one chooser for each algorithm whose ranks all write and
  // all read: chunked all_reduce, all_gather, reduce_scatter (these three also weigh
  // cross-memory attach), all_to_all.
  std::array<StoreChooser, 4> stores;
  StoreChooser* chooser = nullptr;  // the running op's, on rank 0
  StoreMode mode = StoreMode::kCached;

  Impl(ShmSegment segment, const Options& o, GroupHealth* health)
      : channel(std::move(segment), {o.rank, o.world, o.fingerprints, o.spin_us, o.yield_us, o.blocked},
                health) {
    stores.fill(StoreChooser(o.stores));
    facts = {.world = o.world,
             .per_host = o.world,
             .wanted = TransportSetting::kShm,
             .shm_oneshot_bytes = channel.geometry().oneshot_bytes,
             .shm_slot_bytes = channel.geometry().slot_bytes};
    if (o.cross == CrossSetting::kOff || o.world < 2) return;
    const int unreachable = unreachable_peer(channel.segment(), o.rank, o.world);
    cross = unreachable < 0;
    facts.cross = cross;
    if (cross) {
      scratch.assign(channel.geometry().slot_bytes, 0);  // touched now: the first op would pay its faults
      for (int i : {0, 1, 2}) stores[i].offer(StoreMode::kCross, o.cross == CrossSetting::kOn);
    } else if (o.cross == CrossSetting::kOn) {
      logger("tcp")->warn(
          "{0}=on, but rank {1} cannot reach rank {2}'s memory (process_vm_readv: its {0}=off, "
          "another user, Yama's ptrace_scope, or a seccomp filter): its collectives stage through shared "
          "memory",
          settings::kTcpCma.name, o.rank, unreachable);
    }
  }

  // The buffer a direct algorithm would run in (an all_gather's output, else the input) in
  // group memory: its view kept for the op (plan's OpFacts::in_group_memory).
  struct Looking {
    Impl* impl;
    const Buffer* view;
    uint64_t seq;
  };
  static bool look(void* self) {
    auto* l = static_cast<Looking*>(self);
    if (l->impl->regions.empty()) return false;
    l->impl->direct = l->impl->regions.find(l->view->data, l->view->bytes(), l->seq);
    return l->impl->direct.has_value();
  }

  OpFacts facts_of(const OpDesc& d, const Buffer& in, Looking* looking) const {
    return {.kind = d.kind,
            .bytes = in.bytes(),
            .count = in.count,
            .in_group_memory = looking ? look : nullptr,
            .self = looking};
  }

  void begin(const OpContext& ctx, const Buffer& in, const Buffer& out) {
    progress = {};
    direct.reset();
    Looking looking{this, ctx.desc.kind == OpKind::kAllGather ? &out : &in, ctx.desc.seq};
    const Plan p = plan(facts, facts_of(ctx.desc, in, &looking));
    algorithm = step_of(p.algorithm);
    // Rank 0 chooses for every rank (ShmChannel::begin_stores).
    chooser = channel.rank() == 0 && p.stores != StoreSlot::kNone ? &stores[static_cast<size_t>(p.stores) - 1]
                                                                  : nullptr;
    mode = chooser != nullptr ? chooser->next(in.bytes()) : StoreMode::kCached;
    const bool small = p.algorithm == Algorithm::kShmOneshot && oneshot_small(ctx.desc, in);
    channel.begin(ctx, {.direct_tag = direct ? direct->tag : 0,
                        .cross = p.offer_cross ? &in : nullptr,
                        .stores = mode,
                        .small = small ? &in : nullptr});
  }

  // One step of the op in progress: true when it is done (and every peer's fingerprint checked).
  bool step(const OpContext& ctx, const Buffer& in, const Buffer& out, ShmPoll poll) {
    ShmStep s{ctx, in, out, progress, poll, direct ? &*direct : nullptr, mode, scratch, chooser != nullptr};
    if (!algorithm(channel, s)) return false;
    channel.end(ctx);
    if (progress.direct == Decided::kTaken) direct_runs.fetch_add(1, std::memory_order_relaxed);
    if (progress.cross == Decided::kTaken) cross_runs.fetch_add(1, std::memory_order_relaxed);
    if (chooser == nullptr) return true;
    // Chosen but not run: a peer offered no buffer (it cannot reach every peer): never again.
    if (mode == StoreMode::kCross && progress.cross == Decided::kDeclined)
      chooser->withdraw(StoreMode::kCross);
    chooser->record(in.bytes(), mode, std::chrono::nanoseconds(progress.busy_ns));
    return true;
  }
};

ShmCollectives::ShmCollectives(ShmSegment segment, Options options, GroupHealth* health)
    : impl_(std::make_unique<Impl>(std::move(segment), options, health)) {}

ShmCollectives::~ShmCollectives() = default;

const ShmSegment& ShmCollectives::segment() const { return impl_->channel.segment(); }

uint64_t ShmCollectives::direct_runs() const { return impl_->direct_runs.load(std::memory_order_relaxed); }

uint64_t ShmCollectives::cross_runs() const { return impl_->cross_runs.load(std::memory_order_relaxed); }

bool ShmCollectives::cross_reachable() const { return impl_->cross; }

void ShmCollectives::add_region(const std::shared_ptr<ShmRegion>& region) { impl_->regions.add(region); }

bool ShmCollectives::resumable(const OpDesc& d, const Buffer& in) const {
  // Where the buffer lies does not change it (plan.h), so nothing is looked up.
  return shm_resumable(plan(impl_->facts, impl_->facts_of(d, in, nullptr)));
}

bool ShmCollectives::start(const OpContext& ctx, const Buffer& in, const Buffer& out, int budget_us) {
  impl_->begin(ctx, in, out);
  const bool block = !resumable(ctx.desc, in);
  return impl_->step(ctx, in, out, {block, budget_us});
}

void ShmCollectives::finish(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  while (!impl_->step(ctx, in, out, {true, 0})) {
  }
}

void ShmCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  impl_->begin(ctx, in, out);
  finish(ctx, in, out);
}

}  // namespace ddp::comm::tcp
