#pragma once
// Recovery in place (docs/launcher.md): the round's keys (job_keys.h) through which a launcher
// moves its libddp workers from one round to the next without restarting them:
//   in_place/<rank>  set by worker <rank> of round n once it can re-form its group in place
//                    (ddp/elastic/elastic.h); the launcher keeps a node's workers only when all of its
//                    workers did
//   outcome          the round's outcome (round_outcome.h): the workers watch it; only
//                    kChanged (a membership change) moves them in place
//   assign/<rank>    written by worker <rank>'s launcher once it joined a later round in place:
//                    the worker's place there (InPlaceAssignment, JSON)
// A worker moved in place sets in_place/<new rank> in its new round, which is how its launcher
// learns it re-joined. Keys are plain text in the launchers' store (DDP_STORE).
// Errors: decode_in_place throws StoreError naming the key when the value is malformed.
#include <string>

namespace ddp::rdzv {

struct InPlaceAssignment {
  int round = 0;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;  // GROUP_RANK
  int nnodes = 1;     // GROUP_WORLD_SIZE
  std::string master_addr;
  int master_port = 0;
  bool operator==(const InPlaceAssignment&) const = default;
};

std::string encode_in_place(const InPlaceAssignment& a);
InPlaceAssignment decode_in_place(const std::string& key, const std::string& text);

}  // namespace ddp::rdzv
