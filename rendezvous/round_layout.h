#pragma once
// The values of a round's joining keys (job_keys.h), written by one launcher and read by the
// others: the round's shape, its layout (or why it broke) and an elastic round's node count.
// Each is input from another launcher: decoding is typed and bounded, and a malformed value is a
// StoreError naming its key. Launchers of earlier versions read and write the same text.
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/node_rendezvous.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

// "shape": "<nnodes> <static|dynamic> <host>", set by the first node to register.
struct RoundShape {
  int nnodes = 0;
  bool dynamic = false;  // ranks by arrival (no --node-rank)
  std::string host;
  bool operator==(const RoundShape&) const = default;
};
std::string encode_shape(const RoundShape& s);
RoundShape decode_shape(const std::string& key, const std::string& text);

// "layout": every node's place, {"master_addr", "restarts", "nodes": [[host, id, nproc], ...]} by
// node rank and node 0's "master_port" (when it offered one), or {"failed": why} from the node
// that found the round broken; the first written wins.
struct RoundLayout {
  std::string master_addr;
  int master_port = 0;  // node 0's NodeInfo::master_port; 0: none (or an earlier version's)
  int restarts = -1;
  std::vector<NodeInfo> nodes;  // host, id and nproc only
};
std::string encode_layout(const RoundLayout& l);
std::string encode_layout_failure(const std::string& why);
// The layout of `nnodes` nodes; InvalidArgument with the reason when the round was marked broken.
RoundLayout decode_layout(const std::string& key, const Bytes& bytes, int nnodes);

// "closed" (elastic): the round's node count, in decimal.
std::string encode_closed(int64_t nodes);
int64_t decode_closed(const std::string& key, const std::string& text);

}  // namespace ddp::rdzv
