// ddp-bench store: set/get/add throughput and p50/p99 latency of the stores over loopback.
//   ddp-bench store --clients 64 --ops 10000     TCPStore (server in-process, one thread and one
//                                                connection per client) beside PyTorch's TCPStore
//                                                (its peer, torch_store_peer.h), and FileStore
//                                                beside gloo's FileStore (its peer, with Gloo)
//   ddp-bench store --clients 1000 --connect-only   time to connect (and handshake) every client
// Ratios only between like systems (TCPStore / torch TCPStore, FileStore / gloo FileStore).
// Every get is compared with what was set under its key and every round's add total with
// clients x ops: a wrong result fails the run (non-zero exit, no table).
// Every figure is the median over --repeat runs; nothing here asserts timings.
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "bench/torch_store_peer.h"
#include "common/error.h"
#include "rendezvous/file_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"

#ifdef DDP_WITH_GLOO
#include <gloo/rendezvous/file_store.h>
#endif

namespace ddp::bench {
namespace {

using rdzv::Bytes;

struct Config {
  int clients = 64;
  int ops = 10000;  // per phase, over all clients
  size_t value_size = 64;
  int repeat = 3;
  bool connect_only = false;
  bool peers = true;
  std::string python = "/usr/bin/python3";
};

// One operation of one client: (client index, op index).
using OpFn = std::function<void(int, int)>;

struct Phase {
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// Runs ops_per_client ops on every client thread at once; latencies of every op are pooled.
// An op that throws (a store error, or a wrong result) stops its client; the first such error
// is rethrown here after every thread has joined.
Phase run_phase(int clients, int ops_per_client, const OpFn& op) {
  std::vector<std::vector<double>> lat(clients);
  std::latch start(clients + 1);
  std::vector<std::thread> threads;
  threads.reserve(clients);
  std::mutex mu;
  std::exception_ptr first_error;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      lat[c].reserve(ops_per_client);
      start.arrive_and_wait();
      try {
        for (int i = 0; i < ops_per_client; ++i) {
          auto t0 = Clock::now();
          op(c, i);
          lat[c].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  auto t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  return {static_cast<double>(all.size()) / secs, percentile(all, 50), percentile(all, 99)};
}

// A store under test: per-client handles and the three operations (add may be absent), and
// the add total of a round (checked against clients x ops after the add phase).
struct Subject {
  std::string name;
  OpFn set, get, add;
  std::function<int64_t()> add_total;
};

struct StoreRow {
  std::string store, op;
  std::vector<Phase> runs;
};

Phase median_of(const std::vector<Phase>& runs) {
  std::vector<double> a, b, c;
  for (const auto& r : runs) {
    a.push_back(r.ops_per_s);
    b.push_back(r.p50_us);
    c.push_back(r.p99_us);
  }
  return {median(a), median(b), median(c)};
}

// Keys are fresh in every repeat (gloo's FileStore refuses to overwrite a key).
std::string key_of(int round, int c, int i) {
  return "r" + std::to_string(round) + "/c" + std::to_string(c) + "/k" + std::to_string(i);
}

int per_client(const Config& cfg) { return std::max(1, cfg.ops / cfg.clients); }

// What a get must return: the value set under that key (the key repeated, see value_of).
void check_value(const std::string& store, const std::string& key, const std::string& got, size_t size) {
  const std::string want = value_of(key, size);
  if (got != want) {
    DDP_THROW(Error, store, ": WRONG RESULT: get ", key, " returned ", got.size(), " bytes '",
              got.substr(0, 24), "', expected ", want.size(), " bytes '", want.substr(0, 24), "'");
  }
}

void bench_subject(const Config& cfg, const Subject& s, const std::shared_ptr<int>& round,
                   std::vector<StoreRow>& rows) {
  const int per = per_client(cfg);
  std::vector<StoreRow> mine;
  for (const char* op : {"set", "get", "add"}) mine.push_back({s.name, op, {}});
  for (int r = 0; r < cfg.repeat; ++r) {
    *round = r;
    mine[0].runs.push_back(run_phase(cfg.clients, per, s.set));
    mine[1].runs.push_back(run_phase(cfg.clients, per, s.get));
    if (!s.add) continue;
    mine[2].runs.push_back(run_phase(cfg.clients, per, s.add));
    const int64_t total = s.add_total(), want = static_cast<int64_t>(cfg.clients) * per;
    if (total != want) DDP_THROW(Error, s.name, ": WRONG RESULT: add total ", total, ", expected ", want);
  }
  for (auto& row : mine) {
    if (!row.runs.empty()) rows.push_back(row);
  }
}

Subject ddp_subject(const std::string& name, const std::vector<std::shared_ptr<rdzv::Store>>& clients,
                    size_t value_size, const std::shared_ptr<int>& round) {
  Subject s{name, {}, {}, {}, {}};
  s.set = [clients, value_size, round](int c, int i) {
    const std::string k = key_of(*round, c, i), v = value_of(k, value_size);
    clients[c]->set(k, Bytes(v.begin(), v.end()));
  };
  s.get = [name, clients, value_size, round](int c, int i) {
    const std::string k = key_of(*round, c, i);
    const Bytes got = clients[c]->get(k, Millis(60'000));
    check_value(name, k, std::string(got.begin(), got.end()), value_size);
  };
  s.add = [clients, round](int c, int) { clients[c]->add("counter/" + std::to_string(*round), 1); };
  s.add_total = [clients, round] { return clients[0]->add("counter/" + std::to_string(*round), 0); };
  return s;
}

rdzv::TCPStoreOptions client_options(uint16_t port) {
  rdzv::TCPStoreOptions o;
  o.port = port;
  o.job_token = "bench";
  return o;
}

// The peers: each store is compared with its own kind only.
const char* peer_of(const std::string& store) {
  if (store == "TCPStore") return "torch TCPStore";
  if (store == "FileStore") return "gloo FileStore";
  return nullptr;
}

void print_rows(const Config& cfg, const std::vector<StoreRow>& rows, double torch_floor_us) {
  std::printf(
      "store benchmark: %d clients (threads), %d ops per phase, %zu-byte values, loopback, median of %d; "
      "every get and add total checked\n",
      cfg.clients, cfg.ops, cfg.value_size, cfg.repeat);
  std::printf("%-16s %-4s %12s %10s %10s\n", "store", "op", "ops/s", "p50 us", "p99 us");
  for (const auto& r : rows) {
    Phase m = median_of(r.runs);
    std::printf("%-16s %-4s %12.0f %10.1f %10.1f\n", r.store.c_str(), r.op.c_str(), m.ops_per_s, m.p50_us,
                m.p99_us);
  }
  if (torch_floor_us > 0) {
    std::printf(
        "(torch TCPStore's client loop is Python, GIL released in each call; its own cost per op, included "
        "above: %.2f us. Its set gets no reply in PyTorch's protocol: a send, where ours is a round trip.)\n",
        torch_floor_us);
  }
  // Ratios against the peer of the same kind measured in this run, where the ops compare.
  for (const auto& o : rows) {
    const char* peer = peer_of(o.store);
    if (!peer) continue;
    for (const auto& r : rows) {
      if (r.store != peer || r.op != o.op) continue;
      if (r.store == "torch TCPStore" && r.op == "set") {
        std::printf("ratio set  %-10s / %-15s: none (PyTorch's set is not acknowledged: not like for like)\n",
                    o.store.c_str(), peer);
        continue;
      }
      std::printf("ratio %-4s %-10s / %-15s: throughput x%.2f, p50 x%.2f\n", o.op.c_str(), o.store.c_str(),
                  peer, median_of(o.runs).ops_per_s / median_of(r.runs).ops_per_s,
                  median_of(o.runs).p50_us / median_of(r.runs).p50_us);
    }
  }
}

// PyTorch's TCPStore, in the rows' shape (its checks ran in Python).
double torch_rows(const Config& cfg, std::vector<StoreRow>& rows) {
  TorchStoreOptions o;
  o.clients = cfg.clients;
  o.ops_per_client = per_client(cfg);
  o.value_size = cfg.value_size;
  o.repeat = cfg.repeat;
  o.python = cfg.python;
  const TorchStoreRun run = run_torch_tcpstore(o);
  for (const char* op : {"set", "get", "add"}) {
    StoreRow row{"torch TCPStore", op, {}};
    for (const auto& p : run.phases) {
      if (p.op == op) row.runs.push_back({p.ops_per_s, p.p50_us, p.p99_us});
    }
    rows.push_back(row);
  }
  return run.floor_us;
}

int run_ops(const Config& cfg) {
  std::vector<StoreRow> rows;
  auto round = std::make_shared<int>(0);
  {
    rdzv::TCPStoreServer server({"127.0.0.1", 0, "bench"});
    std::vector<std::shared_ptr<rdzv::Store>> clients;
    clients.reserve(cfg.clients);
    for (int c = 0; c < cfg.clients; ++c)
      clients.push_back(std::make_shared<rdzv::TCPStore>(client_options(server.port())));
    bench_subject(cfg, ddp_subject("TCPStore", clients, cfg.value_size, round), round, rows);
  }
  double torch_floor_us = 0;
  if (cfg.peers) {
    torch_floor_us = torch_rows(cfg, rows);
    auto dir = std::filesystem::temp_directory_path() / ("ddp-store-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
      std::vector<std::shared_ptr<rdzv::Store>> clients;
      clients.reserve(cfg.clients);
      for (int c = 0; c < cfg.clients; ++c)
        clients.push_back(std::make_shared<rdzv::FileStore>((dir / "ddp.store").string()));
      bench_subject(cfg, ddp_subject("FileStore", clients, cfg.value_size, round), round, rows);
    }
#ifdef DDP_WITH_GLOO
    {
      std::filesystem::create_directories(dir / "gloo");
      std::vector<std::shared_ptr<gloo::rendezvous::FileStore>> g;
      g.reserve(cfg.clients);
      for (int c = 0; c < cfg.clients; ++c)
        g.push_back(std::make_shared<gloo::rendezvous::FileStore>((dir / "gloo").string()));
      const size_t vs = cfg.value_size;
      Subject s{"gloo FileStore", {}, {}, {}, {}};  // gloo's stores have no add
      s.set = [g, vs, round](int c, int i) {
        const std::string k = key_of(*round, c, i), v = value_of(k, vs);
        g[c]->set(k, std::vector<char>(v.begin(), v.end()));
      };
      s.get = [g, vs, round](int c, int i) {
        const std::string k = key_of(*round, c, i);
        const std::vector<char> got = g[c]->get(k);
        check_value("gloo FileStore", k, std::string(got.begin(), got.end()), vs);
      };
      bench_subject(cfg, s, round, rows);
    }
#endif
    std::filesystem::remove_all(dir);
  }
  print_rows(cfg, rows, torch_floor_us);
  return 0;
}

int run_connect_only(const Config& cfg) {
  std::vector<double> totals_ms, p50s, p99s;
  for (int r = 0; r < cfg.repeat; ++r) {
    rdzv::TCPStoreServer server({"127.0.0.1", 0, "bench"});
    std::vector<std::unique_ptr<rdzv::TCPStore>> clients(cfg.clients);
    Phase p = run_phase(cfg.clients, 1, [&](int c, int) {
      clients[c] = std::make_unique<rdzv::TCPStore>(client_options(server.port()));
    });
    totals_ms.push_back(cfg.clients / p.ops_per_s * 1000.0);
    p50s.push_back(p.p50_us);
    p99s.push_back(p.p99_us);
    if (server.num_connections() != static_cast<size_t>(cfg.clients)) {
      std::fprintf(stderr, "store bench: server sees %zu connections, expected %d\n",
                   server.num_connections(), cfg.clients);
      return 1;
    }
  }
  std::printf(
      "store connect: %d clients (threads) connect + handshake to one TCPStore server over loopback, median "
      "of %d\n",
      cfg.clients, cfg.repeat);
  std::printf("all connected in %.1f ms; per client p50 %.0f us, p99 %.0f us\n", median(totals_ms),
              median(p50s), median(p99s));
  return 0;
}

int store_main(int argc, char** argv) {
  Config cfg;
  CLI::App app{
      "Store throughput and latency over loopback: TCPStore beside PyTorch's TCPStore, FileStore beside "
      "gloo's FileStore; every result checked",
      "ddp-bench store"};
  app.add_option("--clients", cfg.clients, "concurrent clients (one thread and connection each)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--ops", cfg.ops, "operations per phase (set, get, add), over all clients")
      ->check(CLI::PositiveNumber);
  app.add_option("--value-size", cfg.value_size, "bytes per value")
      ->check(CLI::Range(size_t{0}, rdzv::kMaxValueSize));
  app.add_option("--repeat", cfg.repeat, "runs per figure; medians are printed")->check(CLI::Range(1, 100));
  app.add_flag("--connect-only", cfg.connect_only, "only measure connecting every client");
  app.add_flag("!--no-peers", cfg.peers,
               "TCPStore only (skip PyTorch's TCPStore, FileStore and gloo's FileStore)");
  app.add_option("--python", cfg.python, "the python3 with torch that runs PyTorch's TCPStore")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    rdzv::raise_fd_limit();
    return cfg.connect_only ? run_connect_only(cfg) : run_ops(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench store: %s\n", e.what());
    return 1;
  }
}

const Register kStoreSubcommand("store",
                                "store set/get/add throughput and latency; --connect-only for connect time",
                                store_main);

}  // namespace
}  // namespace ddp::bench
