#include "ddp/bucket_assignment.h"

#include <algorithm>

#include "common/error.h"

namespace ddp {
namespace {

struct OpenBucket {
  BucketKey key;
  std::vector<size_t> params;
  size_t bytes = 0;
  size_t closed_before = 0;  // how many buckets of this key were already closed
};

struct Closed {
  size_t first_position;
  std::vector<size_t> params;
};

}  // namespace

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

BucketAssignment assign_buckets(const std::vector<ParamSize>& params, const std::vector<size_t>& order,
                                size_t first_cap_bytes, size_t cap_bytes) {
  DDP_CHECK_EQ(order.size(), params.size(), "assign_buckets: the order must name every parameter once");
  std::vector<size_t> position(params.size(), params.size());
  for (size_t i = 0; i < order.size(); ++i) {
    DDP_CHECK(order[i] < params.size() && position[order[i]] == params.size(),
              "assign_buckets: bad or repeated parameter index ", order[i]);
    position[order[i]] = i;
  }
  std::vector<OpenBucket> open;  // one per key; few keys, a linear search is fine
  std::vector<Closed> closed;
  auto close = [&](OpenBucket& b) {
    closed.push_back({position[b.params.front()], std::move(b.params)});
    b.params.clear();
    b.bytes = 0;
    ++b.closed_before;
  };
  for (size_t p : order) {
    const ParamSize& ps = params[p];
    auto it = std::find_if(open.begin(), open.end(), [&](const OpenBucket& b) { return b.key == ps.key; });
    if (it == open.end()) {
      open.push_back({ps.key, {}, 0, 0});
      it = open.end() - 1;
    }
    it->params.push_back(p);
    it->bytes += ps.count * comm::dtype_size(ps.key.dtype);
    size_t limit = it->closed_before == 0 ? first_cap_bytes : cap_bytes;
    if (it->bytes >= limit) close(*it);
  }
  for (auto& b : open) {
    if (!b.params.empty()) close(b);
  }
  std::sort(closed.begin(), closed.end(),
            [](const Closed& a, const Closed& b) { return a.first_position < b.first_position; });
  BucketAssignment out;
  out.reserve(closed.size());
  for (auto& c : closed) out.push_back(std::move(c.params));
  return out;
}

}  // namespace ddp
