#include "comm/tcp/shm_collectives.h"

#include <array>
#include <atomic>
#include <optional>

#include "comm/tcp/cross_memory.h"
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

using Algorithm = bool (*)(ShmChannel&, ShmStep&);

constexpr size_t kPageBytes = 4096;

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
    if (o.cross == CrossSetting::kOff || o.world < 2) return;
    const int unreachable = unreachable_peer(channel.segment(), o.rank, o.world);
    cross = unreachable < 0;
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

  // Whether this op's input is offered to cross-memory attach (shm_cross.h): an all_reduce
  // (chunked, or direct whose peers' buffers may be private), all_gather or reduce_scatter past
  // the one-shot size; a one-shot all_gather of a page or more (below, the calls and the pass's
  // handshake cost more than the copies they save).
  bool offers(const OpDesc& d, const Buffer& in) const {
    if (algorithm == allreduce_chunked_step || algorithm == allreduce_direct_step) return true;
    if (algorithm == oneshot_step) return d.kind == OpKind::kAllGather && in.bytes() >= kPageBytes;
    if (algorithm == all_gather_direct_step || algorithm == reduce_scatter_direct_step) return true;
    return (algorithm == all_gather_step && d.kind == OpKind::kAllGather) || algorithm == reduce_scatter_step;
  }
  static Algorithm cross_algorithm(Algorithm a) {
    if (a == oneshot_step) return all_gather_oneshot_cross_step;  // offered: an all_gather
    if (a == allreduce_chunked_step) return allreduce_cross_step;
    if (a == all_gather_step) return all_gather_cross_step;
    if (a == reduce_scatter_step) return reduce_scatter_cross_step;
    return a;  // direct: falls back to allreduce_cross_step itself
  }

  StoreChooser* chooser_for(const OpDesc& d) {
    if (channel.rank() != 0) return nullptr;
    if (algorithm == allreduce_chunked_step || algorithm == allreduce_cross_step) return &stores[0];
    if ((algorithm == all_gather_step && d.kind == OpKind::kAllGather) ||
        algorithm == all_gather_cross_step || algorithm == all_gather_oneshot_cross_step)
      return &stores[1];
    if (algorithm == reduce_scatter_step || algorithm == reduce_scatter_cross_step) return &stores[2];
    if (algorithm == all_to_all_step) return &stores[3];
    return nullptr;
  }

  // An all_reduce's buffer, a reduce_scatter's input or an all_gather's output in group memory
  // (past the one-shot size): the op runs direct, when every rank's is at the same place.
  void find_direct(const OpDesc& d, const Buffer& in, const Buffer& out) {
    const bool gathers = algorithm == all_gather_step && d.kind == OpKind::kAllGather;
    if (algorithm != allreduce_chunked_step && algorithm != reduce_scatter_step && !gathers) return;
    const Buffer& view = gathers ? out : in;
    direct = regions.find(view.data, view.bytes(), d.seq);
    if (!direct) return;
    if (algorithm == allreduce_chunked_step)
      algorithm = allreduce_direct_step;
    else if (gathers)
      algorithm = all_gather_direct_step;
    else
      algorithm = reduce_scatter_direct_step;
  }

  void begin(const OpContext& ctx, const Buffer& in, const Buffer& out) {
    progress = {};
    algorithm = algorithm_for(ctx.desc, in, channel.geometry());
    direct.reset();
    if (!regions.empty()) find_direct(ctx.desc, in, out);
    const bool offer = cross && offers(ctx.desc, in);
    if (offer) algorithm = cross_algorithm(algorithm);
    // Rank 0 chooses for every rank (ShmChannel::begin_stores).
    chooser = chooser_for(ctx.desc);
    mode = chooser != nullptr ? chooser->next(in.bytes()) : StoreMode::kCached;
    const bool small = algorithm == oneshot_step && oneshot_small(ctx.desc, in);
    channel.begin(ctx, {.direct_tag = direct ? direct->tag : 0,
                        .cross = offer ? &in : nullptr,
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
  // An all_gather offered to cross-memory attach polls until it is decided, and its pass too
  // (all_gather_cross_step); only the staged way blocks, and it waits for the worker.
  return d.kind == OpKind::kAllReduce || oneshot_fits(d, in, impl_->channel.geometry()) ||
         (impl_->cross && d.kind == OpKind::kAllGather);
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
