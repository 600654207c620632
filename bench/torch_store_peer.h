#pragma once
// The peer for our TCPStore in `ddp-bench store`: PyTorch's own TCPStore
// (torch.distributed.TCPStore), driven by /usr/bin/python3 in the same shape as ours: one
// server, `clients` client connections, one thread each, per-op latencies pooled. Each op is
// checked as ours are (get returns what was set, the add total is exact); a wrong result or a
// missing python3/torch is an Error saying which. The client loop is Python (PyTorch releases
// the GIL inside each call); its own cost per op is measured and returned as `floor_us`.
#include <string>
#include <vector>

namespace ddp::bench {

struct PeerPhase {
  std::string op;  // set, get, add
  int round = 0;
  double ops_per_s = 0, p50_us = 0, p99_us = 0;
};

struct TorchStoreRun {
  std::vector<PeerPhase> phases;  // every op of every round
  double floor_us = 0;            // the Python loop's own cost per op (timer + call), median
};

struct TorchStoreOptions {
  int clients = 64;
  int ops_per_client = 100;
  size_t value_size = 64;
  int repeat = 3;
  std::string python = "/usr/bin/python3";
};

TorchStoreRun run_torch_tcpstore(const TorchStoreOptions& options);

// The value stored under `key` by both sides (the key repeated to `size` bytes), so a get
// that returns another key's value is caught.
std::string value_of(const std::string& key, size_t size);

}  // namespace ddp::bench
