#pragma once
// Worker-level multicast rendezvous: the processes of a job started without ddp-launch meet on
// an IP multicast group (init method tcp://239.x.y.z:PORT?world_size=N&group_name=G):
//
//   every process hosts a TCPStore on an ephemeral port and announces it (multicast_discovery.h)
//   -> ranks are agreed (given ranks honoured, the others assigned) -> rank 0 keeps its store, the
//   others drop theirs and connect to the first of rank 0's addresses that answers -> a barrier in
//   that store (so nobody stops announcing while another still listens) -> the store is returned.
//
// The job token keys the announcements' MAC and the store handshake; without one it is derived
// from the group name (a warning says so: anyone who knows the name can join).
// Errors: TimeoutError when fewer than world_size processes arrive or rank 0's store does not
// answer in time (naming who was seen), InvalidArgument for conflicting ranks or world sizes.
#include <memory>
#include <string>

#include "common/timeouts.h"
#include "rendezvous/init_method.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

struct MulticastRendezvousOptions {
  InitMethod method;  // a multicast tcp:// init method
  int rank = -1;      // -1: assigned
  int world_size = 1;
  std::string job_token;                       // empty: derived from the group name
  Millis timeout = kDefaultRendezvousTimeout;  // method.timeout_s, when given, wins
};

struct MulticastRendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  bool hosts_server = false;
  std::string job_token;    // the token used (given or derived)
  std::string description;  // "tcp://239...: rank 0's store at 10.0.0.1:4711 (hosted here)"
};

MulticastRendezvous multicast_rendezvous(const MulticastRendezvousOptions& options);

// The token a group without DDP_JOB_TOKEN uses: 32 hex chars of SHA-256 over the group name.
std::string derive_group_token(const std::string& group_name);

}  // namespace ddp::rdzv
