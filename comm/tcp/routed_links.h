#pragma once
// RoutedLinks: one ByteTransport over two: ShmLinks to the ranks on this host, the group's
// sockets to the others, so an algorithm written once (byte_all_reduce.h) runs over a group
// that spans hosts with its hops within a host through shared memory, as NCCL's rings run over
// SHM within a node and the network across. Peers are the group's ranks; a wait moves both
// transports' messages (ShmLinks::wait; sockets have their own thread besides).
// A hierarchical group's flat all_reduces run over it (hierarchical_collectives.h).
#include <memory>
#include <vector>

#include "comm/tcp/byte_transport.h"
#include "comm/tcp/shm_links.h"

namespace ddp::comm::tcp {

class RoutedLinks final : public ByteTransport {
 public:
  // `local_of[r]`: group rank r's index among this host's ranks (its rank in `near`), or -1.
  RoutedLinks(ByteTransport& far, std::unique_ptr<ShmLinks> near, std::vector<int> local_of);

  int rank() const override { return far_.rank(); }
  int world() const override { return far_.world(); }
  size_t chunk_bytes() const override { return far_.chunk_bytes(); }
  void send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) override;
  void recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) override;
  void wait(Batch& b, const OpContext& ctx) override { near_->wait(b, ctx); }
  void wait_one(Batch& b, size_t k, const OpContext& ctx) override { near_->wait_one(b, k, ctx); }

 private:
  ByteTransport& far_;
  std::unique_ptr<ShmLinks> near_;
  std::vector<int> local_of_;
};

}  // namespace ddp::comm::tcp
