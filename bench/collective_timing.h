#pragma once
// How `ddp-bench collective` times one size, the same way for every implementation (ours and
// the peers), as nccl-tests does: warm up, then R repeats of { barrier; a loop of N
// back-to-back ops; this rank's time / N }, and each repeat's figure is the MAX over ranks of
// that per-op time (a two-element max all_reduce through the implementation under test, so
// neither a barrier's release skew nor a root that finishes early shortens it).
//
// Every op is checked on every rank: host buffers get a sampled check around each timed op
// (collective_check.h; a few loads and stores inside the loop); device buffers a full check of
// a freshly filled op after each repeat instead (reading device memory inside the loop would
// time the copy); and every size ends with a full check of a freshly filled op. A wrong result
// on any rank is known to all ranks (it rides the same max all_reduce), so all stop together.
#include <string>
#include <vector>

#include "bench/bench_buffer.h"
#include "bench/collective_runners.h"

namespace ddp::bench {

struct TimingOptions {
  int warmup = 5;   // untimed ops first (sampled checks too)
  int iters = 20;   // ops per timed loop (N)
  int repeats = 5;  // timed loops (R); the figure is their median
  BufferOptions memory;
  int corrupt_rank = -1;  // negative control: this rank's third op gets a wrong element (or the
                          // root's, where this rank has no result: injects_wrong_result)
};

struct SizeResult {
  std::vector<double> per_op_us;  // one per repeat: max over ranks of (loop time / N)
  bool wrong = false;             // some rank saw a wrong result (then per_op_us is partial)
  std::string error;              // this rank's first wrong result, "" when it saw none
};

// count: elements per rank as CollectiveRunner::run takes it (> 0).
SizeResult measure_size(CollectiveRunner& runner, CollOp op, size_t count, const TimingOptions& options);

}  // namespace ddp::bench
