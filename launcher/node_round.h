#pragma once
// The cross-node protocol of one round (one attempt of every node's workers), spoken through the
// job's store under "<run_id>/round/<n>/":
//   outcome      the round's RoundOutcome; the first node to announce one wins (compare_set),
//                every other node reads it (Supervisor external_stop polls decided())
//   done/<rank>  node <rank>'s workers all succeeded; "done" counts them, and the node that
//                makes the count reach nnodes announces kDone
//   arrived      (node rendezvous) how many nodes joined the round
// A node whose workers succeeded waits at the exit barrier (wait_outcome) for kDone or some
// node's failure, bounded by the rendezvous timeout: the first node to give up announces kLost
// naming the nodes that never reached it (their launcher died), and every node stops with that.
//
// The outcome is stored as text ("done", "failed: <who>: <why>", "interrupted: <who> got SIGINT",
// "lost: <why>", "changed: <why>"), read back only by RoundOutcome::decode: launchers of earlier versions
// read and write the same keys. Store errors propagate (StoreError, NetworkError, TimeoutError), except in
// decided(), which reads a failed request as "not decided": it may be a moment's trouble, and a
// store lost for good is the liveness's store_lost() (launcher/liveness.h), which ends the round.
// Not thread-safe; one NodeRound per round and launcher.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

enum class RoundOutcomeKind {
  kDone,         // every node's workers succeeded
  kFailed,       // a node's workers failed (a restart may follow)
  kInterrupted,  // a node was stopped by a signal: no restart
  kLost,         // nodes were lost (no heartbeat, or never at the exit barrier): no new round
  kChanged,      // elastic: nodes were lost or are waiting to join: a new round, not a restart
};

struct RoundOutcome {
  RoundOutcomeKind kind = RoundOutcomeKind::kDone;
  std::string detail;  // who and why; empty for kDone

  static RoundOutcome done() { return {RoundOutcomeKind::kDone, ""}; }
  static RoundOutcome failed(std::string detail) { return {RoundOutcomeKind::kFailed, std::move(detail)}; }
  static RoundOutcome interrupted(std::string detail) {
    return {RoundOutcomeKind::kInterrupted, std::move(detail)};
  }
  static RoundOutcome lost(std::string detail) { return {RoundOutcomeKind::kLost, std::move(detail)}; }
  static RoundOutcome changed(std::string detail) { return {RoundOutcomeKind::kChanged, std::move(detail)}; }

  // A restart cannot help: the job stops on every node.
  bool final() const { return kind == RoundOutcomeKind::kInterrupted || kind == RoundOutcomeKind::kLost; }
  std::string text() const;  // the stored form, also what messages show
  // Text written by any launcher; an unknown form is a kFailed whose detail is the text.
  static RoundOutcome decode(const std::string& text);
  bool operator==(const RoundOutcome&) const = default;
};

// "<run_id>/round/<n>/<name>"
std::string round_key(const std::string& run_id, int round, const std::string& name);

// Blocks until `key` exists and returns its value; without a timeout it waits for ever. Calls
// check_interrupt (which may throw) every slice; TimeoutError when the timeout passes.
std::string wait_key(rdzv::Store& store, const std::string& key, std::optional<Millis> timeout,
                     const std::function<void()>& check_interrupt);

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
  NodeRound(rdzv::Store& store, NodeRoundOptions options) : store_(store), o_(std::move(options)) {}

  // First writer wins: returns the round's outcome as it stands after this call.
  RoundOutcome announce(const RoundOutcome& mine);
  // Whether some node announced an outcome (false when the store cannot be read: see above).
  bool decided() noexcept;
  // Exit barrier of node `node_rank`, whose workers succeeded (see above).
  RoundOutcome wait_outcome(int node_rank);

 private:
  std::string key(const std::string& name) const { return round_key(o_.run_id, o_.round, name); }

  rdzv::Store& store_;
  NodeRoundOptions o_;
};

}  // namespace ddp::launcher
