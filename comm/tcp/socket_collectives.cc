#include "comm/tcp/socket_collectives.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "comm/reduce_kernels.h"
#include "comm/tcp/byte_collectives.h"
#include "comm/tcp/share.h"
#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

// Finishes `whole` once every part has finished, with the first part's error if any. The
// parts' buffers are the whole's, so it never finishes while the engine may still touch one.
class PartsJoin {
 public:
  PartsJoin(WorkPtr whole, size_t parts) : whole_(std::move(whole)), left_(parts) {}
  void arrive(const std::exception_ptr& error) {
    std::exception_ptr first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error && !first_) first_ = error;
      if (--left_ != 0) return;
      first = first_;
    }
    whole_->finish(first);
  }

 private:
  WorkPtr whole_;
  std::mutex mu_;
  size_t left_;  // parts not finished yet
  std::exception_ptr first_;
};

}  // namespace

SocketCollectives::SocketCollectives(std::vector<SocketEngine*> engines, Options options)
    : engines_(std::move(engines)),
      opt_(std::move(options)),
      facts_{.world = opt_.world,
             .wanted = TransportSetting::kSocket,  // this group's sockets, whatever its medium
             .socket_oneshot_bytes = opt_.oneshot_bytes,
             .socket_chunk_bytes = opt_.chunk_bytes,
             .socket_algo = opt_.algo} {
  DDP_CHECK(!engines_.empty(), "SocketCollectives: no socket engine");
}

std::chrono::microseconds SocketCollectives::poll_for(size_t bytes) const {
  return bytes <= opt_.oneshot_bytes ? opt_.poll : std::chrono::microseconds{0};
}

int SocketCollectives::world_rank(int p) const {
  return opt_.world_ranks.empty() ? p : opt_.world_ranks[static_cast<size_t>(p)];
}

static_assert(kMaxSocketStreams == settings::kTcpSocketStreams.max && settings::kTcpSocketStreams.min == 1);

int socket_streams(std::optional<int64_t> fixed, int cpus, int ranks_here) {
  if (fixed) return static_cast<int>(std::clamp<int64_t>(*fixed, 1, kMaxSocketStreams));
  return std::clamp(cpus / std::max(1, ranks_here) - 1, 1, kMaxAutoSocketStreams);
}

StripePlan stripe_plan(size_t bytes, int streams, size_t chunk_bytes, size_t index) {
  const auto n = static_cast<size_t>(std::max(1, streams));
  const size_t least = std::max<size_t>(64, chunk_bytes / n);
  if (n == 1 || bytes < least) return {};
  if (bytes <= chunk_bytes) return {.lane = static_cast<int>(index % n), .counted = true};
  const size_t want = std::clamp<size_t>(bytes / least, 1, n);
  const size_t part = ((bytes + want - 1) / want + 63) / 64 * 64;
  return {.parts = (bytes + part - 1) / part, .part_bytes = part, .counted = true};
}

void SocketCollectives::send(Batch& b, int peer, int step, const void* data, size_t bytes,
                             const OpContext& ctx) {
  // The engine only reads a send's buffer; post() takes one pointer type for both directions.
  post(b, true, peer, step, const_cast<char*>(static_cast<const char*>(data)), bytes, ctx);
}

void SocketCollectives::recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) {
  post(b, false, peer, step, static_cast<char*>(data), bytes, ctx);
}

void SocketCollectives::post(Batch& b, bool is_send, int peer, int step, char* data, size_t bytes,
                             const OpContext& ctx) {
  const int64_t tag = static_cast<int64_t>(ctx.desc.seq) * kSteps + step;
  // A message travels on engine k's connection to `peer`: its lane, or part k of a split one.
  auto transfer = [&](size_t k, char* at, size_t n, const WorkPtr& work) {
    SocketEngine& engine = *engines_[k];
    if (is_send) {
      engine.send(peer, Channel::kCollective, tag, at, n, ctx.deadline, work, ctx.label());
    } else {
      engine.recv(peer, Channel::kCollective, tag, at, n, ctx.deadline, work, ctx.label());
    }
  };
  auto work = std::make_shared<PollingWork>(ctx.label(), poll_for(bytes));
  const int streams = static_cast<int>(engines_.size());
  StripePlan plan = stripe_plan(bytes, streams, opt_.chunk_bytes, 0);
  if (plan.counted) plan = stripe_plan(bytes, streams, opt_.chunk_bytes, lanes_used_[{peer, is_send, tag}]++);
  if (plan.parts == 1) {
    transfer(static_cast<size_t>(plan.lane), data, bytes, work);
  } else {
    auto join = std::make_shared<PartsJoin>(work, plan.parts);
    for (size_t i = 0; i < plan.parts; ++i) {
      const size_t off = i * plan.part_bytes;
      auto part = std::make_shared<Work>(ctx.label());
      part->then([join](Work& w) { join->arrive(w.exception()); });
      transfer(i, data + off, std::min(plan.part_bytes, bytes - off), part);
    }
  }
  b.works.emplace_back(std::move(work), peer);
}

// Waits for every message of the batch (each ends by the op's deadline at the latest).
void SocketCollectives::wait(Batch& b, const OpContext& ctx) {
  std::exception_ptr first;
  std::set<int> late_ranks;
  for (auto& [work, peer] : b.works) {
    try {
      await(*work);
    } catch (const TimeoutError&) {
      late_ranks.insert(peer);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  b.works.clear();
  if (first) std::rethrow_exception(first);
  if (!late_ranks.empty()) {
    std::string late;
    for (int p : late_ranks) late += (late.empty() ? "" : ", ") + std::to_string(world_rank(p));
    DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(), " ms waiting for ranks [",
              late, "] (sockets)");
  }
}

// Waits for the k-th message of the batch only; the batch is waited for as a whole later.
void SocketCollectives::wait_one(Batch& b, size_t k, const OpContext& ctx) {
  auto& [work, peer] = b.works[k];
  try {
    await(*work);
  } catch (const TimeoutError&) {
    DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(), " ms waiting for ranks [",
              world_rank(peer), "] (sockets)");
  }
}

void SocketCollectives::post_fingerprints(const OpContext& ctx, Fingerprints& f) {
  f.mine = Fingerprint::of(ctx.desc);
  f.theirs.assign(static_cast<size_t>(opt_.world), Fingerprint{});
  const auto tag = static_cast<int64_t>(ctx.desc.seq);
  for (int p = 0; p < opt_.world; ++p) {
    if (p == opt_.rank) continue;
    auto s = std::make_shared<PollingWork>(ctx.label(), poll_for(sizeof(Fingerprint)));
    first().send(p, Channel::kFingerprint, tag, &f.mine, sizeof(f.mine), ctx.deadline, s, ctx.label());
    auto r = std::make_shared<PollingWork>(ctx.label(), poll_for(sizeof(Fingerprint)));
    first().recv(p, Channel::kFingerprint, tag, &f.theirs[static_cast<size_t>(p)], sizeof(Fingerprint),
                 ctx.deadline, r, ctx.label());
    f.batch.works.emplace_back(s, p);
    f.batch.works.emplace_back(r, p);
  }
}

void SocketCollectives::check_fingerprints(const OpContext& ctx, Fingerprints& f) {
  wait(f.batch, ctx);
  if (!opt_.fingerprints) return;
  for (int p = 0; p < opt_.world; ++p) {
    if (p == opt_.rank) continue;
    const Fingerprint& theirs = f.theirs[static_cast<size_t>(p)];
    if (!f.mine.same_op(theirs)) {
      DDP_THROW(InvalidArgument, ctx.label(), ": mismatched collectives: rank ", world_rank(opt_.rank),
                " called ", describe(ctx.desc), " at seq ", ctx.desc.seq, " but rank ", world_rank(p),
                " called ", describe(theirs.desc()), " at seq ", theirs.seq);
    }
  }
}

void SocketCollectives::exchange_fingerprints(const OpContext& ctx) {
  Fingerprints f;
  post_fingerprints(ctx, f);
  check_fingerprints(ctx, f);
}

Algorithm SocketCollectives::algorithm(const OpDesc& d, const Buffer& in) const {
  return plan(facts_, OpFacts{.kind = d.kind, .bytes = in.bytes(), .count = in.count}).algorithm;
}

void SocketCollectives::await(Work& work) {
  if (driver_ != nullptr && !driver_->drive(work, Clock::now() + opt_.poll)) driver_->release();
  work.wait();
}

class SocketCollectives::Driving {
 public:
  explicit Driving(SocketCollectives& c) : c_(c) {
    if (c.opt_.poll.count() > 0) c.driver_ = &driver_.emplace(c.first());
  }
  ~Driving() { c_.driver_ = nullptr; }  // then driver_ releases
  Driving(const Driving&) = delete;
  Driving& operator=(const Driving&) = delete;

 private:
  SocketCollectives& c_;
  std::optional<SocketEngine::Driver> driver_;
};

void SocketCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  lanes_used_.clear();
  Driving driving(*this);
  run_op(ctx, in, out);
}

void SocketCollectives::begin(const OpContext& ctx) {
  lanes_used_.clear();
  Driving driving(*this);
  if (opt_.fingerprints) exchange_fingerprints(ctx);
}

bool SocketCollectives::resumable(const OpDesc& d, const Buffer& in) const {
  return opt_.poll.count() > 0 && algorithm(d, in) == Algorithm::kSocketOneshot;
}

bool SocketCollectives::start(const OpContext& ctx, const Buffer& in, std::chrono::microseconds budget) {
  Driving driving(*this);
  auto o = std::make_unique<OneShot>();
  post_oneshot(ctx, in, *o);
  const auto until = Clock::now() + budget;
  auto arrived = [&](Batch& b) {
    return std::all_of(b.works.begin(), b.works.end(),
                       [&](auto& w) { return driver_->drive(*w.first, until); });
  };
  if (!arrived(o->f.batch) || !arrived(o->b)) {
    pending_ = std::move(o);
    return false;
  }
  end_oneshot(ctx, in, *o);
  return true;
}

void SocketCollectives::finish(const OpContext& ctx, const Buffer& in) {
  DDP_CHECK(pending_ != nullptr, "SocketCollectives::finish: no op was started");
  std::unique_ptr<OneShot> o = std::move(pending_);
  Driving driving(*this);
  end_oneshot(ctx, in, *o);
}

void SocketCollectives::run_op(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  // A one-shot all_reduce exchanges its own, beside its data.
  const Algorithm a = algorithm(ctx.desc, in);
  const bool beside = a == Algorithm::kSocketOneshot;
  if ((opt_.fingerprints && !beside) || ctx.desc.kind == OpKind::kBarrier) exchange_fingerprints(ctx);
  switch (ctx.desc.kind) {
    case OpKind::kAllReduce: all_reduce(ctx, in, a); break;
    case OpKind::kBarrier: break;  // the exchange above was the barrier
    default: run_direct(*this, scratch_, ctx, in, out);
  }
}

}  // namespace ddp::comm::tcp
