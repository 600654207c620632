#include "ddp/torch/elastic_state.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <random>
#include <sstream>

#include "common/error.h"

namespace ddp::torch {

ElasticState::ElasticState(::torch::nn::Module& module, ::torch::optim::Optimizer& optimizer,
                           std::vector<int64_t*> counters)
    : module_(module),
      optimizer_(&optimizer),
      counters_(std::move(counters)),
      owner_(static_cast<int64_t>(std::random_device{}() | (uint64_t{std::random_device{}()} << 32))) {}

ElasticState::ElasticState(::torch::nn::Module& module, ZeroRedundancyOptimizer& zero,
                           std::vector<int64_t*> counters)
    : module_(module),
      zero_(&zero),
      counters_(std::move(counters)),
      owner_(static_cast<int64_t>(std::random_device{}() | (uint64_t{std::random_device{}()} << 32))) {}

namespace {
at::Tensor bytes_tensor(const std::string& bytes) {
  return at::tensor(std::vector<uint8_t>(bytes.begin(), bytes.end()), at::kByte);
}
std::string bytes_of(const at::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}
}  // namespace

std::string ElasticState::save() {
  ::torch::NoGradGuard no_grad;
  ::torch::serialize::OutputArchive archive, tensors, optim;
  for (const auto& p : module_.named_parameters()) tensors.write(p.key(), p.value().detach().clone());
  for (const auto& b : module_.named_buffers()) tensors.write(b.key(), b.value().clone(), /*is_buffer=*/true);
  archive.write("tensors", tensors);
  if (zero_ != nullptr) {
    archive.write("zero", bytes_tensor(zero_->save_shard()));
  } else {
    optimizer_->save(optim);
    archive.write("optimizer", optim);
  }
  std::vector<int64_t> counters;
  for (const int64_t* c : counters_) counters.push_back(*c);
  archive.write("counters", at::tensor(counters, at::kLong));
  archive.write("owner", at::tensor(std::vector<int64_t>{owner_}, at::kLong));
  if (powersgd_) {
    const std::string bytes = powersgd_->save();
    archive.write("powersgd", bytes_tensor(bytes));
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void ElasticState::load(const std::string& bytes) {
  ::torch::NoGradGuard no_grad;
  ::torch::serialize::InputArchive archive, tensors, optim;
  std::istringstream in(bytes);
  archive.load_from(in);
  archive.read("tensors", tensors);
  auto copy_into = [&](const std::string& name, const at::Tensor& dst, bool buffer) {
    at::Tensor src;
    try {
      tensors.read(name, src, buffer);
    } catch (const c10::Error&) {
      DDP_THROW(InvalidArgument, "elastic state: tensor '", name, "' is not in the state (another model's?)");
    }
    if (!src.defined() || src.sizes() != dst.sizes()) {
      DDP_THROW(InvalidArgument, "elastic state: tensor '", name, "' does not fit the model");
    }
    dst.copy_(src);
  };
  for (const auto& p : module_.named_parameters()) copy_into(p.key(), p.value(), false);
  for (const auto& b : module_.named_buffers()) copy_into(b.key(), b.value(), true);
  at::Tensor owner;
  archive.read("owner", owner);
  const bool own = owner.item<int64_t>() == owner_;  // this process's commit, not a peer's
  try {
    if (zero_ != nullptr) {
      at::Tensor shard;
      archive.read("zero", shard);
      if (own) zero_->load_shard(bytes_of(shard));
    } else {
      archive.read("optimizer", optim);
      optimizer_->load(optim);
    }
  } catch (const c10::Error& e) {
    DDP_THROW(InvalidArgument,
              "elastic state: the optimizer's state does not fit: ", e.what_without_backtrace());
  }
  std::string powersgd;
  if (powersgd_) {
    at::Tensor bytes;
    if (!archive.try_read("powersgd", bytes))
      DDP_THROW(InvalidArgument, "elastic state: no PowerSGD state in the bytes (the saving rank kept none)");
    powersgd = bytes_of(bytes);
  }
  at::Tensor counters;
  archive.read("counters", counters);
  if (counters.numel() != static_cast<int64_t>(counters_.size())) {
    DDP_THROW(InvalidArgument, "elastic state: ", counters.numel(), " counters, the caller keeps ",
              counters_.size());
  }
  for (size_t i = 0; i < counters_.size(); ++i)
    *counters_[i] = counters[static_cast<int64_t>(i)].item<int64_t>();
  if (!powersgd_) return;
  if (own) {
    powersgd_->load(powersgd);
  } else {
    powersgd_->load_shared(powersgd);
  }
}

}  // namespace ddp::torch
