#pragma once
// Recovery in place (docs/launcher.md, "Recovery in place"), after Horovod Elastic: a program run
// by ddp-launch --nnodes MIN:MAX keeps its processes when a node is lost or joins. It keeps its
// training state in a State, commits it now and then, and runs its training through run().
// On a membership change (the round's outcome "changed: ...", rendezvous/in_place.h) the Session
// aborts the round's group: a pending collective fails with Aborted (or NetworkError, or the next
// commit() throws MembershipChanged). run() then rolls the state back to its last commit, forms the
// new round's group, calls on_group and broadcasts the state from a survivor. Any other error, or an
// outcome that is not a membership change, propagates (the launcher then restarts the workers).
// Threading: one Session and one run() per process, on one thread. Errors: InvalidArgument when
// the environment lacks the launcher's store, run or round (DDP_STORE, DDP_RUN_ID,
// DDP_ELASTIC_ROUND); TimeoutError when no assignment comes within rejoin_timeout; the backend's
// and the store's errors.
#include <functional>
#include <memory>
#include <string>

#include "comm/group_factory.h"
#include "comm/process_group.h"
#include "common/timeouts.h"
#include "ddp/elastic/round_watcher.h"
#include "rendezvous/store.h"

namespace ddp::elastic {

struct SessionOptions {
  std::string backend = "tcp";
  Millis timeout = kUseDefault;  // the groups' collective timeout; unset: DDP_TIMEOUT_MS or default
  Millis outcome_timeout = Millis(60'000);  // after a failed collective: the wait for the round's outcome
  Millis rejoin_timeout = Millis(900'000);  // a survivor's wait for its assignment (the launchers' join)
  // Tests and embedders: the launchers' store and this worker's place (else the environment:
  // DDP_STORE, DDP_RUN_ID, DDP_ELASTIC_ROUND, RANK, WORLD_SIZE).
  std::shared_ptr<rdzv::Store> store;
  std::string run_id;
  int round = -1;
  int rank = -1;
  int world_size = -1;
};

class Session {
 public:
  // Forms the round's group (collective over the round's workers) and opts in (in_place/<rank>).
  explicit Session(SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const comm::ProcessGroupPtr& group() const;
  int round() const { return round_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int rounds() const { return rounds_; }  // rounds this process lived in (1 when it started in this one)

  // MembershipChanged when the launcher announced a membership change for this round.
  void check();
  // After a failed collective: waits (outcome_timeout) for the round's outcome; true when it is a
  // membership change, false for any other outcome (the launcher stops this worker).
  bool await_change();
  // Drops the group (and the watch of its round), reads this worker's place in the next round and
  // forms its group.
  void rejoin();

 private:
  void form();
  void watch();  // starts the watch of this round's outcome, which aborts group() on a change

  SessionOptions o_;
  std::shared_ptr<rdzv::Store> store_;
  std::unique_ptr<comm::GroupFactory> factory_;
  std::unique_ptr<RoundWatcher> watcher_;  // after factory_: stopped before the group goes
  int round_ = 0;
  int rank_ = 0;
  int world_size_ = 1;
  int rounds_ = 1;
};

// The training state run() keeps: a subclass says how to save and load it as bytes.
class State {
 public:
  virtual ~State() = default;
  // Saves the state as the point to roll back to; then MembershipChanged when the round changed
  // (inside run(): the session's check()).
  void commit();
  void restore();  // loads the last commit (nothing before the first)
  // Every rank of `group` calls it: root's last commit is loaded and committed on every rank.
  void sync(comm::ProcessGroup& group, int root);
  bool committed() const { return has_commit_; }
  void attach(Session* session) { session_ = session; }

 protected:
  virtual std::string save() = 0;
  virtual void load(const std::string& bytes) = 0;

 private:
  Session* session_ = nullptr;
  std::string commit_;
  bool has_commit_ = false;
};

struct RunOptions {
  // Called with each group formed (the first and every re-formed one), before the state is
  // synchronised: rebuild what hangs on the group here (a DDP engine and its buckets). What it
  // changes in the state (a DDP wrapper broadcasts rank 0's parameters, and rank 0 may be a
  // joining worker) is undone by the sync, on the root too.
  std::function<void(const comm::ProcessGroupPtr&)> on_group;
  int max_rejoins = 1000;  // then the error propagates
};

// Commits the state, then runs train(group) until it returns, recovering in place as described
// above; every (re)formed group's first act is the state broadcast from a survivor.
void run(Session& session, State& state, const std::function<void(const comm::ProcessGroupPtr&)>& train,
         const RunOptions& options = {});

// The root of a sync: the lowest rank among those that lived the most rounds. Collective.
int sync_root(comm::ProcessGroup& group, int rounds);

}  // namespace ddp::elastic
