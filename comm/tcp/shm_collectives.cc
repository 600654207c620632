#include "comm/tcp/shm_collectives.h"

#include <array>
#include <atomic>
#include <optional>

#include "comm/tcp/shm_allreduce_chunked.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_channel.h"
#include "comm/tcp/shm_exchange.h"
#include "comm/tcp/shm_oneshot.h"
#include "comm/tcp/shm_reduce.h"
#include "comm/tcp/shm_region.h"

namespace ddp::comm::tcp {
namespace {

using Algorithm = bool (*)(ShmChannel&, ShmStep&);

Algorithm algorithm_for(const OpDesc& d, const Buffer& in, const ShmGeometry& g) {
  if (oneshot_fits(d, in, g)) return oneshot_step;
  switch (d.kind) {
    case OpKind::kAllReduce: return allreduce_chunked_step;
    case OpKind::kReduce: return reduce_step;
    case OpKind::kReduceScatter: return reduce_scatter_step;
    case OpKind::kBroadcast: return broadcast_step;
    case OpKind::kAllGather:
    case OpKind::kGather: return all_gather_step;
    case OpKind::kScatter: return scatter_step;
    case OpKind::kAllToAll: return all_to_all_step;
    case OpKind::kBarrier: break;  // one-shot
  }
  return oneshot_step;
}

}  // namespace

struct ShmCollectives::Impl {
  ShmChannel channel;
  ShmProgress progress;
  Algorithm algorithm = nullptr;
  ShmRegions regions;
  std::optional<DirectView> direct;  // the running op's buffer in group memory
  std::atomic<uint64_t> direct_runs{0};
  // Store modes (shm_store_choice.h), one chooser for each algorithm whose ranks all write and
  // all read: chunked all_reduce, all_gather, reduce_scatter, all_to_all.
  std::array<StoreChooser, 4> stores;
  StoreChooser* chooser = nullptr;  // the running op's, on rank 0
  StoreMode mode = StoreMode::kCached;

  Impl(ShmSegment segment, const Options& o, GroupHealth* health)
      : channel(std::move(segment), {o.rank, o.world, o.fingerprints, o.spin_us, o.yield_us, o.blocked},
                health) {
    stores.fill(StoreChooser(o.stores));
  }

  StoreChooser* chooser_for(const OpDesc& d) {
    if (channel.rank() != 0) return nullptr;
    if (algorithm == allreduce_chunked_step) return &stores[0];
    if (algorithm == all_gather_step && d.kind == OpKind::kAllGather) return &stores[1];
    if (algorithm == reduce_scatter_step) return &stores[2];
    if (algorithm == all_to_all_step) return &stores[3];
    return nullptr;
  }

  void begin(const OpContext& ctx, const Buffer& in) {
    progress = {};
    algorithm = algorithm_for(ctx.desc, in, channel.geometry());
    direct.reset();
    if (algorithm == allreduce_chunked_step && !regions.empty()) {
      direct = regions.find(in.data, in.bytes(), ctx.desc.seq);
      if (direct) algorithm = allreduce_direct_step;
    }
    // Rank 0 chooses for every rank (ShmChannel::begin_stores).
    chooser = chooser_for(ctx.desc);
    mode = chooser != nullptr ? chooser->next(in.bytes()) : StoreMode::kCached;
    const bool small = algorithm == oneshot_step && oneshot_small(ctx.desc, in);
    channel.begin(ctx, direct ? direct->tag : 0, mode, small ? &in : nullptr);
  }

  // One step of the op in progress: true when it is done (and every peer's fingerprint checked).
  bool step(const OpContext& ctx, const Buffer& in, const Buffer& out, ShmPoll poll) {
    ShmStep s{ctx, in, out, progress, poll, direct ? &*direct : nullptr, mode};
    if (!algorithm(channel, s)) return false;
    channel.end(ctx);
    if (chooser != nullptr) chooser->record(in.bytes(), mode, std::chrono::nanoseconds(progress.busy_ns));
    if (progress.direct > 0) direct_runs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
};

ShmCollectives::ShmCollectives(ShmSegment segment, Options options, GroupHealth* health)
    : impl_(std::make_unique<Impl>(std::move(segment), options, health)) {}

ShmCollectives::~ShmCollectives() = default;

const ShmSegment& ShmCollectives::segment() const { return impl_->channel.segment(); }

uint64_t ShmCollectives::direct_runs() const { return impl_->direct_runs.load(std::memory_order_relaxed); }

void ShmCollectives::add_region(const std::shared_ptr<ShmRegion>& region) { impl_->regions.add(region); }

bool ShmCollectives::resumable(const OpDesc& d, const Buffer& in) const {
  return d.kind == OpKind::kAllReduce || oneshot_fits(d, in, impl_->channel.geometry());
}

bool ShmCollectives::start(const OpContext& ctx, const Buffer& in, const Buffer& out, int budget_us) {
  impl_->begin(ctx, in);
  const bool block = !resumable(ctx.desc, in);
  return impl_->step(ctx, in, out, {block, budget_us});
}

void ShmCollectives::finish(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  while (!impl_->step(ctx, in, out, {true, 0})) {
  }
}

void ShmCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  impl_->begin(ctx, in);
  finish(ctx, in, out);
}

}  // namespace ddp::comm::tcp
