#pragma once
// SocketCollectives: every collective over the SocketEngine, for groups that span hosts or
// when DDP_TCP_TRANSPORT=socket. Direct algorithms (each rank talks to each peer once per
// phase): reduce-scatter + all-gather for large all_reduce, pipelined in chunks so reducing
// and sending overlap the transfers; one-shot exchange for small; root fan-out/fan-in for the
// rooted ops. Reductions happen in a fixed order so every rank that
// computes a value computes the same bits.
//
// Fingerprints: each op first exchanges its OpDesc with every peer (channel kFingerprint,
// tag = seq); a mismatch is InvalidArgument naming both sides, before any data moves.
// Errors: a lost peer is the engine's NetworkError; internal messages that miss the op's
// deadline become one TimeoutError naming the op and the ranks that did not deliver.
// Called by one thread at a time (the group's worker).
#include <utility>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/socket_engine.h"
#include "comm/types.h"

namespace ddp::comm::tcp {

class SocketCollectives {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    bool fingerprints = true;
    size_t oneshot_bytes = 64 << 10;
    // all_reduce's pipeline step: part of the wire protocol, the same on every rank.
    size_t chunk_bytes = 256 << 10;
  };
  SocketCollectives(SocketEngine* engine, Options options) : engine_(engine), opt_(options) {}

  void run(const OpContext& ctx, const Buffer& in, const Buffer& out);

 private:
  struct Batch {
    std::vector<std::pair<WorkPtr, int>> works;  // (work, peer)
  };
  void send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx);
  void recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx);
  void wait(Batch& b, const OpContext& ctx);
  void wait_one(Batch& b, size_t k, const OpContext& ctx);
  void exchange_fingerprints(const OpContext& ctx);

  void all_reduce(const OpContext& ctx, const Buffer& buf);
  void pipelined_all_reduce(const OpContext& ctx, const Buffer& buf);
  void broadcast(const OpContext& ctx, const Buffer& buf);
  void reduce(const OpContext& ctx, const Buffer& buf);
  void all_gather(const OpContext& ctx, const Buffer& in, const Buffer& out, bool all);
  void scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void reduce_scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void all_to_all(const OpContext& ctx, const Buffer& in, const Buffer& out);

  SocketEngine* engine_;
  Options opt_;
  std::vector<std::vector<char>> scratch_;  // per peer: its contributions to this rank's part (kept)
};

}  // namespace ddp::comm::tcp
