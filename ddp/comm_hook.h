#pragma once
// Communication hooks: how one bucket of gradients is reduced (c10d's register_comm_hook).
//
// A hook gets the bucket (a flat view of its gradients in bucket memory) and returns a Work.
// When that Work completes, bucket.buffer must hold the reduced result; the engine copies it
// out to the gradients. Built-in hooks average: they divide by pre_divide before communicating
// and by post_divide after (pre_divide * post_divide = the divisor: the world size, or the
// number of ranks that contributed under join). A user hook decides for itself.
//
// Contract: every rank runs the same hook; the hook issues the same collectives on every rank
// (joined ranks run it on zero-filled buckets to match). Hooks run one bucket after another in
// bucket order: on the engine's bucket thread when gradients are copied into buckets, on the
// thread that made the bucket ready under gradient_as_bucket_view (and on a joined rank's own
// thread); the Work may complete on a backend thread. An exception from a hook or its Work
// surfaces from finish_backward(). The buffer stays valid and untouched by the engine until
// the returned Work completes.
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
