#pragma once
// The size up to which a hierarchical all_reduce takes its small path (the whole buffer within
// the host, then across: L times the buffer per host on the link) instead of the split one
// (1/L across per rank, but one more step within the host). Which wins is the link's to say, so
// it is measured when the group is made (calibrate_small_bytes) unless
// DDP_TCP_HIERARCHY_SMALL_BYTES fixes it: every rank times both paths at each size of
// kCalibrationSizes (a warm-up op of each, then kCalibrationRounds rounds over all sizes, the
// ways in turn, so a passing disturbance hits every size alike); the medians' differences are
// summed over all ranks by the small path itself (every rank gets the same bits); the threshold
// is the end of the prefix of sizes whose summed differences are lowest (small_bytes_from), so
// one noisy size does not move it far. It costs 2 x (1 + rounds) all_reduces per size.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "comm/tcp/op.h"

namespace ddp::comm::tcp {

class HierarchicalCollectives;

inline constexpr std::array<size_t, 7> kCalibrationSizes = {4 << 10,  8 << 10,   16 << 10, 32 << 10,
                                                            64 << 10, 128 << 10, 256 << 10};
inline constexpr int kCalibrationRounds = 5;

// The threshold from the summed (small - split) differences, one per size in `sizes`
// (ascending): the size whose prefix sum of differences is lowest (<= 0; the largest on a tie);
// half the first size when no prefix sum is <= 0.
size_t small_bytes_from(const std::vector<size_t>& sizes, const std::vector<double>& small_minus_split);

// Times both paths on `h`'s children and returns the threshold every rank agrees on (and sets it).
// Collective: every rank of the group calls it, before any other op. Ops carry `timeout`.
size_t calibrate_small_bytes(HierarchicalCollectives& h, const std::string& group, Millis timeout);

}  // namespace ddp::comm::tcp
