// ddp-bench link: what one TCP connection between two hosts carries, the floor of a collective
// across them (bench/hosts.sh runs it between emulated hosts). One process per host: one way
// (`--listen ADDR:PORT` on the receiver, `--connect ADDR:PORT` on the sender), both ways on one
// connection as two ranks' all_reduce loads it (`--both-ways` on each), or a ring (`--listen` and
// `--connect` in the same process). The sender sends for --seconds from a --buffer as an op
// would, split over each size in --calls (bytes per send and recv call), and prints its rate per
// call size and the best; all processes end together. Never asserts a timing. --zerocopy sends
// with MSG_ZEROCOPY and says how many sends the kernel copied after all (it does on loopback and
// veth, so between emulated hosts).
//   host 2: ddp-bench link --listen 10.78.0.2:29000 --both-ways
//   host 1: ddp-bench link --connect 10.78.0.2:29000 --both-ways
#include <poll.h>
#include <time.h>  // before linux/errqueue.h, which uses timespec

#include <linux/errqueue.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/machine_json.h"
#include "bench/sizes.h"
#include "common/error.h"
#include "common/socket.h"

namespace ddp::bench {
namespace {

constexpr double kMaxSeconds = 3600;
constexpr size_t kMaxBufferBytes = size_t{1} << 30;

struct LinkFlags {
  std::string listen, connect;
  bool both_ways = false;
  bool zerocopy = false;
  double seconds = 1;
  double timeout = 30;
  std::string calls = "32K,256K,1M";
  std::string buffer = "64M";
  std::string format = "table";
};

struct Links {
  Fd left;   // accepted (--listen): bytes arrive on it
  Fd right;  // connected (--connect): bytes leave on it
  int send_fd = -1, recv_fd = -1;
  std::string send_to, recv_from;  // the peers' endpoints, for errors
};

Fd accept_one(const Fd& listener, const std::string& where, Millis wait) {
  pollfd p{listener.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) {
    DDP_THROW(TimeoutError, "--listen ", where, ": no peer connected within ", wait.count(), " ms");
  }
  Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) DDP_THROW_ERRNO("accept on ", where);
  return conn;
}

// Listens first, connects, then accepts: the processes of a ring start in any order.
Links open_links(const LinkFlags& f, Millis wait) {
  Links l;
  Fd listener;
  if (!f.listen.empty()) {
    const net::Endpoint at = net::parse_endpoint(f.listen);
    listener = net::listen_tcp({.host = at.host, .port = at.port, .backlog = 1});
  }
  if (!f.connect.empty()) l.right = net::connect_tcp(net::parse_endpoint(f.connect), Deadline(wait));
  if (listener) l.left = accept_one(listener, f.listen, wait);
  for (const Fd* fd : {&l.left, &l.right}) {
    if (!*fd) continue;
    net::set_nonblocking(fd->get());
    net::set_nodelay(fd->get());
  }
  l.send_fd = l.right ? l.right.get() : (f.both_ways ? l.left.get() : -1);
  l.recv_fd = l.left ? l.left.get() : (f.both_ways ? l.right.get() : -1);
  l.send_to = l.right ? f.connect : "the peer on " + f.listen;
  l.recv_from = l.left ? "the peer on " + f.listen : f.connect;
  return l;
}

// MSG_ZEROCOPY's completions (the socket's error queue): each says which sends the kernel has
// let go of, and whether it copied them after all. Read as they come: unread, they fill the
// socket's option memory and sends fail (ENOBUFS).
class ZeroCopy {
 public:
  // SO_ZEROCOPY on `fd`; InvalidArgument naming the flag where the kernel refuses it.
  explicit ZeroCopy(int fd) : fd_(fd) {
    const int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) {
      DDP_THROW(InvalidArgument, "--zerocopy: this kernel refuses SO_ZEROCOPY (", std::strerror(errno), ")");
    }
  }
  void reap() {
    while (true) {
      char control[128];
      msghdr msg{};
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      if (::recvmsg(fd_, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        const auto* e = reinterpret_cast<const sock_extended_err*>(CMSG_DATA(c));
        if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
        const uint64_t sends = uint64_t{e->ee_data} - e->ee_info + 1;  // [ee_info, ee_data]
        done_ += sends;
        if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED) copied_ += sends;
      }
    }
  }
  // Waits up to `wait` for the completions of all `sent` sends.
  void settle(uint64_t sent, Millis wait) {
    const auto until = Clock::now() + wait;
    while (done_ < sent && Clock::now() < until) {
      pollfd p{fd_, 0, 0};  // POLLERR is always reported
      ::poll(&p, 1, 10);
      reap();
    }
  }
  uint64_t done() const { return done_; }
  uint64_t copied() const { return copied_; }

 private:
  int fd_;
  uint64_t done_ = 0, copied_ = 0;
};

// Moves bytes both ways until `until` (sending) and, once `sending` is over, until the peer's
// end (reading): returns the bytes sent. A peer that sends nothing and does not close for
// `quiet` ends the wait with a TimeoutError naming it.
class Pump {
 public:
  // Sends from, and receives into, successive places of `buffer_bytes` (wrapping), as a program
  // moving that much does: one small buffer used over and over would stay in the CPU's caches.
  Pump(const Links& l, size_t buffer_bytes, Millis quiet, ZeroCopy* zerocopy)
      : l_(l), out_(buffer_bytes, 1), in_(buffer_bytes), quiet_(quiet), zerocopy_(zerocopy) {}
  uint64_t sends() const { return sends_; }

  size_t run(size_t call, Clock::time_point until) {
    size_t sent = 0;
    while (l_.send_fd >= 0 && Clock::now() < until) step(call, true, sent);
    return sent;
  }
  void drain() {
    if (l_.send_fd >= 0) ::shutdown(l_.send_fd, SHUT_WR);
    size_t ignored = 0;
    heard_ = Clock::now();
    while (l_.recv_fd >= 0 && !peer_done_) {
      step(in_.size(), false, ignored);
      if (Clock::now() - heard_ > quiet_) {
        DDP_THROW(TimeoutError, "nothing from ", l_.recv_from, " for ", quiet_.count(),
                  " ms, and it has not closed its end");
      }
    }
  }

 private:
  void step(size_t call, bool sending, size_t& sent) {
    pollfd p[2];
    nfds_t n = 0;
    if (sending) p[n++] = {l_.send_fd, POLLOUT, 0};
    if (l_.recv_fd >= 0 && !peer_done_) p[n++] = {l_.recv_fd, POLLIN, 0};
    if (::poll(p, n, 100) < 0 && errno != EINTR) DDP_THROW_ERRNO("poll");
    for (nfds_t i = 0; i < n; ++i) {
      if (p[i].fd == l_.send_fd && (p[i].revents & POLLOUT) && sending) {
        const size_t len = std::min(call, out_.size() - out_at_);
        const int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (zerocopy_ ? MSG_ZEROCOPY : 0);
        const ssize_t k = ::send(l_.send_fd, out_.data() + out_at_, len, flags);
        // ENOBUFS: too many zero-copy sends not yet let go of; reaped below, then sent again.
        const bool full = k < 0 && zerocopy_ && errno == ENOBUFS;
        if (k < 0 && errno != EAGAIN && errno != EINTR && !full) DDP_THROW_ERRNO("send to ", l_.send_to);
        if (k > 0) sent += static_cast<size_t>(k);
        if (k > 0) out_at_ = (out_at_ + static_cast<size_t>(k)) % out_.size();
        if (k > 0) ++sends_;
      }
      // POLLERR: completions wait in the error queue (reading it otherwise is a wasted call).
      if (zerocopy_ && p[i].fd == l_.send_fd && (p[i].revents & POLLERR)) zerocopy_->reap();
      if (p[i].fd == l_.recv_fd && (p[i].revents & (POLLIN | POLLHUP | POLLERR))) receive(call);
    }
  }
  void receive(size_t call) {
    const size_t len = std::min(call, in_.size() - in_at_);
    const ssize_t k = ::recv(l_.recv_fd, in_.data() + in_at_, len, MSG_DONTWAIT);
    if (k == 0) peer_done_ = true;
    if (k < 0 && errno != EAGAIN && errno != EINTR) DDP_THROW_ERRNO("recv from ", l_.recv_from);
    if (k > 0) in_at_ = (in_at_ + static_cast<size_t>(k)) % in_.size();
    if (k >= 0) heard_ = Clock::now();
  }

  const Links& l_;
  std::vector<char> out_, in_;
  size_t out_at_ = 0, in_at_ = 0;
  bool peer_done_ = false;
  Millis quiet_;
  Clock::time_point heard_;
  ZeroCopy* zerocopy_;
  uint64_t sends_ = 0;
};

// A byte count from --calls / --buffer: 1 byte to kMaxBufferBytes.
void check_bytes(const char* flag, size_t bytes) {
  if (bytes == 0 || bytes > kMaxBufferBytes) {
    DDP_THROW(InvalidArgument, flag, ": every size must be from 1 byte to 1G (got ", bytes, ")");
  }
}

int run(const LinkFlags& f) {
  if (f.listen.empty() && f.connect.empty()) DDP_THROW(InvalidArgument, "give --listen, --connect or both");
  if (f.both_ways && !f.listen.empty() && !f.connect.empty()) {
    DDP_THROW(InvalidArgument, "--both-ways: one connection, so --listen or --connect, not both");
  }
  for (const auto& [flag, v] : {std::pair{"--seconds", f.seconds}, std::pair{"--timeout", f.timeout}}) {
    if (!(v > 0 && v <= kMaxSeconds))
      DDP_THROW(InvalidArgument, flag, ": give seconds, above 0 and at most 3600");
  }
  const std::vector<size_t> calls = parse_sizes(f.calls, "--calls");
  for (size_t c : calls) check_bytes("--calls", c);
  const size_t buffer_bytes = parse_size(f.buffer, "--buffer");
  check_bytes("--buffer", buffer_bytes);
  const Millis wait(static_cast<int64_t>(f.timeout * 1000));
  const Links links = open_links(f, wait);
  std::optional<ZeroCopy> zerocopy;
  if (f.zerocopy && links.send_fd >= 0) zerocopy.emplace(links.send_fd);
  Pump pump(links, std::max(buffer_bytes, *std::max_element(calls.begin(), calls.end())), wait,
            zerocopy ? &*zerocopy : nullptr);
  const auto phase = std::chrono::duration<double>(f.seconds / static_cast<double>(calls.size()));
  std::vector<double> gbps;
  for (size_t call : calls) {
    const auto start = Clock::now();
    const size_t sent = pump.run(call, start + std::chrono::duration_cast<Clock::duration>(phase));
    gbps.push_back(static_cast<double>(sent) / std::chrono::duration<double>(Clock::now() - start).count() /
                   1e9);
  }
  pump.drain();
  if (links.send_fd < 0) return 0;  // a receiver only: the sender reports
  if (zerocopy) zerocopy->settle(pump.sends(), wait);
  const double best = *std::max_element(gbps.begin(), gbps.end());
  if (f.format == "json") {
    nlohmann::json j{{"machine", machine_json()}, {"both_ways", f.both_ways}, {"best_GBps", best}};
    for (size_t i = 0; i < calls.size(); ++i) j["calls"].push_back({{"bytes", calls[i]}, {"GBps", gbps[i]}});
    if (zerocopy) {
      j["zerocopy"] = {
          {"sends", pump.sends()}, {"completed", zerocopy->done()}, {"copied", zerocopy->copied()}};
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (size_t i = 0; i < calls.size(); ++i)
      std::printf("# %zu bytes per call: %.2f GB/s\n", calls[i], gbps[i]);
    if (zerocopy) {
      std::printf("# zerocopy: %llu sends, %llu completed, %llu of them copied by the kernel%s\n",
                  static_cast<unsigned long long>(pump.sends()),
                  static_cast<unsigned long long>(zerocopy->done()),
                  static_cast<unsigned long long>(zerocopy->copied()),
                  zerocopy->copied() > 0 ? " (no zero-copy on this path)" : "");
    }
    std::printf("%.2f\n", best);
  }
  return 0;
}

int link_main(int argc, char** argv) {
  CLI::App app{
      "ddp-bench link: what one TCP connection carries (one way, both ways, or a ring), best of several call "
      "sizes"};
  LinkFlags f;
  app.add_option("--listen", f.listen, "ADDR:PORT: accept one connection; bytes arrive on it");
  app.add_option("--connect", f.connect, "ADDR:PORT: connect; bytes leave on it");
  app.add_flag("--both-ways", f.both_ways, "send and receive on the one connection at once");
  app.add_flag(
      "--zerocopy", f.zerocopy,
      "send with MSG_ZEROCOPY and say how many sends the kernel copied after all (it does on loopback "
      "and veth)");
  app.add_option("--seconds", f.seconds, "how long the sender sends, split over --calls")
      ->capture_default_str();
  app.add_option("--calls", f.calls, "bytes per send/recv call, comma-separated (K, M suffixes)")
      ->capture_default_str();
  app.add_option("--buffer", f.buffer, "bytes sent from and received into, in turn (K, M suffixes)")
      ->capture_default_str();
  app.add_option("--timeout", f.timeout,
                 "seconds to wait for the peer to connect, and for a byte (or its end) once sending is over")
      ->capture_default_str();
  app.add_option("--format", f.format, "table (each call size, then the best GB/s alone) or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench link: %s\n", e.what());
    return 1;
  }
}

const Register kLinkSubcommand("link",
                               "what one TCP connection between hosts carries (the floor across hosts)",
                               link_main);

}  // namespace
}  // namespace ddp::bench
