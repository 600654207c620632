#include "comm/multi_buffer.h"

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <vector>

#include "comm/reduce_kernels.h"
#include "common/deadline.h"
#include "common/error.h"

namespace ddp::comm::multi {
namespace {

constexpr int kFields = 5;

const char* field_name(int f) {
  static const char* const kNames[kFields] = {"list length", "count", "dtype", "root index", "reduce op"};
  return kNames[f];
}

int64_t field(const ListShape& s, int f) {
  const int64_t values[kFields] = {s.length, s.count, s.dtype, s.root_index, s.op};
  return values[f];
}

std::string field_value(int f, int64_t v) {
  if (f == 2 && v >= 0) return to_string(static_cast<DType>(v));
  if (f == 4 && v >= 0) return to_string(static_cast<ReduceOp>(v));
  return std::to_string(v);
}

// The Work the caller sees: `inner`'s outcome, after `finish` ran on success.
WorkPtr then_finish(const WorkPtr& inner, const char* op, std::function<void()> finish) {
  return chain_work(inner, std::move(finish), std::string(op) + " (" + inner->description() + ")");
}

// Host scratch of `like`'s dtype and `count` elements, kept alive by the shared_ptr.
std::pair<Buffer, std::shared_ptr<std::vector<unsigned char>>> scratch(const Buffer& like, size_t count) {
  auto mem = std::make_shared<std::vector<unsigned char>>(count * dtype_size(like.dtype));
  return {Buffer{mem->data(), count, like.dtype, Device{}}, mem};
}

ReduceOp across(ReduceOp op) { return op == ReduceOp::kAvg ? ReduceOp::kSum : op; }

}  // namespace

ListShape shape_of(std::span<const Buffer> list, int root_index, int op) {
  ListShape s;
  s.length = static_cast<int64_t>(list.size());
  s.count = list.empty() ? 0 : static_cast<int64_t>(list[0].count);
  s.dtype = list.empty() ? -1 : static_cast<int64_t>(list[0].dtype);
  s.root_index = root_index;
  s.op = op;
  return s;
}

std::string find_mismatch(std::span<const ListShape> rows) {
  for (size_t r = 1; r < rows.size(); ++r) {
    for (int f = 0; f < kFields; ++f) {
      const int64_t mine = field(rows[r], f), first = field(rows[0], f);
      if (mine == first) continue;
      std::ostringstream os;
      os << "rank " << r << " has " << field_name(f) << " " << field_value(f, mine) << " where rank 0 has "
         << field_value(f, first) << " (every rank must pass the same list shape)";
      return os.str();
    }
  }
  return "";
}

void agree(ProcessGroup& pg, const char* op, const ListShape& mine, Millis timeout) {
  if (pg.size() == 1) return;
  const size_t n = static_cast<size_t>(pg.size());
  std::vector<int64_t> in(kFields), all(kFields * n);
  for (int f = 0; f < kFields; ++f) in[static_cast<size_t>(f)] = field(mine, f);
  pg.all_gather(view(in.data(), in.size()), view(all.data(), all.size()), {timeout})->wait();
  std::vector<ListShape> rows(n);
  for (size_t r = 0; r < n; ++r) {
    const int64_t* v = all.data() + r * kFields;
    rows[r] = ListShape{v[0], v[1], v[2], v[3], v[4]};
  }
  std::string mismatch = find_mismatch(rows);
  if (!mismatch.empty()) DDP_THROW(InvalidArgument, op, ": ", mismatch);
}

void reduce_into(const Buffer& dst, std::span<const Buffer> srcs, ReduceOp op) {
  if (dst.count == 0) return;
  size_t held = srcs.size();  // the source dst already is, if any
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (srcs[i].data == dst.data) held = i;
  }
  if (held < srcs.size()) {
    for (size_t i = 0; i < srcs.size(); ++i) {
      if (i != held) combine(dst.data, srcs[i].data, dst.count, dst.dtype, op);
    }
    return;
  }
  if (srcs.size() == 1) {
    if (dst.bytes() > 0) std::memcpy(dst.data, srcs[0].data, dst.bytes());
    return;
  }
  combine3(dst.data, srcs[0].data, srcs[1].data, dst.count, dst.dtype, op);
  for (size_t i = 2; i < srcs.size(); ++i) combine(dst.data, srcs[i].data, dst.count, dst.dtype, op);
}

void fan_out(const Buffer& src, std::span<const Buffer> dsts) {
  for (const Buffer& d : dsts) {
    if (d.data != src.data && d.bytes() > 0) std::memcpy(d.data, src.data, d.bytes());
  }
}

void pack(std::span<const Buffer> srcs, const Buffer& dst) {
  auto* out = static_cast<unsigned char*>(dst.data);
  for (const Buffer& s : srcs) {
    if (s.bytes() > 0) std::memcpy(out, s.data, s.bytes());
    out += s.bytes();
  }
}

// ---- the four ops ----

WorkPtr all_reduce(ProcessGroup& pg, std::span<const Buffer> buffers, AllReduceOptions opts) {
  Deadline deadline(opts.timeout);
  agree(pg, "all_reduce_multi", shape_of(buffers, -1, static_cast<int>(opts.op)), opts.timeout);
  std::vector<Buffer> list(buffers.begin(), buffers.end());
  reduce_into(list[0], list, opts.op);
  const int divisor = opts.op == ReduceOp::kAvg ? pg.size() * static_cast<int>(list.size()) : 1;
  auto inner = pg.all_reduce(list[0], {across(opts.op), deadline.remaining()});
  return then_finish(inner, "all_reduce_multi", [list = std::move(list), divisor] {
    finish_avg(list[0].data, list[0].count, list[0].dtype, divisor);
    fan_out(list[0], list);
  });
}

WorkPtr broadcast(ProcessGroup& pg, std::span<const Buffer> buffers, BroadcastMultiOptions opts) {
  Deadline deadline(opts.timeout);
  agree(pg, "broadcast_multi", shape_of(buffers, opts.root_index), opts.timeout);
  std::vector<Buffer> list(buffers.begin(), buffers.end());
  const Buffer src = pg.rank() == opts.root ? list[static_cast<size_t>(opts.root_index)] : list[0];
  auto inner = pg.broadcast(src, {opts.root, deadline.remaining()});
  return then_finish(inner, "broadcast_multi", [list = std::move(list), src] { fan_out(src, list); });
}

WorkPtr reduce(ProcessGroup& pg, std::span<const Buffer> buffers, ReduceMultiOptions opts) {
  Deadline deadline(opts.timeout);
  agree(pg, "reduce_multi", shape_of(buffers, opts.root_index, static_cast<int>(opts.op)), opts.timeout);
  const bool root = pg.rank() == opts.root;
  // The root accumulates in its root buffer; other ranks in scratch (their buffers are inputs).
  std::shared_ptr<std::vector<unsigned char>> mem;
  Buffer acc = buffers[static_cast<size_t>(opts.root_index)];
  if (!root) std::tie(acc, mem) = scratch(buffers[0], buffers[0].count);
  reduce_into(acc, buffers, opts.op);
  const int divisor = root && opts.op == ReduceOp::kAvg ? pg.size() * static_cast<int>(buffers.size()) : 1;
  auto inner = pg.reduce(acc, {opts.root, across(opts.op), deadline.remaining()});
  return then_finish(inner, "reduce_multi",
                     [acc, mem, divisor] { finish_avg(acc.data, acc.count, acc.dtype, divisor); });
}

WorkPtr all_gather(ProcessGroup& pg, std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                   AllGatherOptions opts) {
  Deadline deadline(opts.timeout);
  agree(pg, "all_gather_multi", shape_of(inputs), opts.timeout);
  auto [packed, mem] = scratch(inputs[0], inputs[0].count * inputs.size());
  pack(inputs, packed);
  std::vector<Buffer> outs(outputs.begin(), outputs.end());
  auto inner = pg.all_gather(packed, outs[0], {deadline.remaining()});
  return then_finish(inner, "all_gather_multi",
                     [outs = std::move(outs), mem = mem] { fan_out(outs[0], outs); });
}

}  // namespace ddp::comm::multi
