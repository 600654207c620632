#pragma once
// ZeroRedundancyOptimizer: ZeRO stage 1 for LibTorch, as torch.distributed.optim's. The
// parameters are partitioned greedily by size (largest first, each to the rank with the fewest
// elements so far); each rank builds the factory's optimizer over its shard only, so it keeps
// optimizer state for about 1/world of the parameters. step() steps that shard with the gradients
// as they are (averaged by DDP), then each rank broadcasts its shard (coalesced), so every rank
// ends with the parameters an unsharded optimizer would give.
// Collective: construction, step() and consolidate_state_dict() on every rank, in the same
// order, with the same parameters (shapes, dtypes, order) and factory. Parameters live on the
// group's device or are staged there for the broadcast. Not thread-safe. Differs from PyTorch's:
// one parameter group (options come from the factory), no overlap_with_ddp, no
// parameters_as_bucket_view. Errors: InvalidArgument for no parameters, a null factory or
// optimizer, a bad rank; the group's errors from the collectives.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace torch::optim {
class Optimizer;
}

namespace ddp::torch {

class ZeroRedundancyOptimizer {
 public:
  using Factory = std::function<std::unique_ptr<::torch::optim::Optimizer>(std::vector<at::Tensor> params)>;

  ZeroRedundancyOptimizer(std::vector<at::Tensor> params, comm::ProcessGroupPtr group, Factory factory);
  ~ZeroRedundancyOptimizer() noexcept;
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // Steps this rank's shard, then broadcasts every shard from its owner (collective).
  void step();
  // Zeroes (or drops, with set_to_none) the gradients of every parameter, not only the shard's.
  void zero_grad(bool set_to_none = false);

  // Which rank owns parameter i (in the order given), and this rank's parameters.
  int owner(size_t param) const { return owner_.at(param); }
  const std::vector<at::Tensor>& shard() const { return shards_.at(static_cast<size_t>(rank_)); }
  ::torch::optim::Optimizer& local_optimizer() { return *local_; }

  // Collective: gathers every rank's optimizer state to rank `to`, which then holds an
  // unsharded optimizer (the factory's, over all parameters) with the full state;
  // consolidated() returns it there (nullptr elsewhere, or before the first call).
  void consolidate_state_dict(int to = 0);
  ::torch::optim::Optimizer* consolidated() { return consolidated_.get(); }
  // Local: takes this rank's shard of the state from `full`, an unsharded optimizer over the
  // same parameter tensors (e.g. the factory's over all parameters, loaded with torch::load).
  void load_consolidated(const ::torch::optim::Optimizer& full);

  // This rank's shard of the state as bytes keyed by parameter index, and back (local): load_shard
  // sets the state of the parameters of this rank's current shard that the bytes name.
  std::string save_shard() const;
  void load_shard(const std::string& bytes);
  // Recovery in place (ddp/torch/elastic_state.h): collective over every rank of the new `group`,
  // joining ones included. Partitions the parameters over it and gives each rank's new shard the
  // state that any rank of the group held for it; a shard whose rank is gone starts afresh (its
  // state was on that rank only). Call it in on_group, after the state's restore().
  void regroup(comm::ProcessGroupPtr group);

 private:
  void partition();
  void take(const std::string& bytes, bool erase_missing);

  std::vector<at::Tensor> params_;
  comm::ProcessGroupPtr group_;
  Factory factory_;
  int rank_ = 0;
  std::vector<int> owner_;
  std::vector<std::vector<at::Tensor>> shards_;  // per rank
  std::unique_ptr<::torch::optim::Optimizer> local_;
  std::unique_ptr<::torch::optim::Optimizer> consolidated_;
};

// The bytes of optimizer state tensors `optimizer` holds (SGD, Adam, AdamW, Adagrad, RMSprop
// states; other kinds count 0): what ZeRO divides by the world size.
size_t optimizer_state_bytes(const ::torch::optim::Optimizer& optimizer);

}  // namespace ddp::torch
