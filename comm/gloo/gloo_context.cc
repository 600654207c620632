#include "comm/gloo/gloo_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <mutex>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>

#include "comm/gloo/gloo_store.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

namespace ddp::comm::gloo_backend {
namespace {

namespace tcp = ::gloo::transport::tcp;

// Gloo keeps these members protected. A derived class may name them, and a pointer to member
// formed that way is an ordinary pointer to the base's member: no layout assumptions.
struct PairAccess : tcp::Pair {
  static auto peer_fn() { return &PairAccess::peer; }
};
struct TransportContextAccess : tcp::Context {
  static auto signal_fn() { return &TransportContextAccess::signalException; }
};

// A rendezvous context that can reach its transport context (to abort it).
class Context final : public ::gloo::rendezvous::Context {
 public:
  using ::gloo::rendezvous::Context::Context;
  // The device is ours and tcp, so is its transport context.
  tcp::Context* transport() const { return static_cast<tcp::Context*>(transportContext_.get()); }
};

// The local address a UDP socket would use to reach host:port (no packet is sent).
std::string route_to(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "";
  std::string out;
  int fd = ::socket(res->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    char text[INET6_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) ==
            0) {
      out = text;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return out;
}

std::shared_ptr<::gloo::transport::Device> make_device(const DeviceAddress& where) {
  tcp::attr attr;
  if (!where.iface.empty()) {
    attr.iface = where.iface;
  } else {
    attr.hostname = where.hostname;
  }
  try {
    return tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    DDP_THROW(BackendError, "gloo: cannot create a tcp device on ", where.str(), ": ", e.what(), " (set ",
              settings::kSocketIfname.name, " to the interface that reaches the other nodes)");
  }
}

// Gloo's socket addresses in a message: "[host]:port" (host may be an IPv6 literal).
struct Address {
  size_t pos;
  size_t len;
};
std::vector<Address> addresses_in(const std::string& m) {
  std::vector<Address> out;
  for (size_t open = m.find('['); open != std::string::npos; open = m.find('[', open + 1)) {
    size_t close = m.find(']', open + 1);
    if (close == std::string::npos || close + 2 >= m.size() || m[close + 1] != ':') continue;
    size_t end = close + 2;
    while (end < m.size() && std::isdigit(static_cast<unsigned char>(m[end]))) ++end;
    if (end > close + 2) out.push_back({open, end - open});
  }
  return out;
}

// "" while the store answers; else what it said. A peer that lost the store exits, so the mesh
// connect often fails on that peer's closed connection first: the store is the cause to name.
std::string store_health(rdzv::Store& store) {
  try {
    store.check({"gloo/health"});
    return "";
  } catch (const Error& e) {
    return detail::str("; the group's store failed too: ", e.message());
  }
}

}  // namespace

DeviceAddress device_address() {
  if (auto ifname = settings::get(settings::kSocketIfname)) return {*ifname, ""};
  if (auto ifname = settings::get(settings::kGlooSocketIfname)) return {*ifname, ""};
  if (auto master = settings::get(settings::kMasterAddr)) {
    std::string local = route_to(*master);
    if (!local.empty()) return {"", local};
    logger("gloo")->warn("no route to MASTER_ADDR={} found; binding gloo to loopback", *master);
  }
  return {"", "127.0.0.1"};
}

GlooContext::GlooContext(const GroupSetup& setup) {
  // Gloo writes with writev(2): a peer that closed would kill the process with SIGPIPE. With it
  // ignored the write fails with EPIPE, which Gloo reports and we map to a NetworkError. Only
  // the default disposition is replaced; a handler the application installed is kept.
  static std::once_flag sigpipe;
  std::call_once(sigpipe, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
      ::signal(SIGPIPE, SIG_IGN);
  });
  DeviceAddress where = device_address();
  auto device = make_device(where);
  auto context = std::make_shared<Context>(setup.rank, setup.size);
  // Gloo waits five times the pair timeout for a pair's first connection (tcp/pair.h), so a
  // peer that published its address and died before connecting held this rank five times the
  // group's timeout. The mesh is connected under a fifth of it; the ops carry their own
  // timeouts, and the store's rules the wait for the other ranks (GlooStore).
  context->setTimeout(std::max(Millis(1), setup.options.timeout / 5));
  GlooStore store(setup.store, setup.options.timeout);
  try {
    context->connectFullMesh(store, device);
    context->setTimeout(setup.options.timeout);
  } catch (const Error&) {
    throw;  // the store's own errors (a rank that never arrived) already say what is missing
  } catch (const std::exception& e) {
    DDP_THROW(NetworkError, "gloo: group '", setup.name, "' rank ", setup.rank,
              " could not connect its full mesh on ", where.str(), ": ", e.what(),
              store_health(*setup.store));
  }
  for (int r = 0; r < setup.size; ++r) {
    if (r == setup.rank) continue;
    auto* pair = dynamic_cast<tcp::Pair*>(context->getPair(r).get());
    if (pair != nullptr) rank_of_address_[(pair->*PairAccess::peer_fn())().str()] = r;
  }
  context_ = std::move(context);
}

GlooContext::~GlooContext() noexcept = default;

std::string GlooContext::describe(const std::string& message) const {
  std::string out;
  size_t last = 0;
  for (const Address& a : addresses_in(message)) {
    out += message.substr(last, a.pos - last);
    const std::string text = message.substr(a.pos, a.len);
    auto found = rank_of_address_.find(text);
    out +=
        found == rank_of_address_.end() ? text : "rank " + std::to_string(found->second) + " (" + text + ")";
    last = a.pos + a.len;
  }
  return out + message.substr(last);
}

int GlooContext::peer_in(const std::string& message) const {
  for (const Address& a : addresses_in(message)) {
    auto found = rank_of_address_.find(message.substr(a.pos, a.len));
    if (found != rank_of_address_.end()) return found->second;
  }
  return -1;
}

void GlooContext::abort(const std::string& why) noexcept {
  try {
    auto* transport = static_cast<Context*>(context_.get())->transport();
    if (transport != nullptr) (transport->*TransportContextAccess::signal_fn())(why);
  } catch (...) {
    // Aborting is best effort: the pairs may already be closed.
  }
}

}  // namespace ddp::comm::gloo_backend
