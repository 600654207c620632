#pragma once
// A real etcd for tests: 1 or 3 members started as child processes of the test (Debian's
// /usr/bin/etcd) on free loopback ports, with their data in a fresh directory (in /dev/shm
// where it exists: etcd fsyncs every write, and tmpfs makes that free). The constructor returns
// once every member answers a linearizable read (a leader is elected); kill(i) SIGKILLs one
// member; the destructor kills what is left and removes the directory. Members die with the
// thread that started them (PR_SET_PDEATHSIG): start clusters from the test's main thread.
// Tests that need etcd are decorated * doctest::skip(!have_etcd()): Skipped, never failed,
// where it is not installed.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/free_port.h"
#include "common/socket.h"
#include "rendezvous/etcd_client.h"

namespace ddp::rdzv::testing {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";
inline constexpr const char* kEtcdctlBinary = "/usr/bin/etcdctl";

inline bool have_etcd() { return ::access(kEtcdBinary, X_OK) == 0; }

struct EtcdClusterOptions {
  int members = 1;
  std::string scheme = "http";          // of the client URLs; https needs the TLS files below
  std::string cert, key, trusted_ca;    // the members' certificate; the CA they trust for clients
  bool client_cert_auth = false;        // members ask for client certificates
  std::vector<std::string> extra_args;  // passed to every member
};

class EtcdCluster {
 public:
  explicit EtcdCluster(EtcdClusterOptions options = {}) : options_(std::move(options)) {
    make_dir();
    for (int i = 0; i < options_.members; ++i) {
      const uint16_t p = net::pick_free_port(2);
      client_ports_.push_back(p);
      peer_ports_.push_back(static_cast<uint16_t>(p + 1));
    }
    pids_.assign(options_.members, -1);
    for (int i = 0; i < options_.members; ++i) start(i);
    wait_ready();
  }
  ~EtcdCluster() {
    for (int i = 0; i < static_cast<int>(pids_.size()); ++i) kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return options_.members; }
  std::string endpoint(int i) const { return "127.0.0.1:" + std::to_string(client_ports_.at(i)); }
  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
    return out;
  }
  const std::string& dir() const { return dir_; }

  // Options for a client of every member (TLS files as the cluster's, for a client
  // certificate the members' own: signed by the same CA).
  EtcdClientOptions client_options() const {
    EtcdClientOptions o;
    o.endpoints = endpoints();
    o.protocol = options_.scheme;
    if (options_.scheme == "https") {
      o.cacert = options_.trusted_ca;
      if (options_.client_cert_auth) {
        o.cert = options_.cert;
        o.key = options_.key;
      }
    }
    o.request_timeout = Millis(10'000);
    return o;
  }

  // SIGKILLs member i and reaps it (no-op when it is gone).
  void kill(int i) {
    if (pids_.at(i) <= 0) return;
    ::kill(pids_[i], SIGKILL);
    ::waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
  }
  bool alive(int i) const { return pids_.at(i) > 0; }
  // Starts a killed member again on its data and ports; returns once it serves reads.
  void restart(int i) {
    if (alive(i)) return;
    start(i);
    wait_member(i, Deadline(Millis(60'000)));
  }

  // The sum of member i's Prometheus samples whose line starts with `name` and contains
  // `label` (e.g. "grpc_server_msg_received_total", "grpc_method=\"Watch\""), read from its
  // /metrics over plain HTTP.
  double metric(int i, const std::string& name, const std::string& label) const {
    Fd fd = net::connect_tcp({"127.0.0.1", client_ports_.at(i)}, Deadline(Millis(5'000)));
    const std::string ask = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    net::send_all(fd.get(), ask.data(), ask.size(), Deadline(Millis(5'000)), "etcd /metrics");
    std::string all;
    char buf[16 << 10];
    for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<size_t>(n));
    double sum = 0;
    std::istringstream lines(all);
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with(name) || line.find(label) == std::string::npos) continue;
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  // The end of member i's log, for failure messages.
  std::string log_tail(int i, size_t bytes = 2000) const {
    std::ifstream in(dir_ + "/m" + std::to_string(i) + ".log");
    std::stringstream s;
    s << in.rdbuf();
    const std::string all = s.str();
    return all.size() > bytes ? all.substr(all.size() - bytes) : all;
  }

  // Runs etcdctl (v3) against member 0 with `args`; its exit code (output in the directory's
  // etcdctl.log).
  int etcdctl(const std::string& args) const {
    const std::string cmd = std::string("ETCDCTL_API=3 ") + kEtcdctlBinary +
                            " --endpoints=" + options_.scheme + "://" + endpoint(0) + " " + args + " >>'" +
                            dir_ + "/etcdctl.log' 2>&1";
    return std::system(cmd.c_str());
  }

 private:
  void make_dir() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(base) + "/ddp-etcd-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) DDP_THROW_ERRNO("mkdtemp ", tmpl);
    dir_ = tmpl;
  }

  std::string peer_url(int i) const { return "http://127.0.0.1:" + std::to_string(peer_ports_[i]); }
  std::string client_url(int i) const {
    return options_.scheme + "://127.0.0.1:" + std::to_string(client_ports_[i]);
  }

  std::vector<std::string> args(int i) const {
    std::string initial;
    for (int m = 0; m < size(); ++m) {
      if (m > 0) initial += ',';
      initial.append("m").append(std::to_string(m)).append("=").append(peer_url(m));
    }
    std::vector<std::string> a = {kEtcdBinary,
                                  "--name=m" + std::to_string(i),
                                  "--data-dir=" + dir_ + "/m" + std::to_string(i),
                                  "--listen-client-urls=" + client_url(i),
                                  "--advertise-client-urls=" + client_url(i),
                                  "--listen-peer-urls=" + peer_url(i),
                                  "--initial-advertise-peer-urls=" + peer_url(i),
                                  "--initial-cluster=" + initial,
                                  "--initial-cluster-state=new",
                                  "--initial-cluster-token=" + dir_};
    if (options_.scheme == "https") {
      a.push_back("--cert-file=" + options_.cert);
      a.push_back("--key-file=" + options_.key);
      if (!options_.trusted_ca.empty()) a.push_back("--trusted-ca-file=" + options_.trusted_ca);
      if (options_.client_cert_auth) a.push_back("--client-cert-auth");
    }
    a.insert(a.end(), options_.extra_args.begin(), options_.extra_args.end());
    return a;
  }

  void start(int i) {
    const std::vector<std::string> a = args(i);
    std::vector<char*> argv;
    for (const auto& s : a) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    const std::string log = dir_ + "/m" + std::to_string(i) + ".log";
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) DDP_THROW_ERRNO("fork for etcd");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pids_[i] = pid;
  }

  // Every member serves a linearizable read (so a leader exists), or answers that it refuses
  // one (authentication is on), or an error with the logs.
  void wait_ready() {
    const Deadline deadline(Millis(60'000));
    for (int i = 0; i < size(); ++i) wait_member(i, deadline);
  }

  void wait_member(int i, const Deadline& deadline) {
    EtcdClientOptions o = client_options();
    o.endpoints = {endpoint(i)};
    o.request_timeout = Millis(1'000);
    o.attempt_timeout = Millis(1'000);
    EtcdClient client(o);
    etcd::RangeRequest probe;
    probe.key = "ddp-test-probe";
    while (true) {
      int status = 0;
      if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = -1;
        DDP_THROW(StoreError, "etcd member m", i, " exited at start; its log ends:\n", log_tail(i));
      }
      try {
        client.range(probe);
        return;
      } catch (const StoreError&) {
        return;  // etcd answered, and refused (auth is on): it serves
      } catch (const Error& e) {
        if (deadline.expired()) {
          DDP_THROW(StoreError, "etcd member m", i, " not ready after 60 s (", e.message(),
                    "); its log ends:\n", log_tail(i));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  EtcdClusterOptions options_;
  std::string dir_;
  std::vector<uint16_t> client_ports_;
  std::vector<uint16_t> peer_ports_;
  std::vector<pid_t> pids_;
};

// One cluster of `members` per test binary, started on first use and stopped at exit: test
// cases share it under distinct key prefixes (unique_prefix) instead of paying a start each.
inline EtcdCluster& shared_etcd(int members) {
  static std::map<int, std::unique_ptr<EtcdCluster>> clusters;
  auto& c = clusters[members];
  if (!c) {
    EtcdClusterOptions o;
    o.members = members;
    c = std::make_unique<EtcdCluster>(o);
  }
  return *c;
}

// "/ddp-test/<pid>-<n>/": a key prefix no other fixture or test binary uses.
inline std::string unique_prefix(const std::string& what = "store") {
  static std::atomic<int> next{0};
  return "/ddp-test/" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(next++) + "/";
}

}  // namespace ddp::rdzv::testing
