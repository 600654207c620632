#pragma once
// SocketCollectives: every collective over the SocketEngine, for groups that span hosts or when
// sockets are forced; a ByteTransport (byte_transport.h). all_reduce has four algorithms (plan.h
// picks one, the same on every rank; Options::algo forces one): one-shot (every buffer to every
// peer, here), and direct, ring and hd, written over the ByteTransport (byte_all_reduce.h) in
// Options::chunk_bytes chunks; the other ops are direct, over it too (byte_collectives.h). Each
// op first exchanges its OpDesc with every peer (a mismatch is InvalidArgument naming both sides,
// before any data is used); a one-shot all_reduce sends its data right behind it, from a copy.
// The thread that runs an op moves its bytes itself (SocketEngine::Driver) while its waits may
// poll (Options::poll), so no thread wakes per message; past that the engine's thread takes
// over. Errors: the engine's NetworkError, or a TimeoutError naming the op and the ranks that
// did not deliver. Called by the group's worker.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/op.h"
#include "comm/tcp/plan.h"
#include "comm/tcp/socket_engine.h"
#include "comm/types.h"

namespace ddp::comm::tcp {

// DDP_TCP_SOCKET_STREAMS' bound (the table's): connections to each peer.
inline constexpr int kMaxSocketStreams = 8;
// Connections to each peer, each set with its own progress thread (so one rank's large
// transfers run on several cores): `fixed` (DDP_TCP_SOCKET_STREAMS: settings::auto_int), or for
// auto (nullopt) one for each CPU this process may use beyond its op's thread (which reduces),
// its share of the host's CPUs among its job's ranks there: cpus / ranks_here - 1, at least 1,
// at most kMaxAutoSocketStreams. Rank 0's value is the group's.
inline constexpr int kMaxAutoSocketStreams = 4;
int socket_streams(std::optional<int64_t> fixed, int cpus, int ranks_here);

// Which of `streams` connections to its peer a message of `bytes` travels on. A message under
// chunk_bytes / streams (or any, with one connection) goes whole on the first (`counted` false).
// One of up to chunk_bytes goes whole on connection `index` mod streams, where `index` counts
// this op's earlier counted messages to the same peer with the same tag (each side counts its
// own sends and receives): an op's pipeline chunks take turns, and an op with one chunk for a
// peer keeps to one connection, so it never waits on a second progress thread's wake-up. A larger
// message (unchunked ops) is split in `parts` pieces of `part_bytes` (a multiple of 64; the last
// shorter; none under chunk_bytes / streams), piece k on connection k. A pure function of values
// equal on both sides, so the sender and the receiver choose alike.
struct StripePlan {
  size_t parts = 1;
  size_t part_bytes = 0;
  int lane = 0;          // the connection of a message in one part
  bool counted = false;  // whether the message counts in `index`
};
StripePlan stripe_plan(size_t bytes, int streams, size_t chunk_bytes, size_t index);

class SocketCollectives final : public ByteTransport {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    bool fingerprints = true;
    size_t oneshot_bytes = 64 << 10;
    // all_reduce's pipeline step: part of the wire protocol, the same on every rank.
    size_t chunk_bytes = 256 << 10;
    SocketAlgo algo = SocketAlgo::kAuto;  // the same on every rank (DDP_TCP_SOCKET_ALGO)
    std::vector<int> world_ranks;         // group rank -> world rank, for errors (empty: the same)
    // How long a wait for a message of at most oneshot_bytes polls before it sleeps
    // (PollingWork; the engine's poll): poll_for().
    std::chrono::microseconds poll{0};
  };
  // engines: one per connection set (DDP_TCP_SOCKET_STREAMS), each with its own progress
  // thread; an op's large messages are spread over them (stripe_plan), everything else uses the
  // first.
  SocketCollectives(std::vector<SocketEngine*> engines, Options options);

  void run(const OpContext& ctx, const Buffer& in, const Buffer& out);
  // An op whose messages another runs over this ByteTransport (routed_links.h): its fingerprints
  // exchanged (a mismatch throws), its message counts reset (stripe_plan).
  void begin(const OpContext& ctx);
  Algorithm algorithm(const OpDesc& d, const Buffer& in) const;  // plan()'s
  // The resumable form, for TcpProcessGroup's attempt on the caller's thread: a one-shot
  // all_reduce (resumable()) is posted and driven on the calling thread for `budget`; true when
  // it completed there. Otherwise finish() (on any thread, one op at a time) completes it.
  bool resumable(const OpDesc& d, const Buffer& in) const;
  bool start(const OpContext& ctx, const Buffer& in, std::chrono::microseconds budget);
  void finish(const OpContext& ctx, const Buffer& in);
  // How long a wait for `bytes` polls before it sleeps: Options::poll up to oneshot_bytes, none
  // above (a larger transfer takes longer than a wake-up costs).
  std::chrono::microseconds poll_for(size_t bytes) const;

  // ByteTransport: each message one Work in the batch, over one connection (stripe_plan's
  // lane) or split over several; its waits drive the engine (await).
  int rank() const override { return opt_.rank; }
  int world() const override { return opt_.world; }
  size_t chunk_bytes() const override { return opt_.chunk_bytes; }
  void send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) override;
  void recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) override;
  void wait(Batch& b, const OpContext& ctx) override;
  void wait_one(Batch& b, size_t k, const OpContext& ctx) override;

 private:
  void post(Batch& b, bool is_send, int peer, int step, char* data, size_t bytes, const OpContext& ctx);
  // Waits for one message's work: driving the engine first while this op holds a Driver (for
  // Options::poll, then the Driver is released and the progress thread takes over).
  void await(Work& work);
  // Fingerprints: posted, then waited for and compared (throws the mismatch); exchange does both.
  struct Fingerprints {
    Fingerprint mine;
    std::vector<Fingerprint> theirs;
    Batch batch;
  };
  void post_fingerprints(const OpContext& ctx, Fingerprints& f);
  void check_fingerprints(const OpContext& ctx, Fingerprints& f);
  void exchange_fingerprints(const OpContext& ctx);
  void run_op(const OpContext& ctx, const Buffer& in, const Buffer& out);

  // Holds a Driver while an op runs and points driver_ at it.
  class Driving;
  // A one-shot all_reduce between its posts and its end (start() keeps one for finish()).
  struct OneShot {
    std::shared_ptr<std::vector<char>> block;  // every rank's buffer, by rank
    Fingerprints f;
    Batch b;
  };
  void all_reduce(const OpContext& ctx, const Buffer& buf, Algorithm algorithm);
  void oneshot_all_reduce(const OpContext& ctx, const Buffer& buf);
  void post_oneshot(const OpContext& ctx, const Buffer& buf, OneShot& o);
  void end_oneshot(const OpContext& ctx, const Buffer& buf, OneShot& o);
  int world_rank(int p) const;

  // The first engine: everything but large messages (stripe_plan).
  SocketEngine& first() const { return *engines_.front(); }

  std::vector<SocketEngine*> engines_;  // never empty
  Options opt_;
  GroupFacts facts_;  // plan()'s: from opt_
  // The op in progress drives the engine from this thread: run() holds a Driver for its
  // length (Driving), unless Options::poll is 0.
  SocketEngine::Driver* driver_ = nullptr;
  // A start() that did not complete. Its messages point into it (the fingerprint sent among
  // them), so it stays where start() made it.
  std::unique_ptr<OneShot> pending_;
  ByteScratch scratch_;  // the all_reduce algorithms' (byte_all_reduce.h)
  // The op's counted messages so far, by (peer, is_send, tag): stripe_plan's index. Cleared as
  // each op starts.
  std::map<std::tuple<int, bool, int64_t>, size_t> lanes_used_;
};

}  // namespace ddp::comm::tcp
