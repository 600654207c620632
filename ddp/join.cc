#include "ddp/join.h"

#include <vector>

#include "common/error.h"
#include "ddp/engine.h"
#include "ddp/host_collectives.h"

namespace ddp {

JoinRound join_round(comm::ProcessGroup& group, bool active, bool sync) {
  const int n = group.size();
  std::vector<int32_t> votes(n + 1, 0);
  if (active) {
    votes[0] = sync ? 1 : 0;
    votes[1 + group.rank()] = 1;
  }
  all_reduce_host(group, comm::view(votes.data(), votes.size()), comm::ReduceOp::kSum);
  JoinRound round;
  round.authority = -1;
  for (int r = 0; r < n; ++r) {
    if (votes[1 + r] == 0) continue;
    ++round.active;
    if (round.authority < 0) round.authority = r;
  }
  if (round.authority < 0) round.authority = 0;
  // Ranks inside and outside no_sync in the same iteration would issue different collectives.
  if (votes[0] != 0 && votes[0] != round.active) {
    DDP_THROW(InvalidArgument, "join: ", votes[0], " of ", round.active,
              " active ranks synchronize gradients this iteration; no_sync must be the same on every rank");
  }
  round.sync = votes[0] > 0;
  return round;
}

int last_joiner(comm::ProcessGroup& group, bool is_last_joiner) {
  int32_t rank = is_last_joiner ? group.rank() : -1;
  all_reduce_host(group, comm::view(&rank, 1), comm::ReduceOp::kMax);
  DDP_CHECK(rank >= 0, "join: no rank joined last");
  return rank;
}

Join::Join(Engine& engine, JoinOptions options) : engine_(engine) { engine_.enable_join(options); }

Join::~Join() noexcept { engine_.disable_join(); }

void Join::join() {
  DDP_CHECK(!joined_, "Join::join called twice");
  joined_ = true;
  comm::ProcessGroup& group = *engine_.group();
  bool is_last = true;
  for (;;) {
    JoinRound round = join_round(group, /*active=*/false, /*sync=*/false);
    if (round.active == 0) break;
    is_last = false;
    engine_.shadow_iteration(round);
  }
  engine_.sync_model(last_joiner(group, is_last));
}

}  // namespace ddp
