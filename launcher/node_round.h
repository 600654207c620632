#pragma once
// The cross-node protocol of one round (one attempt of every node's workers), over the round's
// records (rendezvous/job_records.h): the first node to announce an outcome (rendezvous/round_outcome.h)
// wins (compare_set) and every other reads it (decided()); a node whose workers all succeeded
// sets done/<rank>, counts itself in "done", and the node that makes the count nnodes announces
// kDone. Such a node waits at the exit barrier (wait_outcome) for kDone or some node's failure,
// bounded by the rendezvous timeout: the first to give up announces kLost naming the nodes that
// never reached it (their launcher died). Store errors propagate, except in decided(), which
// reads a failed request as "not decided": a store lost for good is the liveness's store_lost()
// (launcher/liveness.h). Not thread-safe; one NodeRound per round and launcher.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/timeouts.h"
#include "rendezvous/job_records.h"
#include "rendezvous/round_outcome.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

using rdzv::RoundOutcome;
using rdzv::RoundOutcomeKind;

// OutcomeWatch: tells the monitor that a round has an outcome without a request per tick. One
// thread, on a store handle of its own (open_store: a connection, or an EtcdStore's clone()),
// blocks in wait() on "<round>/outcome" and calls on_decided when it appears (TCPStore: the server
// answers when the key is written; etcd: a watch; FileStore: inotify or a 100 ms poll). A wait
// lasts at most `slice`, then the thread looks for a new round; the destructor interrupt()s the
// handle, so it returns at once. A failed request is never an outcome (an etcd leader election
// fails requests for a moment): the thread opens another handle, backing off up to a second, and
// error() says why meanwhile; a store lost for good is the liveness's to report. Thread-safe.
struct OutcomeWatchOptions {
  std::string run_id = "none";
  std::function<std::unique_ptr<rdzv::Store>()> open_store;  // called on the watch's thread
  std::function<void()> on_decided;                          // on the watch's thread
  Millis slice{2000};
};

class OutcomeWatch {
 public:
  explicit OutcomeWatch(OutcomeWatchOptions options);  // watches nothing until watch()
  ~OutcomeWatch();
  OutcomeWatch(const OutcomeWatch&) = delete;
  OutcomeWatch& operator=(const OutcomeWatch&) = delete;

  void watch(int round);                     // round `round` from now on
  bool decided(int round) const;             // its outcome was seen
  std::optional<std::string> error() const;  // the last request's failure, until a wait succeeds

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct NodeRoundOptions {
  std::string run_id = "none";
  int round = 0;
  int nnodes = 1;
  // The exit barrier's bound; nullopt: none (heartbeats end the wait when a node is lost).
  std::optional<Millis> timeout = kDefaultRendezvousTimeout;
  std::function<void()> check_interrupt;  // may throw to end a wait
  // decided() asks it instead of the store (no request); null: decided() asks the store.
  const OutcomeWatch* watch = nullptr;
};

class NodeRound {
 public:
  NodeRound(rdzv::Store& store, NodeRoundOptions options)
      : o_(std::move(options)), records_(store, o_.run_id, o_.round) {}

  // First writer wins: returns the round's outcome as it stands after this call.
  RoundOutcome announce(const RoundOutcome& mine);
  // Whether some node announced an outcome (false when the store cannot be read: see above).
  bool decided() noexcept;
  // Exit barrier of node `node_rank`, whose workers succeeded (see above).
  RoundOutcome wait_outcome(int node_rank);

 private:
  NodeRoundOptions o_;
  rdzv::RoundRecords records_;
};

}  // namespace ddp::launcher
