#pragma once
// ShmLinks: a ByteTransport (byte_transport.h) over shared memory, so the algorithms written
// over it (byte_all_reduce.h) run between the ranks of one host as they do over sockets.
// - Each rank's region (shm_region.h) holds a FIFO to each peer: the sender writes a message (a
//   16-byte header: step and size, then its bytes) and publishes how far it wrote; the receiver
//   copies it out and publishes how far it read. One writer per counter.
// - No thread of its own: a wait moves every pending message as far as the FIFOs allow (a send
//   larger than a FIFO streams through it), polling, yielding, then sleeping on its bell, which
//   a peer rings as it writes to or reads from this rank (with nothing of its own pending: on
//   the other transport's message). A message whose receive is not posted yet is kept aside.
// - A wait ends by the op's deadline (a TimeoutError naming the ranks that did not deliver) or
//   with the group's health (a lost peer); then the links hold nothing of the op. A receive of
//   the wrong size fails alone. Made collectively; then used by one thread at a time.
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/tcp/byte_transport.h"

namespace ddp::rdzv {
class Store;
}

namespace ddp::comm::tcp {

class ShmRegion;

class ShmLinks final : public ByteTransport {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    size_t chunk_bytes = 256 << 10;
    size_t fifo_bytes = 512 << 10;  // each FIFO's data (a multiple of 16)
    int spin_us = 200;              // then yield ...
    int yield_us = 20000;           // ... then sleep in short slices
    Millis timeout{60'000};         // for the set-up
  };
  // The regions meet in `store` (the group's; keys under "tcp/links/").
  ShmLinks(const std::shared_ptr<rdzv::Store>& store, Options options, GroupHealth* health);
  ~ShmLinks() override;

  int rank() const override { return o_.rank; }
  int world() const override { return o_.world; }
  size_t chunk_bytes() const override { return o_.chunk_bytes; }
  void send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) override;
  void recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) override;
  // Any Work, this transport's or another's (routed_links.h): polled while this one's messages
  // move.
  void wait(Batch& b, const OpContext& ctx) override;
  void wait_one(Batch& b, size_t k, const OpContext& ctx) override;
  bool progress() override;
  bool moved_by_caller() const override { return true; }
  // Another transport whose messages this one's waits also move (routed_links.h).
  void also_progress(ByteTransport* other) { also_ = other; }

 private:
  struct Bell;
  struct Fifo;
  struct Outgoing {
    const char* data;
    size_t bytes;
    int step;
    size_t done = 0;  // bytes of header and padded payload written
    WorkPtr work;
  };
  struct Incoming {
    char* data;
    size_t bytes;
    int step;
    WorkPtr work;
    bool matched = false;  // its message is arriving
  };
  // A message that arrived before its receive: kept here, whole, until one is posted.
  struct Early {
    std::vector<char> bytes;
    bool complete = false;
  };
  using EarlyQueue = std::deque<Early>;
  // What is arriving from one peer: its header, and where its bytes go.
  struct Arrival {
    bool open = false;
    uint64_t bytes = 0;
    uint32_t step = 0;
    size_t done = 0;                     // bytes of padded payload taken
    std::list<Incoming>::iterator into;  // a posted receive (when `early` is null), or
    Early* early = nullptr;              // kept aside
  };
  struct Peer {
    std::deque<Outgoing> out;
    std::list<Incoming> in;           // posted receives, in order (the one arriving may not be first)
    std::map<int, EarlyQueue> early;  // by step
    Early dropped;                    // a message whose receive failed (sizes differ)
    Arrival arrival;
    uint64_t written = 0;  // into our FIFO to the peer
    uint64_t read = 0;     // from its FIFO to us
  };
  Bell& bell(int rank) const;
  void ring_bell(int peer) const;  // after a store the peer may sleep on
  Fifo& fifo(int from, int to) const;
  char* fifo_data(int from, int to) const;
  bool push(int peer, Peer& p);
  bool pull(int peer, Peer& p);
  void open_arrival(int peer, Peer& p, uint64_t bytes, uint32_t step);
  void end_arrival(Peer& p);
  void take(Peer& p, const char* from, size_t n);  // the arrival's next bytes
  void await(Work& work, const OpContext& ctx);
  bool idle() const;      // no message of ours pending
  void doze(Work& work);  // sleeps until something may have moved
  void clear() noexcept;  // after an error: nothing of the op is kept

  Options o_;
  GroupHealth* health_;
  std::shared_ptr<ShmRegion> region_;
  std::vector<Peer> peers_;
  ByteTransport* also_ = nullptr;
};

}  // namespace ddp::comm::tcp
