#pragma once
// Engine options: c10d DistributedDataParallel's knobs, with its defaults. Options that change
// the sequence of collectives are part of the cross-rank check at finalize(): ranks that
// disagree fail with an error instead of hanging.
#include <cstddef>
#include <string>

namespace ddp {

struct EngineOptions {
  // Broadcast parameters and buffers from rank 0 in finalize().
  bool broadcast_at_construction = true;
  // Broadcast buffers from rank 0 (the lowest active rank under join) in every pre_forward().
  bool broadcast_buffers = true;
  // Bucket sizes: the first bucket (launched first: the last layers' gradients) is small so that
  // communication starts early; the rest hold up to bucket_cap_mb.
  double first_bucket_cap_mb = 1.0;
  double bucket_cap_mb = 25.0;
  // Gradients live inside bucket memory: no copy in or out. The engine allocates them; get
  // the views with Engine::grad() (they move once, at the bucket rebuild after iteration 1).
  bool gradient_as_bucket_view = false;
  // Parameters not marked ready by finish_backward() are reduced as zeros; when off, that is
  // an error naming them (unless no parameter was marked at all: the fairseq mode).
  bool find_unused_parameters = false;
  // The set of used parameters is the same every iteration: found once in iteration 1, then
  // the unused ones are marked ready at the start of each iteration (keeps the overlap).
  bool static_graph = false;
  // Rebuild the buckets once after the first iteration, in the order gradients became ready.
  bool rebuild_buckets = true;
  // Gradients are divided by this before the all_reduce and by world_size / factor after
  // (c10d's gradient_predivide_factor): guards low-precision sums against overflow.
  double gradient_predivide_factor = 1.0;
  // A Chrome trace of every step, one file per rank (ddp/timeline.h); empty: the DDP_TIMELINE
  // variable's path, or none. Not part of the cross-rank check.
  std::string timeline;
};

}  // namespace ddp
