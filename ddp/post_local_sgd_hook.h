#pragma once
// Post-local SGD's comm hook, as PyTorch 1.13's post_localSGD_hook: the first
// start_local_sgd_iter iterations average gradients over the group (allreduce_hook); after
// that, gradients stay local (each rank steps on its own) or, with a subgroup, are averaged
// over that subgroup only (e.g. the ranks of one host). Pair it with a model averager that
// averages the parameters every K steps (ddp/torch/model_averaging.h: PeriodicModelAverager,
// PostLocalSGDOptimizer), with the same warm-up.
//
// Iterations count at each iteration's last bucket, as PyTorch's. Differs from PyTorch's: a
// null subgroup means no gradient communication after the warm-up (PyTorch's
// post_local_gradient_allreduce=False), where PyTorch would build per-host subgroups.
// The state belongs to one engine (hooks run one bucket at a time: no lock).
#include <cstdint>
#include <memory>

#include "ddp/comm_hook.h"

namespace ddp {

struct PostLocalSGDOptions {
  int64_t start_local_sgd_iter = 1;  // iterations of ordinary DDP first (>= 1)
  comm::ProcessGroupPtr subgroup;    // afterwards; null: none
};

class PostLocalSGDState {
 public:
  explicit PostLocalSGDState(PostLocalSGDOptions options = {});  // InvalidArgument on bad options
  const PostLocalSGDOptions& options() const { return options_; }
  int64_t iteration() const { return iter_; }

 private:
  friend CommHook post_local_sgd_hook(std::shared_ptr<PostLocalSGDState> state);
  PostLocalSGDOptions options_;
  int64_t iter_ = 0;
};

CommHook post_local_sgd_hook(std::shared_ptr<PostLocalSGDState> state);

}  // namespace ddp
