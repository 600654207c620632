#include "ddp/post_local_sgd_hook.h"

#include <string>
#include <utility>

#include "common/error.h"

namespace ddp {

PostLocalSGDState::PostLocalSGDState(PostLocalSGDOptions options) : options_(std::move(options)) {
  if (options_.start_local_sgd_iter < 1) {
    DDP_THROW(InvalidArgument, "post_local_sgd_hook: start_local_sgd_iter must be at least 1, got ",
              options_.start_local_sgd_iter);
  }
}

CommHook post_local_sgd_hook(std::shared_ptr<PostLocalSGDState> state) {
  DDP_CHECK(state != nullptr, "post_local_sgd_hook: no state");
  CommHook average = allreduce_hook();
  return [state = std::move(state), average](comm::ProcessGroup& group, GradBucket& bucket) -> comm::WorkPtr {
    PostLocalSGDState& s = *state;
    if (s.iter_ < s.options_.start_local_sgd_iter) {
      if (bucket.is_last) ++s.iter_;
      return average(group, bucket);
    }
    const comm::ProcessGroupPtr& sub = s.options_.subgroup;
    if (!sub) return comm::Work::completed("post_local_sgd bucket " + std::to_string(bucket.index));
    // Averaged over the subgroup: the engine's divisor is the whole group's.
    GradBucket local = bucket;
    local.pre_divide = 1.0;
    local.post_divide = static_cast<double>(sub->size());
    return average(*sub, local);
  };
}

}  // namespace ddp
