#include "comm/process_group.h"

#include "common/deadline.h"
#include "common/error.h"

namespace ddp::comm {
namespace {
constexpr int kMonitoredBarrierTag = -1;  // negative tags are reserved for the library
}

ProcessGroup::ProcessGroup(int rank, int size, Options options)
    : rank_(rank), size_(size), options_(options) {
  DDP_CHECK(size >= 1, "world size must be at least 1, got ", size);
  DDP_CHECK(rank >= 0 && rank < size, "rank ", rank, " is outside [0, ", size, ")");
}

void ProcessGroup::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_) {
    DDP_THROW(InvalidArgument, op, ": rank ", peer, " is outside the group [0, ", size_, ")");
  }
}

void ProcessGroup::check_reduce(const char* op, const Buffer& buf, ReduceOp rop) const {
  if (is_bitwise(rop) && !is_integer(buf.dtype)) {
    DDP_THROW(InvalidArgument, op, ": reduce op ", to_string(rop), " needs an integer dtype, got ",
              to_string(buf.dtype));
  }
  if (buf.count > 0 && buf.data == nullptr) DDP_THROW(InvalidArgument, op, ": null buffer with count ", buf.count);
}

void ProcessGroup::check_sizes(const char* op, const Buffer& small, const Buffer& large) const {
  if (small.dtype != large.dtype) {
    DDP_THROW(InvalidArgument, op, ": dtypes differ (", to_string(small.dtype), " vs ", to_string(large.dtype), ")");
  }
  if (large.count != small.count * static_cast<size_t>(size_)) {
    DDP_THROW(InvalidArgument, op, ": the large buffer must hold world_size (", size_, ") x ", small.count,
              " elements, got ", large.count);
  }
}

void ProcessGroup::check_same(const char* op, const Buffer& a, const Buffer& b) const {
  if (a.dtype != b.dtype || a.count != b.count) {
    DDP_THROW(InvalidArgument, op, ": input and output differ (", a.count, " x ", to_string(a.dtype), " vs ",
              b.count, " x ", to_string(b.dtype), ")");
  }
}

void ProcessGroup::monitored_barrier(Millis timeout) {
  Deadline deadline(resolve(timeout));
  uint8_t token = 1;
  if (size_ == 1) return;
  if (buffer_device().is_cuda()) {
    // Device-side p2p completes in issue order, so a late rank would hide which later ones
    // arrived; PyTorch offers monitored_barrier on gloo only, for the same reason.
    DDP_THROW(InvalidArgument, "monitored_barrier: not available on a ", backend_name(),
              " group (its buffers live on ", buffer_device().str(), "); run it on a host group over the same ranks: "
              "new_group(ranks, {.backend = \"tcp\"}) or \"gloo\"");
  }
  if (rank_ != 0) {
    send(view(&token, 1), 0, {kMonitoredBarrierTag, deadline.remaining()})->wait();
    recv(view(&token, 1), 0, {kMonitoredBarrierTag, deadline.remaining()})->wait();
    return;
  }
  std::vector<uint8_t> tokens(size_);
  std::vector<WorkPtr> works(size_);
  for (int r = 1; r < size_; ++r) works[r] = recv(view(&tokens[r], 1), r, {kMonitoredBarrierTag, deadline.remaining()});
  std::string missing;
  for (int r = 1; r < size_; ++r) {
    try {
      works[r]->wait(deadline.remaining());
    } catch (const Error&) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!missing.empty()) {
    DDP_THROW(TimeoutError, "monitored_barrier: ranks [", missing, "] did not arrive within ",
              resolve(timeout).count(), " ms");
  }
  std::vector<WorkPtr> acks;
  for (int r = 1; r < size_; ++r) acks.push_back(send(view(&token, 1), r, {kMonitoredBarrierTag, deadline.remaining()}));
  wait_all(acks);
}

}  // namespace ddp::comm
