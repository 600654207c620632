#pragma once
// What a launcher writes into a rendezvous round about itself (JSON under "<round>/node/<i>"),
// shared by the static (node_rendezvous.h) and elastic (elastic_rendezvous.h) rounds.
// A registration is input from another launcher (or anyone holding the job token): decoding is
// typed and bounded, and a malformed one is a StoreError naming its key. Fields added later
// (id, restarts) are optional, so launchers of earlier versions still read and write rounds.
#include <string>

#include "rendezvous/node_rendezvous.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

struct Registration {
  NodeInfo info;
  int nnodes = 0;  // the --nnodes (MAX) the node was started with
  std::string nonce;
};

std::string encode_registration(const Registration& r);
Registration decode_registration(const std::string& key, const Bytes& bytes);

// A per-call nonce: every registration is distinct, so two launchers that claim the same node
// rank are told apart even when they run on one host with the same settings.
std::string registration_nonce();

// "node 2 (host-b)": how messages name a node of a round.
std::string describe_node(int rank, const std::string& host);

}  // namespace ddp::rdzv
