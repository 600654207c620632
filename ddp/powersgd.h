#pragma once
// PowerSGD: low-rank gradient compression with error feedback, as PyTorch 1.13's
// torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook (Vogels et al., 2019), with its options
// and steps: plain averaged all_reduce for the first start_powersgd_iter iterations, then per
// bucket the matrices too small to compress (every 1-D tensor) averaged uncompressed and the others
// as P = M Q, Q = M^T P: three collectives per bucket. Every rank seeds its Qs alike (numpy's
// RandomState(random_seed)); ddp/torch/powersgd_random.h fills them with torch.randn's values, for
// Qs equal to PyTorch's. Differences: orthogonalisation is always Gram-Schmidt (PyTorch's QR for
// rank > 2 gives the same Q up to column signs, which cancel in P Q^T), and a zero column stays
// zero where PyTorch (epsilon 0) would divide by zero.
// Host float32/float64 buckets only (InvalidArgument otherwise). The state belongs to one
// engine; the hook runs one bucket at a time (comm_hook.h), so it takes no lock. Its
// collectives are waited for inside the hook (the bucket thread), in the same order on every rank.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ddp/comm_hook.h"
#include "ddp/device_ops.h"

namespace ddp {

struct PowerSGDOptions {
  int matrix_approximation_rank = 1;
  int64_t start_powersgd_iter = 1000;  // > 1 with error feedback or warm start (bucket rebuild)
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  uint32_t random_seed = 0;
  // Fills each Q, in order, with standard normal values from a generator seeded with `seed`.
  // Empty: the built-in generator.
  std::function<void(uint64_t seed, const std::vector<comm::Buffer>& qs)> random_normal;
};

class PowerSGDState {
 public:
  explicit PowerSGDState(PowerSGDOptions options = {});  // InvalidArgument on bad options
  const PowerSGDOptions& options() const { return options_; }
  int64_t iteration() const { return iter_; }
  // Elements before and after compression, summed over every compressed step and bucket.
  int64_t numel_before_compression() const { return numel_before_; }
  int64_t numel_after_compression() const { return numel_after_; }

  // Checkpoints: save() is this rank's state as bytes (the iteration, the seed stream, the warm
  // Ps and Qs, equal on every rank, and the error feedback, this rank's own); load() on a state
  // of the same options resumes where the saving one was (a checkpoint per rank, as PyTorch
  // pickles PowerSGDState). load_shared() takes all but the error feedback, which stays this
  // rank's: for a rank taking another's state (recovery in place, ddp/torch/elastic_state.h).
  // Malformed bytes, or another rank or feedback setting: InvalidArgument, the state unchanged.
  std::string save() const;
  void load(const std::string& bytes);
  void load_shared(const std::string& bytes);

 private:
  friend class PowerSGDBucket;
  friend CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state);
  struct Memory {
    DeviceMemory error, p, q;
    bool low_rank = false;  // p and q allocated (and q kept for warm start)
  };
  void maybe_increase_iter(const GradBucket& bucket) {
    if (bucket.is_last) ++iter_;
  }
  uint32_t next_seed();  // numpy's RandomState.randint(1_000_000_000)
  void load(const std::string& bytes, bool with_error);

  PowerSGDOptions options_;
  std::mt19937 rng_;                 // numpy's legacy MT19937, seeded alike
  std::map<size_t, Memory> memory_;  // by bucket index
  int64_t iter_ = 0;
  int64_t numel_before_ = 0, numel_after_ = 0;
};

CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state);

}  // namespace ddp
