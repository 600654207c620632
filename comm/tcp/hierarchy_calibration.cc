#include "comm/tcp/hierarchy_calibration.h"

#include <algorithm>
#include <chrono>

#include "comm/tcp/hierarchical_collectives.h"
#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::tcp {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

OpContext context(const std::string& group, DType dtype, size_t count, Millis timeout) {
  OpContext ctx;
  ctx.desc = {OpKind::kAllReduce, dtype, ReduceOp::kSum, -1, count, 0};
  ctx.group = &group;
  ctx.timeout = timeout;
  ctx.deadline = Deadline(timeout);
  return ctx;
}

}  // namespace

size_t small_bytes_from(const std::vector<size_t>& sizes, const std::vector<double>& small_minus_split) {
  DDP_CHECK(!sizes.empty() && sizes.size() == small_minus_split.size());
  size_t threshold = sizes.front() / 2;
  double sum = 0, best = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += small_minus_split[i];
    if (sum <= best) {  // a tie keeps the small path
      best = sum;
      threshold = sizes[i];
    }
  }
  return threshold;
}

size_t calibrate_small_bytes(HierarchicalCollectives& h, const std::string& group, Millis timeout) {
  std::vector<float> data(kCalibrationSizes.back() / sizeof(float), 0.0F);  // zeros: sums stay 0
  auto time_op = [&](size_t bytes, bool small) {
    const size_t n = bytes / sizeof(float);
    const auto t0 = std::chrono::steady_clock::now();
    h.all_reduce_path(context(group, DType::kFloat32, n, timeout),
                      Buffer{data.data(), n, DType::kFloat32, {}}, small);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<size_t> sizes(kCalibrationSizes.begin(), kCalibrationSizes.end());
  for (size_t bytes : sizes) {  // warm-ups: the first of each way touches its buffers
    time_op(bytes, true);
    time_op(bytes, false);
  }
  // Rounds over all sizes, the two ways in turn: a passing disturbance hits every size alike.
  std::vector<std::vector<double>> small(sizes.size()), split(sizes.size());
  for (int round = 0; round < kCalibrationRounds; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      small[i].push_back(time_op(sizes[i], true));
      split[i].push_back(time_op(sizes[i], false));
    }
  }
  std::vector<double> diff;
  for (size_t i = 0; i < sizes.size(); ++i) diff.push_back(median(small[i]) - median(split[i]));
  // Every rank's differences summed, by the small path: the same bits on every rank.
  h.all_reduce_path(context(group, DType::kFloat64, diff.size(), timeout),
                    Buffer{diff.data(), diff.size(), DType::kFloat64, {}}, true);
  const size_t threshold = small_bytes_from(sizes, diff);
  h.set_small_bytes(threshold);
  logger("tcp")->debug(
      "group '{}': hierarchical all_reduce whole within the host, then across, up to {} bytes", group,
      threshold);
  return threshold;
}

}  // namespace ddp::comm::tcp
