// ddp_store_probe: a worker for tests and the demo that proves the launcher's promises to a real
// worker: DDP_STORE is reachable with DDP_JOB_TOKEN, and every rank of WORLD_SIZE meets there.
// Each rank registers its host under "<run>/<attempt>/probe/<rank>" and waits for all others.
#include <cstdio>
#include <string>

#include "common/error.h"
#include "common/socket.h"
#include "rendezvous/tcp_store.h"
#include "test_env.h"

int main() {
  using namespace ddp;
  try {
    auto store_text = test_env::get("DDP_STORE");
    if (!store_text) {
      std::fprintf(stderr, "ddp_store_probe: DDP_STORE is not set (run me under ddp-launch)\n");
      return 2;
    }
    const int rank = static_cast<int>(test_env::get_int_or("RANK", -1));
    const int world = static_cast<int>(test_env::get_int_or("WORLD_SIZE", 0));
    net::Endpoint ep = net::parse_endpoint(*store_text);
    rdzv::TCPStoreOptions o;
    o.host = ep.host;
    o.port = ep.port;
    o.job_token = test_env::get_or("DDP_JOB_TOKEN", "");
    o.connect_timeout = Millis(30'000);
    rdzv::TCPStore store(o);
    const std::string prefix = test_env::get_or("DDP_RUN_ID", "run") + "/" +
                               test_env::get_or("TORCHELASTIC_RESTART_COUNT", "0") + "/probe/";
    store.set(prefix + std::to_string(rank), net::hostname());
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back(prefix + std::to_string(r));
    store.wait(keys, Millis(60'000));
    std::printf("rank %d of %d: all %d ranks met in the store at %s\n", rank, world, world,
                store_text->c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp_store_probe: %s\n", e.message().c_str());
    return 1;
  }
}
