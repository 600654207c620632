// ddp-bench store: set/get/add throughput and p50/p99 latency of the stores over loopback.
//   ddp-bench store --clients 64 --ops 10000     TCPStore (server in-process, one thread and one
//                                                connection per client) beside FileStore and,
//                                                when built with Gloo, gloo's FileStore (peer)
//   ddp-bench store --clients 1000 --connect-only   time to connect (and handshake) every client
// Every figure is the median over --repeat runs; nothing here asserts timings.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench/bench.h"
#include "rendezvous/file_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"

#ifdef DDP_WITH_GLOO
#include <gloo/rendezvous/file_store.h>
#endif

namespace ddp::bench {
namespace {

using rdzv::Bytes;
using SteadyClock = std::chrono::steady_clock;

struct Config {
  int clients = 64;
  int ops = 10000;  // per phase, over all clients
  size_t value_size = 64;
  int repeat = 3;
  bool connect_only = false;
  bool peers = true;
};

// One operation of one client: (client index, op index).
using OpFn = std::function<void(int, int)>;

struct Phase {
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// Runs ops_per_client ops on every client thread at once; latencies of every op are pooled.
Phase run_phase(int clients, int ops_per_client, const OpFn& op) {
  std::vector<std::vector<double>> lat(clients);
  std::latch start(clients + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      lat[c].reserve(ops_per_client);
      start.arrive_and_wait();
      for (int i = 0; i < ops_per_client; ++i) {
        auto t0 = SteadyClock::now();
        op(c, i);
        lat[c].push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
      }
    });
  }
  auto t0 = SteadyClock::now();
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  return {static_cast<double>(all.size()) / secs, percentile(all, 50), percentile(all, 99)};
}

// A store under test: per-client handles and the three operations (add may be absent).
struct Subject {
  std::string name;
  OpFn set, get, add;
};

struct Row {
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

void bench_subject(const Config& cfg, const Subject& s, const std::shared_ptr<int>& round, std::vector<Row>& rows) {
  int per_client = std::max(1, cfg.ops / cfg.clients);
  std::vector<Row> mine;
  for (const char* op : {"set", "get", "add"}) mine.push_back({s.name, op, {}});
  for (int r = 0; r < cfg.repeat; ++r) {
    *round = r;
    mine[0].runs.push_back(run_phase(cfg.clients, per_client, s.set));
    mine[1].runs.push_back(run_phase(cfg.clients, per_client, s.get));
    if (s.add) mine[2].runs.push_back(run_phase(cfg.clients, per_client, s.add));
  }
  for (auto& row : mine) {
    if (!row.runs.empty()) rows.push_back(row);
  }
}

Subject ddp_subject(const std::string& name, std::vector<std::shared_ptr<rdzv::Store>> clients, size_t value_size,
                    std::shared_ptr<int> round) {
  auto value = std::make_shared<Bytes>(value_size, 'v');
  Subject s{name, {}, {}, {}};
  s.set = [clients, value, round](int c, int i) { clients[c]->set(key_of(*round, c, i), *value); };
  s.get = [clients, round](int c, int i) { clients[c]->get(key_of(*round, c, i), Millis(60'000)); };
  s.add = [clients](int c, int) { clients[c]->add("counter", 1); };
  return s;
}

rdzv::TCPStoreOptions client_options(uint16_t port) {
  rdzv::TCPStoreOptions o;
  o.port = port;
  o.job_token = "bench";
  return o;
}

void print_rows(const Config& cfg, const std::vector<Row>& rows) {
  std::printf("store benchmark: %d clients (threads), %d ops per phase, %zu-byte values, loopback, median of %d\n",
              cfg.clients, cfg.ops, cfg.value_size, cfg.repeat);
  std::printf("%-16s %-4s %12s %10s %10s\n", "store", "op", "ops/s", "p50 us", "p99 us");
  for (const auto& r : rows) {
    Phase m = median_of(r.runs);
    std::printf("%-16s %-4s %12.0f %10.1f %10.1f\n", r.store.c_str(), r.op.c_str(), m.ops_per_s, m.p50_us, m.p99_us);
  }
  // Ratios against the peer measured in this run (gloo's FileStore), where there is one.
  for (const auto& r : rows) {
    if (r.store != "gloo FileStore") continue;
    for (const auto& o : rows) {
      if (o.op != r.op || o.store == r.store) continue;
      std::printf("ratio %-4s %-16s / gloo FileStore: throughput x%.2f, p50 x%.2f\n", r.op.c_str(),
                  o.store.c_str(), median_of(o.runs).ops_per_s / median_of(r.runs).ops_per_s,
                  median_of(o.runs).p50_us / median_of(r.runs).p50_us);
    }
  }
}

int run_ops(const Config& cfg) {
  std::vector<Row> rows;
  auto round = std::make_shared<int>(0);
  {
    rdzv::TCPStoreServer server({"127.0.0.1", 0, "bench"});
    std::vector<std::shared_ptr<rdzv::Store>> clients;
    for (int c = 0; c < cfg.clients; ++c) clients.push_back(std::make_shared<rdzv::TCPStore>(client_options(server.port())));
    bench_subject(cfg, ddp_subject("TCPStore", clients, cfg.value_size, round), round, rows);
  }
  if (cfg.peers) {
    auto dir = std::filesystem::temp_directory_path() / ("ddp-store-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
      std::vector<std::shared_ptr<rdzv::Store>> clients;
      for (int c = 0; c < cfg.clients; ++c) clients.push_back(std::make_shared<rdzv::FileStore>((dir / "ddp.store").string()));
      bench_subject(cfg, ddp_subject("FileStore", clients, cfg.value_size, round), round, rows);
    }
#ifdef DDP_WITH_GLOO
    {
      std::filesystem::create_directories(dir / "gloo");
      std::vector<std::shared_ptr<gloo::rendezvous::FileStore>> g;
      for (int c = 0; c < cfg.clients; ++c) g.push_back(std::make_shared<gloo::rendezvous::FileStore>((dir / "gloo").string()));
      auto value = std::make_shared<std::vector<char>>(cfg.value_size, 'v');
      Subject s{"gloo FileStore", {}, {}, {}};  // gloo's stores have no add
      s.set = [g, value, round](int c, int i) { g[c]->set(key_of(*round, c, i), *value); };
      s.get = [g, round](int c, int i) { g[c]->get(key_of(*round, c, i)); };
      bench_subject(cfg, s, round, rows);
    }
#endif
    std::filesystem::remove_all(dir);
  }
  print_rows(cfg, rows);
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
      std::fprintf(stderr, "store bench: server sees %zu connections, expected %d\n", server.num_connections(), cfg.clients);
      return 1;
    }
  }
  std::printf("store connect: %d clients (threads) connect + handshake to one TCPStore server over loopback, median of %d\n",
              cfg.clients, cfg.repeat);
  std::printf("all connected in %.1f ms; per client p50 %.0f us, p99 %.0f us\n", median(totals_ms), median(p50s),
              median(p99s));
  return 0;
}

int store_main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"Store throughput and latency over loopback (TCPStore; FileStore and gloo's FileStore beside it)",
               "ddp-bench store"};
  app.add_option("--clients", cfg.clients, "concurrent clients (one thread and connection each)")->check(CLI::Range(1, 100000));
  app.add_option("--ops", cfg.ops, "operations per phase (set, get, add), over all clients")->check(CLI::PositiveNumber);
  app.add_option("--value-size", cfg.value_size, "bytes per value")->check(CLI::Range(size_t{0}, rdzv::kMaxValueSize));
  app.add_option("--repeat", cfg.repeat, "runs per figure; medians are printed")->check(CLI::Range(1, 100));
  app.add_flag("--connect-only", cfg.connect_only, "only measure connecting every client");
  app.add_flag("!--no-peers", cfg.peers, "TCPStore only (skip FileStore and gloo's FileStore)");
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

const Register kRegister("store", "store set/get/add throughput and latency; --connect-only for connect time",
                         store_main);

}  // namespace
}  // namespace ddp::bench
