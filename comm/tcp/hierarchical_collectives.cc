#include "comm/tcp/hierarchical_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "comm/reduce_kernels.h"
#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/byte_collectives.h"
#include "comm/tcp/share.h"
#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::tcp {
namespace {

Buffer slice(const Buffer& b, size_t first, size_t count) {
  return Buffer{static_cast<char*>(b.data) + first * dtype_size(b.dtype), count, b.dtype, b.device};
}

// What is left of the outer op's time, for a child op (at least 1 ms: an expired deadline is
// the child's timeout, named by it).
Millis left(const OpContext& ctx) { return std::max(Millis(1), ctx.deadline.remaining()); }

// The children's reduce op: AVG is summed, and divided once by the world size at the end.
ReduceOp child_op(const OpContext& ctx) {
  return ctx.desc.rop == ReduceOp::kAvg ? ReduceOp::kSum : ctx.desc.rop;
}

}  // namespace

HostLayout HostLayout::of(const std::vector<std::string>& host_keys) {
  HostLayout l;
  const int world = static_cast<int>(host_keys.size());
  l.host_of.assign(static_cast<size_t>(world), 0);
  l.local_of.assign(static_cast<size_t>(world), 0);
  std::map<std::string, int> host_index;
  std::vector<int> count;
  for (int r = 0; r < world; ++r) {
    auto [it, added] = host_index.emplace(host_keys[static_cast<size_t>(r)], static_cast<int>(count.size()));
    if (added) count.push_back(0);
    l.host_of[static_cast<size_t>(r)] = it->second;
    l.local_of[static_cast<size_t>(r)] = count[static_cast<size_t>(it->second)]++;
  }
  l.hosts = static_cast<int>(count.size());
  std::map<int, int> per_local;
  l.cross_of.assign(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r)
    l.cross_of[static_cast<size_t>(r)] = per_local[l.local_of[static_cast<size_t>(r)]]++;
  const bool even = std::all_of(count.begin(), count.end(), [&](int c) { return c == count.front(); });
  l.per_host = even && !count.empty() ? count.front() : 0;
  return l;
}

HierarchicalCollectives::HierarchicalCollectives(Options options, HierarchyChildren children,
                                                 SocketCollectives* flat)
    : opt_(std::move(options)),
      facts_{.world = opt_.world,
             .hosts = opt_.layout.hosts,
             .per_host = opt_.layout.per_host,
             .hierarchy_small_bytes = opt_.small_bytes},
      children_(std::move(children)),
      local_(*children_.local),
      cross_(*children_.cross),
      flat_(flat),
      large_(large_ways(), overlap_from()),
      cross_at_(cross_at(opt_.layout)) {}

Algorithm HierarchicalCollectives::algorithm(const OpDesc& d, const Buffer& in) const {
  return plan(facts_, OpFacts{.kind = d.kind, .bytes = in.bytes(), .count = in.count}).algorithm;
}

void HierarchicalCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  switch (algorithm(ctx.desc, in)) {
    case Algorithm::kHierarchicalSmall:
      return ctx.desc.kind == OpKind::kBarrier ? barrier(ctx) : all_reduce_path(ctx, in, true);
    case Algorithm::kHierarchicalLarge: return all_reduce(ctx, in);
    case Algorithm::kHierarchicalTwoStep: break;
    default: return flat_op(ctx, in, out);
  }
  switch (ctx.desc.kind) {
    case OpKind::kBroadcast: return broadcast(ctx, in);
    case OpKind::kReduce: return reduce(ctx, in);
    case OpKind::kAllGather: return all_gather(ctx, in, out);
    case OpKind::kGather: return gather(ctx, in, out);
    case OpKind::kScatter: return scatter(ctx, in, out);
    default: return reduce_scatter(ctx, in, out);
  }
}

// Above the small path's limit, the way PathChooser gives (split, overlapped, or flat over the
// group's sockets), each op timed for it.
void HierarchicalCollectives::all_reduce(const OpContext& ctx, const Buffer& buf) {
  const size_t bytes = buf.bytes();
  const LargeWay way = large_.next(bytes);
  const auto t0 = std::chrono::steady_clock::now();
  if (way == LargeWay::kFlat) {
    flat_all_reduce(ctx, buf);
  } else {
    all_reduce_path(ctx, buf, false, way == LargeWay::kOverlapped);
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (large_.record(bytes, way, us)) agree_on_way(ctx, bytes);
}

void HierarchicalCollectives::route_within_host(std::unique_ptr<ShmLinks> near) {
  std::vector<int> local_of(static_cast<size_t>(opt_.world), -1);
  const int host = opt_.layout.host_of[static_cast<size_t>(opt_.rank)];
  for (size_t r = 0; r < local_of.size(); ++r) {
    if (opt_.layout.host_of[r] == host) local_of[r] = opt_.layout.local_of[r];
  }
  routed_ = std::make_unique<RoutedLinks>(*flat_, std::move(near), std::move(local_of));
}

// Flat: the algorithm the group's sockets would run (plan.h), with its hops within this host
// through shared memory where route_within_host gave links; a one-shot stays on the sockets.
void HierarchicalCollectives::flat_all_reduce(const OpContext& ctx, const Buffer& buf) {
  const Algorithm a = flat_->algorithm(ctx.desc, buf);
  if (!routed_ || a == Algorithm::kSocketOneshot) return flat_->run(ctx, buf, buf);
  flat_->begin(ctx);
  switch (a) {
    case Algorithm::kSocketRing: return ring_all_reduce(*routed_, byte_scratch_, ctx, buf);
    case Algorithm::kSocketHalvingDoubling: return hd_all_reduce(*routed_, byte_scratch_, ctx, buf);
    default: return direct_all_reduce(*routed_, byte_scratch_, ctx, buf);
  }
}

// all_to_all: direct over the group's sockets, or routed likewise.
void HierarchicalCollectives::flat_op(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  if (!routed_) return flat_->run(ctx, in, out);
  flat_->begin(ctx);
  run_direct(*routed_, byte_scratch_, ctx, in, out);
}

void HierarchicalCollectives::agree_on_way(const OpContext& ctx, size_t bytes) {
  PathChooser::Figures sums = large_.figures(bytes);
  OpContext sum = ctx;
  sum.desc.dtype = DType::kFloat64;
  sum.desc.rop = ReduceOp::kSum;
  sum.desc.count = sums.size();
  sum.deadline = Deadline(ctx.timeout);  // its own time: the op it follows may have used up its own
  run_small(sum, Buffer{sums.data(), sums.size(), DType::kFloat64, {}});
  large_.agree(bytes, sums, detail::str("group '", ctx.group ? *ctx.group : "", "'"));  // logged
}

void HierarchicalCollectives::all_reduce_path(const OpContext& ctx, const Buffer& buf, bool small,
                                              bool overlapped) {
  const auto per = static_cast<size_t>(opt_.layout.per_host);
  const size_t q = small ? 0 : buf.count / per;
  if (q > 0) pipelined_all_reduce(ctx, slice(buf, 0, q * per), child_op(ctx), overlapped);
  const size_t tail = buf.count - q * per;
  if (tail > 0) run_small(ctx, slice(buf, q * per, tail));
}

// Within the host, then across, on this thread.
void HierarchicalCollectives::run_small(const OpContext& ctx, const Buffer& buf) {
  local_.all_reduce(buf, {child_op(ctx), left(ctx)})->wait();
  cross_.all_reduce(buf, {child_op(ctx), left(ctx)})->wait();
  end_small(ctx, buf);
}

bool HierarchicalCollectives::starts_here(const OpDesc& desc, const Buffer& in) const {
  return algorithm(desc, in) == Algorithm::kHierarchicalSmall;
}

// A barrier is a small all_reduce of a token: once a rank's step across is done, every rank of
// every host has entered (each of its peers across finished its host's step first).
Buffer HierarchicalCollectives::small_buffer(const OpContext& ctx, const Buffer& buf) {
  if (ctx.desc.kind != OpKind::kBarrier) return buf;
  return Buffer{&barrier_token_, 1, DType::kInt32, {}};
}

bool HierarchicalCollectives::start(const OpContext& ctx, const Buffer& in,
                                    std::chrono::microseconds inline_budget, HierarchicalStart& s) {
  const Buffer buf = small_buffer(ctx, in);
  s = {local_.all_reduce_within(buf, child_op(ctx), left(ctx), inline_budget), false};
  if (!s.child->is_completed()) return false;
  s.child->wait();  // its error, if it failed
  return start_crossing(ctx, buf, inline_budget, s);
}

bool HierarchicalCollectives::start_crossing(const OpContext& ctx, const Buffer& buf,
                                             std::chrono::microseconds inline_budget, HierarchicalStart& s) {
  s.crossing = true;
  s.child = children_.cross_tcp
                ? children_.cross_tcp->all_reduce_within(buf, child_op(ctx), left(ctx), inline_budget)
                : cross_.all_reduce(buf, {child_op(ctx), left(ctx)});
  if (!s.child->is_completed()) return false;
  s.child->wait();
  end_small(ctx, buf);
  return true;
}

void HierarchicalCollectives::finish(const OpContext& ctx, const Buffer& in, HierarchicalStart& s) {
  const Buffer buf = small_buffer(ctx, in);
  s.child->wait();
  if (!s.crossing) cross_.all_reduce(buf, {child_op(ctx), left(ctx)})->wait();
  end_small(ctx, buf);
}

void HierarchicalCollectives::end_small(const OpContext& ctx, const Buffer& buf) const {
  if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, opt_.world);
}

namespace {

// The child ops an outer op issued: each waited for in turn; leaving early (a failure) still
// waits for the rest, since they write the outer op's buffer and scratch.
class InFlight {
 public:
  InFlight() = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() {
    for (auto& w : works_) {
      try {
        w->wait();
      } catch (...) {  // the first failure is already on its way out
      }
    }
  }
  size_t add(WorkPtr w) {
    works_.push_back(std::move(w));
    return works_.size() - 1;
  }
  void wait(size_t i) { works_[i]->wait(); }

 private:
  std::vector<WorkPtr> works_;
};

}  // namespace

// One step per segment, handed from one thread to the other: each step done, or failed with
// the error that ends the waiting thread's later steps.
HierarchicalCollectives::Handoff::Handoff(size_t steps) : done_(steps) {
  for (auto& p : done_) ready_.push_back(p.get_future());
}

void HierarchicalCollectives::Handoff::fail_from(size_t k, const std::exception_ptr& error) {
  for (; k < done_.size(); ++k) done_[k].set_exception(error);
}

// Segments: every rank cuts the same ones (they depend on the count alone). A segment's share
// is this rank's own block of it, in place: the reduce_scatter reduces into the block it reads
// this rank's part from, and the all_gather leaves it where it is, so neither copies it (a
// scratch share doubled the steps' cost).
// Unless `overlapped`, each step runs here, the children's ops one after another (a child runs
// its op on the thread that issues it): every reduce_scatter, every all_reduce across hosts,
// every all_gather.
void HierarchicalCollectives::pipelined_all_reduce(const OpContext& ctx, const Buffer& body, ReduceOp op,
                                                   bool overlapped) {
  const auto per = static_cast<size_t>(opt_.layout.per_host);
  const auto local = static_cast<size_t>(opt_.layout.local_of[static_cast<size_t>(opt_.rank)]);
  const size_t q = body.count / per;
  const size_t segments = segments_for(body.bytes());
  const size_t sq = (q + segments - 1) / segments;  // share elements per segment
  std::vector<Segment> seg;
  for (size_t first = 0; first < q; first += sq) {
    const size_t n = std::min(sq, q - first);
    const Buffer part = slice(body, first * per, n * per);
    seg.push_back({part, slice(part, local * n, n)});
  }
  if (overlapped && seg.size() > 1) return overlapped_all_reduce(ctx, seg, op);
  InFlight flight;
  std::vector<size_t> scattered, reduced;
  for (const Segment& s : seg)
    scattered.push_back(flight.add(local_.reduce_scatter(s.body, s.share, {op, left(ctx)})));
  for (size_t k = 0; k < seg.size(); ++k) {
    flight.wait(scattered[k]);
    reduced.push_back(flight.add(cross_.all_reduce(seg[k].share, {op, left(ctx)})));
  }
  std::vector<size_t> gathered;
  for (size_t k = 0; k < seg.size(); ++k) {
    flight.wait(reduced[k]);
    if (ctx.desc.rop == ReduceOp::kAvg)
      finish_avg(seg[k].share.data, seg[k].share.count, body.dtype, opt_.world);
    gathered.push_back(flight.add(local_.all_gather(seg[k].share, seg[k].body, {left(ctx)})));
  }
  for (size_t g : gathered) flight.wait(g);
}

// Overlapped: a second thread (the local lane) runs the steps within the host, in order: every
// reduce_scatter, then each all_gather as soon as its segment came back from across hosts; this
// thread runs each segment's all_reduce across hosts as soon as its reduce_scatter is done. So
// segment k crosses hosts while k + 1 is reduced within the host and k - 1 gathered. Each side
// hands the other every step's end, or the error that ends its later steps: an error is the
// op's (this thread's first), once the lane has ended.
void HierarchicalCollectives::overlapped_all_reduce(const OpContext& ctx, const std::vector<Segment>& seg,
                                                    ReduceOp op) {
  Handoff scattered(seg.size()), reduced(seg.size());
  std::exception_ptr lane_error, error;
  std::thread lane([&] { lane_error = local_lane(ctx, seg, op, scattered, reduced); });
  for (size_t k = 0; k < seg.size(); ++k) {
    try {
      scattered.wait(k);
      cross_.all_reduce(seg[k].share, {op, left(ctx)})->wait();
      if (ctx.desc.rop == ReduceOp::kAvg)
        finish_avg(seg[k].share.data, seg[k].share.count, seg[k].share.dtype, opt_.world);
      reduced.done(k);
    } catch (...) {
      error = std::current_exception();
      reduced.fail_from(k, error);
      break;
    }
  }
  lane.join();
  if (error) std::rethrow_exception(error);
  if (lane_error) std::rethrow_exception(lane_error);
}

// The lane's steps; its own error, if any (a failure across hosts ends it quietly: the other
// thread reports that one).
std::exception_ptr HierarchicalCollectives::local_lane(const OpContext& ctx, const std::vector<Segment>& seg,
                                                       ReduceOp op, Handoff& scattered, Handoff& reduced) {
  for (size_t k = 0; k < seg.size(); ++k) {
    try {
      local_.reduce_scatter(seg[k].body, seg[k].share, {op, left(ctx)})->wait();
    } catch (...) {
      scattered.fail_from(k, std::current_exception());
      return std::current_exception();
    }
    scattered.done(k);
  }
  for (size_t k = 0; k < seg.size(); ++k) {
    try {
      reduced.wait(k);
    } catch (...) {
      return nullptr;
    }
    try {
      local_.all_gather(seg[k].share, seg[k].body, {left(ctx)})->wait();
    } catch (...) {
      return std::current_exception();
    }
  }
  return nullptr;
}

// Segments of at least Options::segment_bytes, at most Options::max_segments: each child op
// costs a round trip across hosts, which a segment that size hides.
size_t HierarchicalCollectives::segments_for(size_t bytes) const {
  if (opt_.segment_bytes == 0) return 1;
  return std::clamp<size_t>(bytes / opt_.segment_bytes, 1, std::max<size_t>(1, opt_.max_segments));
}

size_t HierarchicalCollectives::overlap_from() const {
  if (opt_.segment_bytes == 0 || opt_.max_segments < 2 || opt_.segment_bytes > SIZE_MAX / 2) return SIZE_MAX;
  return 2 * opt_.segment_bytes;
}

void HierarchicalCollectives::broadcast(const OpContext& ctx, const Buffer& buf) {
  const auto root = static_cast<size_t>(ctx.desc.root);
  const int root_local = opt_.layout.local_of[root];
  if (opt_.layout.local_of[static_cast<size_t>(opt_.rank)] == root_local) {
    cross_.broadcast(buf, {opt_.layout.cross_of[root], left(ctx)})->wait();
  }
  local_.broadcast(buf, {root_local, left(ctx)})->wait();
}

// Block (l, h) of a [local][cross] arrangement: where the rank with local index l and cross
// index h keeps its `count` elements.
size_t HierarchicalCollectives::block(int rank) const {
  const auto r = static_cast<size_t>(rank);
  return static_cast<size_t>(opt_.layout.local_of[r]) * static_cast<size_t>(opt_.layout.hosts) +
         static_cast<size_t>(opt_.layout.cross_of[r]);
}

// all_gather: across hosts among the ranks with this local index (each rank's own input crosses
// the network once per host), then within the host; the blocks arrive as [local][cross] and are
// put in group-rank order.
void HierarchicalCollectives::all_gather(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const size_t c = in.count, hosts = static_cast<size_t>(opt_.layout.hosts);
  const size_t es = dtype_size(in.dtype);
  std::vector<char>& t = scratch(2 * static_cast<size_t>(opt_.world) * c * es);
  const Buffer across{t.data(), hosts * c, in.dtype, in.device};
  const Buffer gathered{t.data() + hosts * c * es, static_cast<size_t>(opt_.world) * c, in.dtype, in.device};
  cross_.all_gather(in, across, {left(ctx)})->wait();
  local_.all_gather(across, gathered, {left(ctx)})->wait();
  for (int r = 0; r < opt_.world; ++r) {
    std::memcpy(static_cast<char*>(out.data) + static_cast<size_t>(r) * c * es,
                t.data() + (hosts + block(r)) * c * es, c * es);
  }
}

// reduce_scatter: the input's blocks put in [local][cross] order, reduce_scatter within the host
// (local index l gets the host's sum of the blocks bound for local index l on every host), then
// across hosts (this rank gets the sum of its own block). AVG: summed, divided once at the end.
void HierarchicalCollectives::reduce_scatter(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const ReduceOp op = child_op(ctx);
  const size_t c = out.count, hosts = static_cast<size_t>(opt_.layout.hosts);
  const size_t es = dtype_size(in.dtype);
  std::vector<char>& t = scratch((static_cast<size_t>(opt_.world) + hosts) * c * es);
  for (int r = 0; r < opt_.world; ++r) {
    std::memcpy(t.data() + block(r) * c * es,
                static_cast<const char*>(in.data) + static_cast<size_t>(r) * c * es, c * es);
  }
  const Buffer arranged{t.data(), static_cast<size_t>(opt_.world) * c, in.dtype, in.device};
  const Buffer host_sums{t.data() + static_cast<size_t>(opt_.world) * c * es, hosts * c, in.dtype, in.device};
  local_.reduce_scatter(arranged, host_sums, {op, left(ctx)})->wait();
  cross_.reduce_scatter(host_sums, out, {op, left(ctx)})->wait();
  if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(out.data, c, out.dtype, opt_.world);
}

// reduce: within each host to the rank with the root's local index (the host's leader for this
// op), then across hosts among the leaders to the root. A leader other than the root reduces a
// copy: a non-root's buffer is an input, left untouched. AVG: summed, divided once at the root.
void HierarchicalCollectives::reduce(const OpContext& ctx, const Buffer& buf) {
  const auto root = static_cast<size_t>(ctx.desc.root);
  const int root_local = opt_.layout.local_of[root];
  const ReduceOp op = child_op(ctx);
  if (opt_.layout.local_of[static_cast<size_t>(opt_.rank)] != root_local) {
    local_.reduce(buf, {root_local, op, left(ctx)})->wait();
    return;
  }
  Buffer sum = buf;
  if (opt_.rank != ctx.desc.root) {
    sum.data = scratch(buf.bytes()).data();
    std::memcpy(sum.data, buf.data, buf.bytes());
  }
  local_.reduce(sum, {root_local, op, left(ctx)})->wait();
  cross_.reduce(sum, {opt_.layout.cross_of[root], op, left(ctx)})->wait();
  if (opt_.rank == ctx.desc.root && ctx.desc.rop == ReduceOp::kAvg)
    finish_avg(buf.data, buf.count, buf.dtype, opt_.world);
}

// Where rank r's block sits in what a rooted op moves across hosts: [host][local] blocks, the
// hosts in the cross order of the ranks with local index `leader_local` (the root's).
size_t HierarchicalCollectives::leader_block(int rank, int leader_local) const {
  const HostLayout& l = opt_.layout;
  const auto r = static_cast<size_t>(rank);
  const size_t leader =
      static_cast<size_t>(leader_local) * static_cast<size_t>(l.hosts) + static_cast<size_t>(l.host_of[r]);
  return static_cast<size_t>(cross_at_[leader]) * static_cast<size_t>(l.per_host) +
         static_cast<size_t>(l.local_of[r]);
}

// [local][host]: the cross index of the rank with that local index on that host (O(world), once).
std::vector<int> HierarchicalCollectives::cross_at(const HostLayout& l) {
  DDP_CHECK(l.per_host > 0, "a hierarchy needs the same number of ranks on every host");
  std::vector<int> at(static_cast<size_t>(l.per_host) * static_cast<size_t>(l.hosts), 0);
  for (size_t q = 0; q < l.host_of.size(); ++q)
    at[static_cast<size_t>(l.local_of[q]) * static_cast<size_t>(l.hosts) +
       static_cast<size_t>(l.host_of[q])] = l.cross_of[q];
  return at;
}

// gather: within each host to its leader (the rank with the root's local index), then the
// hosts' blocks across to the root, which puts them in rank order.
void HierarchicalCollectives::gather(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const auto root = static_cast<size_t>(ctx.desc.root);
  const int root_local = opt_.layout.local_of[root];
  const size_t c = in.count, es = dtype_size(in.dtype), per_host = static_cast<size_t>(opt_.layout.per_host);
  const size_t world = static_cast<size_t>(opt_.world);
  std::vector<char>& t = scratch((per_host + world) * c * es);
  const Buffer host_blocks{t.data(), per_host * c, in.dtype, in.device};
  const Buffer all_blocks{t.data() + per_host * c * es, world * c, in.dtype, in.device};
  local_.gather(in, host_blocks, {root_local, left(ctx)})->wait();
  if (opt_.layout.local_of[static_cast<size_t>(opt_.rank)] != root_local) return;
  cross_.gather(host_blocks, all_blocks, {opt_.layout.cross_of[root], left(ctx)})->wait();
  if (opt_.rank != ctx.desc.root) return;
  for (int r = 0; r < opt_.world; ++r) {
    std::memcpy(at(out, static_cast<size_t>(r) * c), at(all_blocks, leader_block(r, root_local) * c), c * es);
  }
}

// scatter: the root puts the blocks in [host][local] order and sends each host's to its leader
// (the rank with the root's local index), which scatters them within the host.
void HierarchicalCollectives::scatter(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const auto root = static_cast<size_t>(ctx.desc.root);
  const int root_local = opt_.layout.local_of[root];
  const size_t c = out.count, es = dtype_size(out.dtype),
               per_host = static_cast<size_t>(opt_.layout.per_host);
  const size_t world = static_cast<size_t>(opt_.world);
  std::vector<char>& t = scratch((per_host + world) * c * es);
  const Buffer host_blocks{t.data(), per_host * c, out.dtype, out.device};
  const Buffer all_blocks{t.data() + per_host * c * es, world * c, out.dtype, out.device};
  if (opt_.layout.local_of[static_cast<size_t>(opt_.rank)] == root_local) {
    if (opt_.rank == ctx.desc.root) {
      for (int r = 0; r < opt_.world; ++r) {
        std::memcpy(at(all_blocks, leader_block(r, root_local) * c), at(in, static_cast<size_t>(r) * c),
                    c * es);
      }
    }
    cross_.scatter(all_blocks, host_blocks, {opt_.layout.cross_of[root], left(ctx)})->wait();
  }
  local_.scatter(host_blocks, out, {root_local, left(ctx)})->wait();
}

std::vector<char>& HierarchicalCollectives::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_;
}

void HierarchicalCollectives::barrier(const OpContext& ctx) { run_small(ctx, small_buffer(ctx, {})); }

}  // namespace ddp::comm::tcp
