#pragma once
// Join: training with uneven inputs (c10d's Join context manager for DDP).
//
// While a Join is alive, every pre_forward() of an active rank takes part in one small
// all_reduce per iteration — the "still active?" round: world_size + 1 int32s summed, a sync
// vote (1 unless in no_sync) followed by one presence slot per rank. From the sum every rank
// learns, in one collective, how many ranks are still training, whether they will reduce
// gradients this iteration, and which rank is the lowest active one (the buffers' source).
//
// A rank that ran out of data calls join(): it keeps answering the round with zeros and,
// while others are active, shadows their collectives — the buffer broadcast, one hook call per
// bucket on zero-filled gradients (bucket order, rebuilt order included), the one-time bucket
// rebuild — until a round shows no active rank. Then the rank(s) that joined last broadcast
// their parameters and buffers, so every rank ends with the same model. Gradients of a round
// are averaged over the ranks that contributed, or over the initial world size
// (divide_by_initial_world_size, c10d's default).
//
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
