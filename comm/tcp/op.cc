#include "comm/tcp/op.h"

#include "common/error.h"

namespace ddp::comm::tcp {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kBarrier: return "barrier";
  }
  return "unknown-op";
}

std::string describe(const OpDesc& d) {
  if (d.kind == OpKind::kBarrier) return "barrier()";
  std::string out = detail::str(to_string(d.kind), "(", to_string(d.dtype), " x ", d.count);
  const bool reduces =
      d.kind == OpKind::kAllReduce || d.kind == OpKind::kReduce || d.kind == OpKind::kReduceScatter;
  if (reduces) out += detail::str(", ", to_string(d.rop));
  if (d.root >= 0) out += detail::str(", root ", d.root);
  return out + ")";
}

Fingerprint Fingerprint::of(const OpDesc& d) {
  Fingerprint f;
  f.seq = d.seq;
  f.count = d.count;
  f.root = d.root;
  f.kind = static_cast<uint8_t>(d.kind);
  f.dtype = static_cast<uint8_t>(d.dtype);
  f.rop = static_cast<uint8_t>(d.rop);
  f.valid = 1;
  return f;
}

uint64_t Fingerprint::hash() const {
  // Word by word, three multiply-xorshift rounds (splitmix64's finalizer): every op computes
  // it, and a byte-wise hash is a chain of 32 dependent multiplies, a tenth of a small op.
  auto mix = [](uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 32);
  };
  const uint64_t fields = uint64_t{kind} | uint64_t{dtype} << 8 | uint64_t{rop} << 16 |
                          uint64_t{static_cast<uint32_t>(root)} << 24;
  uint64_t h = mix(seq + 0x9e3779b97f4a7c15ull);
  h = mix(h ^ count);
  h = mix(h ^ fields);
  return h | 1;
}

OpDesc Fingerprint::desc() const {
  OpDesc d;
  d.seq = seq;
  d.count = count;
  d.root = root;
  d.kind = static_cast<OpKind>(kind);
  d.dtype = static_cast<DType>(dtype);
  d.rop = static_cast<ReduceOp>(rop);
  return d;
}

const std::string& OpContext::label() const {
  if (label_.empty()) {
    label_ = detail::str(to_string(desc.kind), " (seq ", desc.seq, ") on group '",
                         group ? *group : std::string("?"), "'");
  }
  return label_;
}

void GroupHealth::fail(FailureKind kind, int peer, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kind_ != FailureKind::kNone) return;
  kind_ = kind;
  peer_ = peer;
  reason_ = reason;
  broken_.store(true, std::memory_order_release);
}

void GroupHealth::init(int world) {
  departed_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(world));
  for (int p = 0; p < world; ++p) departed_[static_cast<size_t>(p)].store(false);
}

int GroupHealth::lost_peer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peer_;
}

FailureKind GroupHealth::kind() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kind_;
}

void GroupHealth::rethrow(const std::string& label) const {
  FailureKind kind;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kind = kind_;
    reason = reason_;
  }
  switch (kind) {
    case FailureKind::kNetwork: DDP_THROW(NetworkError, label, ": ", reason);
    case FailureKind::kTimeout:
      DDP_THROW(TimeoutError, label, ": the group is unusable after an earlier timeout: ", reason);
    case FailureKind::kAborted: DDP_THROW(Aborted, label, ": aborted: ", reason);
    case FailureKind::kMismatch:
      DDP_THROW(InvalidArgument, label, ": the group is unusable after mismatched collectives: ", reason);
    default: DDP_THROW(NetworkError, label, ": the group is unusable: ", reason);
  }
}

}  // namespace ddp::comm::tcp
