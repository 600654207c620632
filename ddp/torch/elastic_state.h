#pragma once
// The state of a LibTorch training for recovery in place (ddp/elastic/elastic.h): a module's parameters
// and buffers, an optimizer's state, and a few counters of the caller's (epoch, step).
//
//   ddp::torch::ElasticState state(*model, optimizer, {&progress.epoch, &progress.step});
//   ddp::elastic::run(session, state, train, {.on_group = [&](const auto& g) { ddp_model.emplace(model, g);
//   }});
//
// load() copies into the existing tensors (copy_, never set_): the storage a DistributedDataParallel
// registered stays the storage it reduces, so a wrapper may live across a restore(). Rebuild the
// wrapper over each new group in on_group (its buckets belong to a group). The module, the
// optimizer and the counters must outlive the state; every rank has the same model (else load
// throws InvalidArgument naming the tensor that does not fit). Not thread-safe.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddp/elastic/elastic.h"
#include "ddp/powersgd.h"
#include "ddp/torch/zero_optimizer.h"

namespace ddp::torch {

class ElasticState : public elastic::State {
 public:
  ElasticState(::torch::nn::Module& module, ::torch::optim::Optimizer& optimizer,
               std::vector<int64_t*> counters = {});
  // With ZeRO: each rank commits its own shard of the optimizer's state; restore() rolls it
  // back; a sync leaves it alone, since on_group's zero.regroup(group) (before the sync) gave
  // each rank its new shard's state. The optimizer must outlive the state.
  ElasticState(::torch::nn::Module& module, ZeroRedundancyOptimizer& zero,
               std::vector<int64_t*> counters = {});
  // Adds the PowerSGD state of the wrapper's hook: restore() rolls it back to the commit; a sync
  // gives every rank the root's iteration, seed stream and warm Ps and Qs (so the ranks'
  // collectives pair up and their Qs agree) while the error feedback stays each rank's own (a
  // survivor's as of its commit; a joining rank's none): it is a rank's own residual.
  void keep(std::shared_ptr<PowerSGDState> powersgd) { powersgd_ = std::move(powersgd); }

 protected:
  std::string save() override;
  void load(const std::string& bytes) override;

 private:
  ::torch::nn::Module& module_;
  ::torch::optim::Optimizer* optimizer_ = nullptr;  // one of the two
  ZeroRedundancyOptimizer* zero_ = nullptr;
  std::vector<int64_t*> counters_;
  std::shared_ptr<PowerSGDState> powersgd_;
  int64_t owner_;  // this process's mark on what it saved: its own bytes carry its error feedback
};

}  // namespace ddp::torch
