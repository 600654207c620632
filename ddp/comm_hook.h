#pragma once
// Communication hooks: how one bucket of gradients is reduced (c10d's register_comm_hook).
// A hook gets the bucket (a flat view of its gradients in bucket memory) and returns a Work; once
// it completes, bucket.buffer holds the result, which the engine copies to the gradients and
// leaves untouched until then. Built-in hooks average: pre_divide before communicating,
// post_divide after (their product: the world size, or the contributing ranks under join).
// Contract: every rank runs the same hook, issuing the same collectives (joined ranks on
// zero-filled buckets). Hooks run one bucket after another in bucket order: on the engine's
// bucket thread, or on the thread that made the bucket ready under gradient_as_bucket_view (and
// a joined rank's own); the Work may complete on a backend thread. An exception from a hook or
// its Work surfaces from finish_backward().
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/process_group.h"

namespace ddp {

struct GradBucket {
  size_t index = 0;  // launch position, 0 first
  bool is_last = false;
  comm::Buffer buffer;                       // the flat gradients
  std::vector<size_t> params;                // parameter indices in this bucket, in memory order
  std::vector<std::vector<int64_t>> shapes;  // each parameter's shape, in the same order
  double pre_divide = 1.0;
  double post_divide = 1.0;
  double divisor() const { return pre_divide * post_divide; }
};

using CommHook = std::function<comm::WorkPtr(comm::ProcessGroup& group, GradBucket& bucket)>;

// The default: all_reduce in place, averaged (the backend's AVG when dividing by the group size).
CommHook allreduce_hook();
// Casts to float16 / bfloat16 (already divided by the divisor, so sums cannot overflow),
// all_reduces the half-size buffer, casts back into the bucket. float32/float64 buckets only.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

// Helper for hooks: a Work that completes after another, running a continuation first (comm/work.h).
using comm::chain_work;

}  // namespace ddp
