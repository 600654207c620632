#pragma once
// Store fixtures for the conformance suite (store_test.cc): each makes a fresh store and
// further clients of the same data (another FileStore object on the same file, another
// TCPStore connection, another etcd client), so one suite runs against every implementation,
// plain and under PrefixStore. The etcd fixtures share one real etcd per test binary (1 member,
// and a 3-member cluster whose client knows all three), each fixture under a key prefix of its
// own.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "etcd_cluster.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"

namespace ddp::rdzv::testing {

// A fresh temporary directory, removed with its files at scope exit.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ddp-store-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct HashFixture {
  static constexpr const char* kName = "HashStore";
  std::shared_ptr<HashStore> store = std::make_shared<HashStore>(Millis(30'000));
  std::shared_ptr<Store> main() { return store; }
  std::shared_ptr<Store> client() { return store; }
  // Clients blocked in get/wait, where the implementation shows it (nullopt: it does not).
  std::optional<size_t> parked() const { return std::nullopt; }
};

struct FileFixture {
  static constexpr const char* kName = "FileStore";
  TempDir dir;
  std::shared_ptr<Store> first = std::make_shared<FileStore>(dir.file("store"), Millis(30'000));
  std::shared_ptr<Store> main() { return first; }
  std::shared_ptr<Store> client() { return std::make_shared<FileStore>(dir.file("store"), Millis(30'000)); }
  std::optional<size_t> parked() const { return std::nullopt; }
};

struct TcpFixture {
  static constexpr const char* kName = "TCPStore";
  std::shared_ptr<TCPStore> server = make_server();
  std::shared_ptr<Store> main() { return server; }
  std::shared_ptr<Store> client() {
    TCPStoreOptions o;
    o.port = server->port();
    o.timeout = Millis(30'000);
    o.connect_timeout = Millis(30'000);
    o.job_token = "conformance";
    return std::make_shared<TCPStore>(o);
  }
  // The server parks a get/wait on a missing key: the blocking path, seen from outside.
  std::optional<size_t> parked() const { return server->server()->num_waiting(); }
  static std::shared_ptr<TCPStore> make_server() {
    TCPStoreOptions o;
    o.is_server = true;
    o.timeout = Millis(30'000);
    o.job_token = "conformance";
    return std::make_shared<TCPStore>(o);
  }
};

template <int kMembers>
struct EtcdFixtureOf {
  static constexpr const char* kName = kMembers == 1 ? "EtcdStore" : "EtcdStore (3 members)";
  std::string prefix = unique_prefix("conformance");
  std::shared_ptr<Store> first = client();
  std::shared_ptr<Store> main() { return first; }
  std::shared_ptr<Store> client() {
    EtcdStoreOptions o;
    o.client = shared_etcd(kMembers).client_options();
    o.prefix = prefix;
    o.timeout = Millis(30'000);
    return std::make_shared<EtcdStore>(o);
  }
  std::optional<size_t> parked() const { return std::nullopt; }
};
using EtcdFixture = EtcdFixtureOf<1>;
using Etcd3Fixture = EtcdFixtureOf<3>;

template <typename Base>
struct Prefixed {
  static constexpr const char* kName = "PrefixStore";
  Base base;
  std::shared_ptr<Store> main() { return std::make_shared<PrefixStore>("round/3", base.main()); }
  std::shared_ptr<Store> client() { return std::make_shared<PrefixStore>("round/3", base.client()); }
  std::optional<size_t> parked() const { return base.parked(); }
};

// Where the fixture shows parked clients: waits (up to 30 s, no fixed sleep) until `n` are
// parked and returns whether they were, so a test can prove its get/wait really blocked.
// Where it does not, returns true at once (nothing to prove it with).
template <typename F>
bool until_parked(const F& f, size_t n) {
  if (!f.parked()) return true;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (*f.parked() < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace ddp::rdzv::testing
