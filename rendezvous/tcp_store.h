#pragma once
// TCPStore: a Store served over TCP by one process (is_server: it hosts a TCPStoreServer on
// host:port, port 0 ephemeral, read back with port()) to any number of clients.
// - Clients connect with backoff and jitter, then prove the job token both ways without sending
//   it (tcp_store_handshake.h): a refused token or a stranger on the port is a StoreError saying
//   so. No answer within connect_timeout is a TimeoutError naming the endpoint.
// - get/wait block on the server; at the deadline the client cancels its wait there and throws
//   TimeoutError naming the missing keys. interrupt() ends the blocked wait and every later one.
// - A lost server or connection is a NetworkError naming the endpoint, never a hang, and every
//   later call fails fast the same way: the connection is not re-established (the rendezvous
//   must be redone). Thread-safe: requests are serialized on one connection.
// - wait_workers > 0: the server's constructor returns once that many clients (itself included)
//   have connected, or throws TimeoutError after `timeout`.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/error.h"
#include "common/fd.h"
#include "common/socket.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

class TCPStoreServer;

struct TCPStoreOptions {
  // Client: the server's address. Server: the interface to bind ("" or "0.0.0.0": all).
  std::string host = "127.0.0.1";
  uint16_t port = 0;                      // 0 with is_server: an ephemeral port (see TCPStore::port())
  bool is_server = false;                 // host the server in this process
  Millis timeout = kDefaultStoreTimeout;  // default for get/wait and replies
  Millis connect_timeout = kUseDefault;   // connect + handshake; unset: min(timeout, kDefaultConnectTimeout)
  std::string job_token;                  // empty: DDP_JOB_TOKEN (empty there too: no token)
  int wait_workers = 0;                   // >0: see the header comment
};

class TCPStore : public Store {
 public:
  explicit TCPStore(TCPStoreOptions options);
  ~TCPStore() override;

  uint16_t port() const { return endpoint_.port; }
  // Where this client connects ("127.0.0.1" when the server binds all interfaces).
  const net::Endpoint& endpoint() const { return endpoint_; }
  // The hosted server, or nullptr for a plain client.
  TCPStoreServer* server() const { return server_.get(); }
  // See the header comment. Thread-safe, idempotent, noexcept.
  void interrupt() noexcept override;
  // A client connection to the same server, with the same token (a server's clone is a client).
  std::unique_ptr<Store> clone() override;

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  void connect(const std::string& token);
  void handshake(const std::string& token, const Deadline& deadline);
  [[noreturn]] void connect_timed_out(const Error& last);
  // Sends one request frame and returns the Ok payload (past its type byte); Error replies are
  // rethrown. `op` and `key` name the request in errors.
  std::vector<uint8_t> call(const std::vector<uint8_t>& frame, const char* op, const std::string& key);
  // Like call() for get/wait: cancels on the server at the deadline, then throws TimeoutError.
  std::vector<uint8_t> call_wait(const std::vector<uint8_t>& frame, const char* op,
                                 const std::vector<std::string>& keys, Millis timeout);
  std::vector<uint8_t> read_frame(const Deadline& deadline, const char* op);
  [[noreturn]] void lost(const char* op, const std::string& why);
  void wait_for_workers(int count);

  TCPStoreOptions options_;
  std::unique_ptr<TCPStoreServer> server_;
  net::Endpoint endpoint_;
  std::mutex mu_;
  Fd fd_;
  std::string broken_;  // why the connection was lost; empty while healthy
  Fd wake_;             // an eventfd: readable once interrupt() was called
};

}  // namespace ddp::rdzv
