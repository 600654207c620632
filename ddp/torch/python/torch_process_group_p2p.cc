// Point-to-point beyond plain send/recv: the recv from any source, and c10d's monitored barrier
// (Gloo's algorithm and messages, over our send/recv).
#include <ATen/Functions.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/torch/python/tensor_lists.h"
#include "ddp/torch/python/torch_process_group.h"
#include "ddp/torch/python/torch_work.h"

namespace ddp::torch {
namespace {

// Negative tags are the library's: a user's send or recv never meets these.
constexpr int kArriveTag = -101;   // rank r -> rank 0: r reached the barrier
constexpr int kReleaseTag = -102;  // rank 0 -> rank r: every rank did

// Our op may outlive a wait that gave up on it: it keeps its tensor until it ends.
comm::WorkPtr holding(comm::WorkPtr work, at::Tensor tensor) {
  work->then([tensor](comm::Work&) {});
  return work;
}

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = only_tensor(tensors, "recvAnysource");
  auto source = std::make_shared<int>(-1);
  auto work =
      c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::RECVANYSOURCE, std::vector<at::Tensor>{t});
  work->with_source(source);
  TorchWork::track(work, {group_->recv_any(view_of(t, "recvAnysource"), source, {tag, kUseDefault})});
  return work;
}

void TorchProcessGroup::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const Millis timeout = opts.timeout.count() < 0 ? group_->timeout() : Millis(opts.timeout.count());
  const int rank = getRank();
  at::Tensor token = at::full({1}, rank, at::kLong);
  if (rank != 0) {
    // Rank 0 may spend the whole timeout on a late rank before it answers: twice that here.
    try {
      group_->send(view_of(token, "monitoredBarrier"), 0, {kArriveTag, timeout})->wait();
      group_->recv(view_of(token, "monitoredBarrier"), 0, {kReleaseTag, 2 * timeout})->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "Rank ", rank,
                  " successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                  "from rank 0. Please check rank 0 logs for faulty rank.\n Original exception: \n",
                  e.what());
    }
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<comm::WorkPtr> works;
  for (int r = 1; r < getSize(); ++r) {
    at::Tensor from = at::empty({1}, at::kLong);
    works.push_back(holding(group_->recv(view_of(from, "monitoredBarrier"), r, {kArriveTag, timeout}), from));
  }
  // Each rank in order, within what is left of the timeout (with wait_all_ranks, the whole
  // timeout each: every late rank is to be named, not only the first).
  auto wait_each = [&](const std::vector<comm::WorkPtr>& pending) {
    std::vector<int> failed;
    for (size_t i = 0; i < pending.size(); ++i) {
      const int r = static_cast<int>(i) + 1;
      Millis left = timeout;
      if (!wait_all_ranks) {
        left -= std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
        TORCH_CHECK(left.count() > 0, "Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                    " ms (ranks not yet processed: ", r, " to ", getSize() - 1, ")");
      }
      try {
        pending[i]->wait(left);
      } catch (const std::exception& e) {
        TORCH_CHECK(wait_all_ranks, "[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ",
                    timeout.count(), " ms\n Original exception: \n", e.what());
        failed.push_back(r);
      }
    }
    TORCH_CHECK(failed.empty(), "[Rank 0]: Ranks ", join(failed), " failed to pass monitoredBarrier in ",
                timeout.count(), " ms");
  };
  wait_each(works);
  works.clear();
  for (int r = 1; r < getSize(); ++r) {
    works.push_back(
        holding(group_->send(view_of(token, "monitoredBarrier"), r, {kReleaseTag, timeout}), token));
  }
  wait_each(works);
}

}  // namespace ddp::torch
