#include "ddp/torch/zero_optimizer.h"

#include <ATen/Functions.h>
#include <c10/util/string_utils.h>
#include <torch/optim.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <sstream>
#include <string>

#include "common/error.h"
#include "ddp/torch/tensor_buffer.h"

namespace ddp::torch {

namespace {

// How LibTorch's optimizers key their per-parameter state.
std::string state_key(const at::Tensor& param) { return c10::guts::to_string(param.unsafeGetTensorImpl()); }

size_t bytes_of(std::initializer_list<at::Tensor> tensors) {
  size_t n = 0;
  for (const auto& t : tensors) {
    if (t.defined()) n += t.nbytes();
  }
  return n;
}

// This rank's serialized bytes, zero-padded to the longest of every rank's, so that the ranks
// can gather them into slots of one size.
struct Padded {
  at::Tensor sizes;  // every rank's length (kLong, by rank)
  int64_t most = 0;  // the longest
  at::Tensor bytes;  // this rank's, `most` long
};

Padded pad_to_longest(comm::ProcessGroup& group, const std::string& mine, const std::string& what) {
  Padded p;
  p.sizes = at::empty({group.size()}, at::kLong);
  at::Tensor my_size = at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
  group.all_gather(buffer_of(my_size, what + " size"), buffer_of(p.sizes, what + " sizes"))->wait();
  p.most = p.sizes.max().item<int64_t>();
  p.bytes = at::zeros({p.most}, at::kByte);
  std::copy(mine.begin(), mine.end(), static_cast<char*>(p.bytes.data_ptr()));
  return p;
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<at::Tensor> params, comm::ProcessGroupPtr group,
                                                 Factory factory)
    : params_(std::move(params)), group_(std::move(group)), factory_(std::move(factory)) {
  if (!group_) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: no process group");
  if (!factory_) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: no optimizer factory");
  if (params_.empty()) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: no parameters");
  rank_ = group_->rank();
  partition();
  local_ = factory_(shard());
  if (!local_) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: the factory returned no optimizer");
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() noexcept = default;

void ZeroRedundancyOptimizer::partition() {
  std::vector<size_t> order(params_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
  const auto world = static_cast<size_t>(group_->size());
  std::vector<int64_t> load(world, 0);
  owner_.assign(params_.size(), 0);
  for (size_t i : order) {
    const auto least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = static_cast<int>(least);
    load[least] += params_[i].numel();
  }
  shards_.assign(world, {});
  for (size_t i = 0; i < params_.size(); ++i) shards_[static_cast<size_t>(owner_[i])].push_back(params_[i]);
}

void ZeroRedundancyOptimizer::step() {
  local_->step();
  // One flat buffer per (owner, dtype), broadcast from the owner; every rank builds the same list.
  const at::Device device = torch_device_of(group_->buffer_device());
  struct Flat {
    std::vector<at::Tensor> params;
    at::Tensor data;
    int root = 0;
  };
  std::vector<Flat> flats;
  for (int r = 0; r < group_->size(); ++r) {
    std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
    for (const auto& p : shards_[static_cast<size_t>(r)]) by_type[p.scalar_type()].push_back(p);
    for (auto& [type, params] : by_type) {
      std::vector<at::Tensor> parts;
      for (const auto& p : params) parts.push_back(p.detach().reshape(-1));
      flats.push_back({params, at::cat(parts).to(device).contiguous(), r});
    }
  }
  std::vector<comm::WorkPtr> works;
  for (auto& f : flats) {
    comm::BroadcastOptions opts;
    opts.root = f.root;
    works.push_back(group_->broadcast(buffer_of(f.data, "ZeroRedundancyOptimizer parameters"), opts));
  }
  comm::wait_all(works);
  ::torch::NoGradGuard no_grad;
  for (auto& f : flats) {
    if (f.root == rank_) continue;
    int64_t offset = 0;
    for (auto& p : f.params) {
      p.detach().copy_(f.data.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    if (!p.mutable_grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
  }
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  const int world = group_->size();
  if (to < 0 || to >= world)
    DDP_THROW(InvalidArgument, "consolidate_state_dict: rank ", to, " is not in [0, ", world, ")");
  std::ostringstream out;
  ::torch::save(*local_, out);
  const Padded padded = pad_to_longest(*group_, out.str(), "state");
  const int64_t most = padded.most;
  at::Tensor all = rank_ == to ? at::empty({world * most}, at::kByte) : at::empty({0}, at::kByte);
  comm::GatherOptions opts;
  opts.root = to;
  group_->gather(buffer_of(padded.bytes, "optimizer state"), buffer_of(all, "optimizer states"), opts)
      ->wait();
  const at::Tensor& sizes = padded.sizes;
  if (rank_ != to) return;

  consolidated_ = factory_(params_);
  auto& full = consolidated_->state();
  for (int r = 0; r < world; ++r) {
    const auto& owned = shards_[static_cast<size_t>(r)];
    if (r == rank_) {
      for (const auto& [key, state] : local_->state()) full[key] = state->clone();
      continue;
    }
    // The owner's optimizer, rebuilt here over the same parameters, takes its saved state.
    auto theirs = factory_(owned);
    std::istringstream in(std::string(static_cast<const char*>(all.data_ptr()) + r * most,
                                      static_cast<size_t>(sizes[r].item<int64_t>())));
    ::torch::load(*theirs, in);
    for (auto& [key, state] : theirs->state()) full[key] = std::move(state);
  }
}

void ZeroRedundancyOptimizer::load_consolidated(const ::torch::optim::Optimizer& full) {
  auto& mine = local_->state();
  for (const auto& p : shard()) {
    const std::string key = state_key(p);
    auto it = full.state().find(key);
    if (it == full.state().end()) {
      mine.erase(key);
    } else {
      mine[key] = it->second->clone();
    }
  }
}

// [int64 n][n int64 parameter indices][the shard's optimizer, torch::save'd].
std::string ZeroRedundancyOptimizer::save_shard() const {
  std::vector<int64_t> indices;
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] == rank_) indices.push_back(static_cast<int64_t>(i));
  std::ostringstream out;
  const auto n = static_cast<int64_t>(indices.size());
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(reinterpret_cast<const char*>(indices.data()), static_cast<std::streamsize>(n * sizeof(int64_t)));
  ::torch::save(*local_, out);
  return out.str();
}

void ZeroRedundancyOptimizer::load_shard(const std::string& bytes) { take(bytes, true); }

void ZeroRedundancyOptimizer::take(const std::string& bytes, bool erase_missing) {
  int64_t n = 0;
  if (bytes.size() < sizeof(n)) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: a shard of no bytes");
  std::memcpy(&n, bytes.data(), sizeof(n));
  if (n < 0 || bytes.size() < sizeof(n) * static_cast<size_t>(1 + n))
    DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: a truncated shard");
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::memcpy(indices.data(), bytes.data() + sizeof(n), indices.size() * sizeof(int64_t));
  std::vector<at::Tensor> saved;
  for (int64_t i : indices) {
    if (i < 0 || static_cast<size_t>(i) >= params_.size())
      DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer: a shard names parameter ", i, " of ",
                params_.size());
    saved.push_back(params_[static_cast<size_t>(i)]);
  }
  auto theirs = factory_(saved);
  std::istringstream in(bytes.substr(sizeof(n) * static_cast<size_t>(1 + n)));
  ::torch::load(*theirs, in);
  auto& mine = local_->state();
  for (int64_t i : indices) {
    const at::Tensor& p = params_[static_cast<size_t>(i)];
    if (owner_[static_cast<size_t>(i)] != rank_) continue;
    auto it = theirs->state().find(state_key(p));
    if (it != theirs->state().end()) {
      mine[state_key(p)] = it->second->clone();
    } else if (erase_missing) {
      mine.erase(state_key(p));
    }
  }
}

void ZeroRedundancyOptimizer::regroup(comm::ProcessGroupPtr group) {
  if (!group) DDP_THROW(InvalidArgument, "ZeroRedundancyOptimizer::regroup: no process group");
  const int world = group->size();
  const Padded padded = pad_to_longest(*group, save_shard(), "shard");
  const int64_t most = padded.most;
  const at::Tensor& sizes = padded.sizes;
  at::Tensor all = at::empty({world * most}, at::kByte);
  group->all_gather(buffer_of(padded.bytes, "optimizer shard"), buffer_of(all, "optimizer shards"))->wait();
  group_ = std::move(group);
  rank_ = group_->rank();
  partition();
  local_ = factory_(shard());
  for (int r = 0; r < world; ++r) {
    take(std::string(static_cast<const char*>(all.data_ptr()) + r * most,
                     static_cast<size_t>(sizes[r].item<int64_t>())),
         false);
  }
}

size_t optimizer_state_bytes(const ::torch::optim::Optimizer& optimizer) {
  namespace optim = ::torch::optim;
  size_t n = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const optim::OptimizerParamState* s = state.get();
    if (const auto* sgd = dynamic_cast<const optim::SGDParamState*>(s)) {
      n += bytes_of({sgd->momentum_buffer()});
    } else if (const auto* adam = dynamic_cast<const optim::AdamParamState*>(s)) {
      n += bytes_of({adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()});
    } else if (const auto* adamw = dynamic_cast<const optim::AdamWParamState*>(s)) {
      n += bytes_of({adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()});
    } else if (const auto* adagrad = dynamic_cast<const optim::AdagradParamState*>(s)) {
      n += bytes_of({adagrad->sum()});
    } else if (const auto* rms = dynamic_cast<const optim::RMSpropParamState*>(s)) {
      n += bytes_of({rms->square_avg(), rms->momentum_buffer(), rms->grad_avg()});
    }
  }
  return n;
}

}  // namespace ddp::torch
