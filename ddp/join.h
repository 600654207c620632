#pragma once
// Join: training with uneven inputs (c10d's Join context manager for DDP).
// While a Join is alive, every pre_forward() takes part in one small all_reduce (join_round) that
// tells every rank how many are still training, whether they reduce gradients this iteration,
// and the lowest active rank (the buffers' source). A rank out of data calls join(): it answers
// the rounds with zeros and shadows the active ranks' collectives (buffer broadcast, one hook call
// per bucket on zero gradients, the bucket rebuild) until no rank is active; then one that joined
// last broadcasts its parameters and buffers, so every rank ends with the same model. Gradients are
// averaged over the ranks that contributed, or over the initial world size (the default).
// Every rank of the group must use a Join around the same loop and call join() once at its
// end; pre_forward() is required in every iteration while a Join is alive.
#include "comm/process_group.h"

namespace ddp {

class Engine;

struct JoinOptions {
  bool divide_by_initial_world_size = true;
};

struct JoinRound {
  int active = 0;     // ranks still training this iteration
  bool sync = false;  // they reduce gradients this iteration (not in no_sync)
  int authority = 0;  // the lowest active rank
};

// The per-iteration round; collective.
JoinRound join_round(comm::ProcessGroup& group, bool active, bool sync);
// After all joined: the highest rank among those that joined last (their parameters are
// final: they took every step). Collective.
int last_joiner(comm::ProcessGroup& group, bool is_last_joiner);

class Join {
 public:
  explicit Join(Engine& engine, JoinOptions options = {});
  ~Join() noexcept;
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank is out of data: shadow the others until every rank has joined. Collective.
  void join();

 private:
  Engine& engine_;
  bool joined_ = false;
};

}  // namespace ddp
