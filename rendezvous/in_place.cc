#include "rendezvous/in_place.h"

#include "common/error.h"
#include "common/safe_json.h"

namespace ddp::rdzv {

std::string encode_in_place(const InPlaceAssignment& a) {
  const safe_json::Json j = {{"round", a.round},
                             {"rank", a.rank},
                             {"world_size", a.world_size},
                             {"local_rank", a.local_rank},
                             {"local_world_size", a.local_world_size},
                             {"node_rank", a.node_rank},
                             {"nnodes", a.nnodes},
                             {"master_addr", a.master_addr},
                             {"master_port", a.master_port}};
  return j.dump();
}

InPlaceAssignment decode_in_place(const std::string& key, const std::string& text) {
  const std::string source = "in-place assignment under '" + key + "'";
  try {
    const auto j = safe_json::parse(text, source, {.max_bytes = 4 << 10, .max_depth = 2});
    constexpr int64_t kMax = 1 << 24;
    auto num = [&](const char* name, int64_t lo) {
      return static_cast<int>(safe_json::get_int(j, name, source, lo, kMax));
    };
    InPlaceAssignment a;
    a.round = num("round", 0);
    a.world_size = num("world_size", 1);
    a.rank = num("rank", 0);
    a.local_rank = num("local_rank", 0);
    a.local_world_size = num("local_world_size", 1);
    a.node_rank = num("node_rank", 0);
    a.nnodes = num("nnodes", 1);
    a.master_addr = safe_json::get_string(j, "master_addr", source);
    a.master_port = num("master_port", 0);
    if (a.rank >= a.world_size || a.local_rank >= a.local_world_size || a.node_rank >= a.nnodes) {
      DDP_THROW(InvalidArgument, source, ": rank ", a.rank, " of ", a.world_size, ", local rank ",
                a.local_rank, " of ", a.local_world_size, ", node ", a.node_rank, " of ", a.nnodes,
                " do not fit");
    }
    return a;
  } catch (const InvalidArgument& e) {
    DDP_THROW(StoreError, e.message());
  }
}

}  // namespace ddp::rdzv
