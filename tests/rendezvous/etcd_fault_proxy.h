#pragma once
// FaultProxy: a TCP proxy in front of one etcd member, for the tests of requests lost in flight.
// It relays every connection both ways, except the first request whose bytes contain `match`:
//   kDropAnswer   relayed to etcd, etcd's answer read and thrown away, then the client's
//                 connection closed: the request was applied and the client cannot know. With
//                 `hold`, every request for that long after it gets no answer either (an etcd
//                 too slow to answer in time), and its connection is closed then. it
//   kDropRequest  the client's connection closed without relaying it: never applied
// Real sockets and a real etcd; only the one answer (or request) goes missing, as when a member
// dies or a link breaks at that moment. libcurl sends a request again by itself when a connection
// it re-used dies before any answer: with one_answer_per_connection the proxy closes each
// connection after its first whole answer (by its Content-Length), so every request goes out on
// a fresh connection and the loss reaches the client as an error.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/fd.h"
#include "common/socket.h"

namespace ddp::rdzv::testing {

class FaultProxy {
 public:
  enum class Fault { kDropAnswer, kDropRequest };

  FaultProxy(net::Endpoint target, std::string match, Fault fault, bool one_answer_per_connection = false,
             Millis hold = Millis(0))
      : target_(std::move(target)),
        match_(std::move(match)),
        fault_(fault),
        single_(one_answer_per_connection),
        hold_(hold) {
    listener_ = net::listen_tcp({.host = "127.0.0.1", .port = 0});
    port_ = net::local_port(listener_.get());
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FaultProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : pumps_) t.join();
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  bool fired() const { return fired_; }

 private:
  static constexpr int kTickMs = 50;  // how soon the threads see stop_

  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, kTickMs) <= 0) continue;
      Fd client(::accept(listener_.get(), nullptr, nullptr));
      if (!client) continue;
      std::lock_guard<std::mutex> lock(mu_);
      pumps_.emplace_back([this, c = std::move(client)]() mutable { pump(std::move(c)); });
    }
  }

  // Relays one connection until either side closes (or stop_), applying the fault once.
  void pump(Fd client) {
    Fd server;
    try {
      server = net::connect_tcp(target_, Deadline(Millis(5'000)));
    } catch (const std::exception&) {
      return;
    }
    char buf[64 << 10];
    std::string answer;  // what etcd answered so far on this connection
    while (!stop_) {
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(p, 2, kTickMs) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = i == 0 ? client.get() : server.get();
        const int to = i == 0 ? server.get() : client.get();
        const ssize_t n = ::recv(from, buf, sizeof buf, 0);
        if (n <= 0) return;
        if (i == 0 && Clock::now() < silent_until_.load()) return stay_silent();
        if (i == 0 && !fired_ &&
            std::string_view(buf, static_cast<size_t>(n)).find(match_) != std::string::npos) {
          fired_ = true;
          if (fault_ == Fault::kDropAnswer)
            drop_answer(client.get(), server.get(), buf, static_cast<size_t>(n));
          return;  // both connections close
        }
        if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
        if (i == 1 && single_ && answer_complete(&answer, buf, static_cast<size_t>(n))) return;
      }
    }
  }

  // Until the hold is over (or stop_): no answer.
  void stay_silent() const {
    while (!stop_ && Clock::now() < silent_until_.load()) std::this_thread::sleep_for(Millis(kTickMs));
  }

  // Appends an answer's bytes; true once its head and Content-Length bytes of body are in.
  static bool answer_complete(std::string* answer, const char* data, size_t size) {
    answer->append(data, size);
    const size_t head = answer->find("\r\n\r\n");
    const size_t at = answer->find("Content-Length: ");
    if (head == std::string::npos || at == std::string::npos || at > head) return false;
    return answer->size() >= head + 4 + std::stoul(answer->substr(at + 16));
  }

  // Sends the request on (the rest of it too, should it come in more pieces) and waits for
  // etcd's first answer bytes: it was applied.
  void drop_answer(int client, int server, const char* data, size_t size) {
    if (::send(server, data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) return;
    char buf[64 << 10];
    const Deadline deadline(Millis(10'000));
    while (!stop_ && !deadline.expired()) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, kTickMs) <= 0) continue;
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {  // the answer: thrown away
        silent_until_ = Clock::now() + hold_;
        stay_silent();
        return;
      }
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0 || ::send(server, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
      }
    }
  }

  net::Endpoint target_;
  std::string match_;
  Fault fault_;
  bool single_;
  Millis hold_;
  Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> fired_{false};
  std::atomic<Clock::time_point> silent_until_{};
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace ddp::rdzv::testing
