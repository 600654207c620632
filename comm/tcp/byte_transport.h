#pragma once
// ByteTransport: what the collective algorithms written once (byte_all_reduce.h) need of a
// medium: move bytes between the ranks of a group, for the op that runs now. A send or a
// receive is posted at once into a Batch and completes later; the messages between two ranks
// on one step (0 to kSteps - 1, the op's phases) match in the order posted, and their sizes
// agree. Sockets implement it (SocketCollectives, over SocketEngine's connections); a medium
// with ordered pairwise messages can. Called by the thread that runs the op.
#include <cstddef>
#include <utility>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/work.h"

namespace ddp::comm::tcp {

class ByteTransport {
 public:
  static constexpr int kSteps = 16;
  // Messages posted together, each with its peer (for the error naming the late ranks).
  struct Batch {
    std::vector<std::pair<WorkPtr, int>> works;
  };
  virtual ~ByteTransport() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // The pipeline step: the largest message an algorithm cuts its parts into. Part of the
  // protocol: the same on every rank.
  virtual size_t chunk_bytes() const = 0;
  virtual void send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) = 0;
  virtual void recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) = 0;
  // Every message of the batch (then empty), by the op's deadline: a TimeoutError names the
  // ranks that did not deliver; another error is the first one's.
  virtual void wait(Batch& b, const OpContext& ctx) = 0;
  // The k-th message only; the batch is waited for as a whole later.
  virtual void wait_one(Batch& b, size_t k, const OpContext& ctx) = 0;
  // Moves what it can on the calling thread, for a medium without a thread of its own: true
  // when anything moved. Sockets have their engine's thread.
  virtual bool progress() { return false; }
  // Whether messages move only in progress() and waits on the calling thread (else a thread of
  // the medium's moves them and completes their Works, and a wait may block on one).
  virtual bool moved_by_caller() const { return false; }
};

}  // namespace ddp::comm::tcp
