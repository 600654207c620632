#include "comm/tcp/routed_links.h"

#include <utility>

namespace ddp::comm::tcp {

RoutedLinks::RoutedLinks(ByteTransport& far, std::unique_ptr<ShmLinks> near, std::vector<int> local_of)
    : far_(far), near_(std::move(near)), local_of_(std::move(local_of)) {
  near_->also_progress(&far_);
}

void RoutedLinks::send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) {
  const int local = local_of_[static_cast<size_t>(peer)];
  if (local < 0) return far_.send(b, peer, step, data, bytes, ctx);
  near_->send(b, local, step, data, bytes, ctx);
  b.works.back().second = peer;  // errors name the group's rank
}

void RoutedLinks::recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) {
  const int local = local_of_[static_cast<size_t>(peer)];
  if (local < 0) return far_.recv(b, peer, step, data, bytes, ctx);
  near_->recv(b, local, step, data, bytes, ctx);
  b.works.back().second = peer;
}

}  // namespace ddp::comm::tcp
