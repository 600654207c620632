#include "comm/tcp/hierarchical_collectives.h"

#include <algorithm>
#include <map>

#include "comm/tcp/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

Buffer slice(const Buffer& b, size_t first, size_t count) {
  return Buffer{static_cast<char*>(b.data) + first * dtype_size(b.dtype), count, b.dtype, b.device};
}

// What is left of the outer op's time, for a child op (at least 1 ms: an expired deadline is
// the child's timeout, named by it).
Millis left(const OpContext& ctx) { return std::max(Millis(1), ctx.deadline.remaining()); }

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
  for (int r = 0; r < world; ++r) l.cross_of[static_cast<size_t>(r)] = per_local[l.local_of[static_cast<size_t>(r)]]++;
  const bool even = std::all_of(count.begin(), count.end(), [&](int c) { return c == count.front(); });
  l.per_host = even && !count.empty() ? count.front() : 0;
  return l;
}

HierarchicalCollectives::HierarchicalCollectives(Options options, ProcessGroupPtr local, ProcessGroupPtr cross,
                                                 SocketCollectives* flat)
    : opt_(std::move(options)), local_(std::move(local)), cross_(std::move(cross)), flat_(flat) {}

void HierarchicalCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  switch (ctx.desc.kind) {
    case OpKind::kAllReduce: return all_reduce(ctx, in);
    case OpKind::kBroadcast: return broadcast(ctx, in);
    case OpKind::kBarrier: return barrier(ctx);
    default: return flat_->run(ctx, in, out);
  }
}

void HierarchicalCollectives::all_reduce(const OpContext& ctx, const Buffer& buf) {
  const ReduceOp op = ctx.desc.rop == ReduceOp::kAvg ? ReduceOp::kSum : ctx.desc.rop;
  const auto per = static_cast<size_t>(opt_.layout.per_host);
  const size_t es = dtype_size(buf.dtype);
  const size_t q = buf.bytes() <= opt_.small_bytes ? 0 : buf.count / per;
  if (q > 0) {
    if (share_.size() < q * es) share_.resize(q * es);
    const Buffer share{share_.data(), q, buf.dtype, buf.device};
    const Buffer body = slice(buf, 0, q * per);
    local_->reduce_scatter(body, share, {op, left(ctx)})->wait();
    cross_->all_reduce(share, {op, left(ctx)})->wait();
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(share.data, q, buf.dtype, opt_.world);
    local_->all_gather(share, body, {left(ctx)})->wait();
  }
  const size_t tail = buf.count - q * per;
  if (tail > 0) {
    const Buffer rest = slice(buf, q * per, tail);
    local_->all_reduce(rest, {op, left(ctx)})->wait();
    cross_->all_reduce(rest, {op, left(ctx)})->wait();
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(rest.data, tail, buf.dtype, opt_.world);
  }
}

void HierarchicalCollectives::broadcast(const OpContext& ctx, const Buffer& buf) {
  const auto root = static_cast<size_t>(ctx.desc.root);
  const int root_local = opt_.layout.local_of[root];
  if (opt_.layout.local_of[static_cast<size_t>(opt_.rank)] == root_local) {
    cross_->broadcast(buf, {opt_.layout.cross_of[root], left(ctx)})->wait();
  }
  local_->broadcast(buf, {root_local, left(ctx)})->wait();
}

void HierarchicalCollectives::barrier(const OpContext& ctx) {
  local_->barrier({left(ctx)})->wait();
  cross_->barrier({left(ctx)})->wait();
  local_->barrier({left(ctx)})->wait();
}

}  // namespace ddp::comm::tcp
