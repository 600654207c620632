#pragma once
// Multicast discovery: N participants of one job find each other on an IP multicast group and
// agree on their ranks, with no address configured anywhere: launchers (node ranks) and workers
// in init_process_group (ranks). Every participant computes the same ranks from the same set:
// requested ranks honoured, the others by (first address, host, instance id).
// Failures, on every participant: fewer than `world` by the deadline is a TimeoutError naming who
// was seen; a rank requested twice, more than `world` participants, or another world size is an
// InvalidArgument naming them. Announcing goes on after wait() returns or fails, until the object
// is destroyed: keep it alive until the others are known to be done.
// Announcements carry an HMAC over the job token; other jobs', malformed, stale or replayed
// datagrams are ignored and counted (stats()). One background thread owns the socket; wait() and
// stats() may be called from any thread; the destructor stops it (noexcept).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/multicast_datagram.h"
#include "rendezvous/multicast_socket.h"

namespace ddp::rdzv::mcast {

struct DiscoveryOptions {
  SocketOptions socket;                // group, port, ttl, interface
  std::string job_id;                  // jobs with different ids never mix
  std::string token;                   // the job token: key of every announcement's MAC
  int world = 1;                       // participants expected
  int requested_rank = -1;             // -1: assigned
  std::string host;                    // shown in messages
  std::vector<std::string> addresses;  // where the others can reach this participant, best first (16 used)
  uint16_t store_port = 0;             // the TCPStore this participant would serve as rank 0
  Millis timeout = kDefaultRendezvousTimeout;
  Millis initial_interval{20};
  Millis max_interval{500};
  Millis max_clock_skew{60'000};
  Millis conflict_linger{1'500};          // keep announcing this long before a conflict is thrown
  std::function<void()> check_interrupt;  // called about every 100 ms in wait(); may throw
};

struct Participant {
  std::string instance;  // hex
  std::string host;
  std::vector<std::string> addresses;  // as announced (the rank order uses the first)
  std::string source;                  // the datagram's source address ("" for oneself)
  int requested_rank = -1;
  uint16_t store_port = 0;
  int rank = -1;
  std::string describe() const;  // "host (10.0.0.1, rank 1 requested)"
  // Where to try reaching it, best first: the source address (it routes back to us), then the
  // announced ones.
  std::vector<std::string> reachable_at() const;
};

struct DiscoveryResult {
  int rank = -1;                     // this participant's
  std::vector<Participant> by_rank;  // every participant, indexed by rank
};

struct DiscoveryStats {
  uint64_t sent = 0, received = 0, accepted = 0;
  uint64_t truncated = 0, oversized = 0, not_ours = 0, bad_version = 0, malformed = 0, bad_mac = 0;
  uint64_t foreign = 0, stale = 0, replayed = 0;
  uint64_t ignored() const {
    return truncated + oversized + not_ours + bad_version + malformed + bad_mac + foreign + stale + replayed;
  }
  std::string describe() const;  // "3 ignored (1 wrong MAC, 2 foreign)"
};

// The rank rule, pure: fills rank of every participant. InvalidArgument on a duplicate request
// or a requested rank outside [0, world), naming the participants.
void assign_ranks(std::vector<Participant>& participants, int world);

class MulticastDiscovery {
 public:
  explicit MulticastDiscovery(DiscoveryOptions options);  // opens the socket (throws), starts announcing
  ~MulticastDiscovery();
  MulticastDiscovery(const MulticastDiscovery&) = delete;
  MulticastDiscovery& operator=(const MulticastDiscovery&) = delete;

  DiscoveryResult wait();
  DiscoveryStats stats() const;

 private:
  struct State;
  void loop();
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace ddp::rdzv::mcast
