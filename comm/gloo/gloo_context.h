#pragma once
// GlooContext: one group's connected Gloo context (full mesh over the tcp transport), and the
// two things the backend needs that Gloo's public API lacks:
// - peer naming: Gloo's I/O errors name a socket address ("[127.0.0.1]:41234"); describe()
//   rewrites every address it knows into "rank 2 ([127.0.0.1]:41234)".
// - abort: fail every pending operation of this context at once (Gloo's own timeout path),
//   so a group with a failed or abandoned op never leaves a thread blocked in Gloo.
// Construction rendezvouses through the group's Store and blocks until every rank connected
// (the store's timeout bounds it). The transport device is bound per device_address().
// Thread-safe after construction.
#include <map>
#include <memory>
#include <string>

#include <gloo/context.h>

#include "comm/backend.h"

namespace ddp::comm::gloo_backend {

// Where this rank's Gloo device binds: DDP_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) names an
// interface; otherwise the local address that routes to MASTER_ADDR; otherwise loopback.
struct DeviceAddress {
  std::string iface;     // non-empty: bind to this interface
  std::string hostname;  // otherwise: bind to this address
  std::string str() const { return iface.empty() ? hostname : "interface " + iface; }
};
DeviceAddress device_address();

class GlooContext {
 public:
  explicit GlooContext(const GroupSetup& setup);
  ~GlooContext() noexcept;
  GlooContext(const GlooContext&) = delete;
  GlooContext& operator=(const GlooContext&) = delete;

  const std::shared_ptr<::gloo::Context>& get() const { return context_; }
  // The Gloo message with each peer address replaced by "rank R (address)".
  std::string describe(const std::string& gloo_message) const;
  // The first rank named in a Gloo message, or -1.
  int peer_in(const std::string& gloo_message) const;
  // Fails every pending and later transfer of this context with `why`. Idempotent, noexcept.
  void abort(const std::string& why) noexcept;

 private:
  std::shared_ptr<::gloo::Context> context_;
  std::map<std::string, int> rank_of_address_;  // peer socket address -> group rank
};

}  // namespace ddp::comm::gloo_backend
