#pragma once
// Elastic node rendezvous (--nnodes MIN:MAX), torchrun's semantics over any Store with ticket
// and compare_set, in numbered rounds (keys: job_keys.h): "arrived" (arrival tickets),
// "node/<i>" (arrival i's registration), "closed" (K, the round's node count, set once by
// whoever first sees MAX nodes in, or MIN in and no arrival for last_call_timeout; arrivals
// 0..K-1 are its nodes, node rank = arrival). A round closes only once the round before has an
// outcome: a node arriving while round n-1 runs waits in round n; one arriving after its round
// closed moves on to the next. "<run_id>/closed" (the job ended) ends every wait.
// Clock-free: each launcher times last_call_timeout on its own clock from the last change it saw.
// Not thread-safe; one call per launcher at a time. Errors: TimeoutError when no round closes
// within join_timeout (naming how many arrived and the MIN needed); store errors propagate.
#include <functional>
#include <optional>
#include <string>

#include "common/timeouts.h"
#include "rendezvous/node_rendezvous.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

struct ElasticRendezvousOptions {
  std::string run_id = "none";
  int round = 0;  // the first round to try (the caller's next round)
  int min_nodes = 1;
  int max_nodes = 1;
  Millis join_timeout = kDefaultRendezvousTimeout;
  Millis last_call_timeout = kDefaultLastCallTimeout;
  std::function<void()> check_interrupt;  // called every slice; may throw to end the wait
};

// Joins the first round that takes this node. The assignment's round is the round joined and
// its restart_count the most any of its nodes knew. nullopt: the job ended (JobKeys::closed) first.
std::optional<NodeAssignment> elastic_rendezvous(Store& store, const NodeInfo& self,
                                                 const ElasticRendezvousOptions& options);

// How many launchers wait in round `round` (arrived before it closed); 0 when none.
int64_t waiting_in_round(Store& store, const std::string& run_id, int round);

}  // namespace ddp::rdzv
