#include "ddp/torch/python/torch_process_group.h"

#include <array>
#include <atomic>
#include <cstdio>

#include "comm/backend.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/settings.h"
#include "ddp/torch/python/c10d_store.h"
#include "ddp/torch/python/tensor_lists.h"
#include "ddp/torch/python/torch_work.h"
#include "rendezvous/prefix_store.h"

namespace ddp::torch {
namespace {

constexpr const char* kTokenKey = "ddp_torch/job_token";

// The job token our backend authenticates its connections with: the launcher's when it set one,
// else a fresh one from rank 0, shared through the store (whoever can read the store may join).
std::string job_token_for(const PluginOptions& options, rdzv::Store& store, int rank) {
  if (!options.job_token.empty()) return options.job_token;
  std::string from_env = settings::get_or(settings::kJobToken, "");
  if (!from_env.empty()) return from_env;
  if (rank == 0) {
    std::array<uint8_t, 16> bytes{};
    auth::random_bytes(bytes.data(), bytes.size());
    std::string token;
    for (uint8_t b : bytes) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", b);
      token += hex;
    }
    store.set(kTokenKey, token);
    return token;
  }
  return store.get_string(kTokenKey, options.timeout);
}

c10::intrusive_ptr<TorchWork> make_work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> keep_alive = {}) {
  return c10::make_intrusive<TorchWork>(rank, type, std::move(outputs), std::move(keep_alive));
}

}  // namespace

TorchProcessGroup::TorchProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     PluginOptions options)
    : c10d::ProcessGroup(rank, size) {
  if (size < 1 || rank < 0 || rank >= size) {
    DDP_THROW(InvalidArgument, "ddp backend: rank ", rank, " is outside a group of ", size);
  }
  if (options.timeout.count() <= 0) DDP_THROW(InvalidArgument, "ddp backend: the timeout must be positive");
  if (!options.global_ranks.empty() && static_cast<int>(options.global_ranks.size()) != size) {
    DDP_THROW(InvalidArgument, "ddp backend: ", options.global_ranks.size(), " global ranks for a group of ",
              size);
  }
  auto ours = std::make_shared<C10dStore>(store);
  comm::GroupSetup setup;
  setup.store = std::make_shared<rdzv::PrefixStore>("ddp", ours);
  setup.rank = rank;
  setup.size = size;
  setup.options.timeout = options.timeout;
  setup.job_token = job_token_for(options, *setup.store, rank);
  setup.global_ranks = options.global_ranks;
  if (setup.global_ranks.empty()) {
    for (int r = 0; r < size; ++r) setup.global_ranks.push_back(r);
  }
  setup.name = options.name;
  group_ = comm::create_group(options.backend, setup);
  init();
}

namespace {
std::atomic<BlockingSection> g_blocking_section{nullptr};
}  // namespace

void set_blocking_section(BlockingSection section) { g_blocking_section.store(section); }

TorchProcessGroup::~TorchProcessGroup() {
  auto shut_down = [this] { group_.reset(); };
  if (BlockingSection section = g_blocking_section.load()) {
    section(shut_down);
  } else {
    shut_down();
  }
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = only_tensor(tensors, "broadcast");
  const int root = root_of(opts.rootRank, opts.rootTensor, getSize(), "broadcast");
  auto work = make_work(getRank(), c10d::OpType::BROADCAST, {t});
  TorchWork::track(work, {group_->broadcast(view_of(t, "broadcast"), {root, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors.front().is_sparse()) return allreduce_sparse(tensors.front(), opts);
  const at::Tensor& t = only_tensor(tensors, "allreduce");
  const comm::ReduceOp op = reduce_op_of(opts.reduceOp, "allreduce");
  auto work = make_work(getRank(), c10d::OpType::ALLREDUCE, {t});
  TorchWork::track(work, {group_->all_reduce(view_of(t, "allreduce"), {op, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const comm::ReduceOp op = reduce_op_of(opts.reduceOp, "allreduce_coalesced");
  std::vector<comm::Buffer> views;
  for (const auto& t : tensors) views.push_back(view_of(t, "allreduce_coalesced"));  // all checked first
  auto work = make_work(getRank(), c10d::OpType::ALLREDUCE_COALESCED, tensors);
  std::vector<comm::WorkPtr> works;
  for (const auto& v : views) works.push_back(group_->all_reduce(v, {op, timeout_of(opts.timeout)}));
  TorchWork::track(work, std::move(works));
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const at::Tensor& t = only_tensor(tensors, "reduce");
  const int root = root_of(opts.rootRank, opts.rootTensor, getSize(), "reduce");
  const comm::ReduceOp op = reduce_op_of(opts.reduceOp, "reduce");
  auto work = make_work(getRank(), c10d::OpType::REDUCE, {t});
  TorchWork::track(work, {group_->reduce(view_of(t, "reduce"), {root, op, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  auto work = make_work(getRank(), c10d::OpType::BARRIER, {});
  TorchWork::track(work, {group_->barrier({timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const at::Tensor& t = only_tensor(tensors, "send");
  auto work = make_work(getRank(), c10d::OpType::SEND, {t});
  TorchWork::track(work, {group_->send(view_of(t, "send"), dst, {tag, kUseDefault})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const at::Tensor& t = only_tensor(tensors, "recv");
  auto work = make_work(getRank(), c10d::OpType::RECV, {t});
  TorchWork::track(work, {group_->recv(view_of(t, "recv"), src, {tag, kUseDefault})});
  return work;
}

}  // namespace ddp::torch
