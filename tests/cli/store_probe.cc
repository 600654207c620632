// ddp_store_probe: a worker for tests and the demo that proves the launcher's promises to a real
// worker: DDP_STORE is reachable (a TCPStore with DDP_JOB_TOKEN, or etcd: rendezvous/store_url.h),
// and every rank of WORLD_SIZE meets there.
// Each rank registers its host under "<run>/<attempt>/probe/<rank>" and waits for all others.
#include <cstdio>
#include <string>

#include "common/error.h"
#include "common/socket.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/store_url.h"
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
    const rdzv::StoreUrl url = rdzv::parse_store_url(*store_text);
    std::unique_ptr<rdzv::Store> opened;
    if (url.kind == rdzv::StoreUrl::Kind::kEtcd) {
      opened = std::make_unique<rdzv::EtcdStore>(
          rdzv::EtcdStoreOptions{.client = rdzv::etcd_client_options(url), .prefix = url.prefix});
    } else {
      rdzv::TCPStoreOptions o;
      o.host = url.tcp.host;
      o.port = url.tcp.port;
      o.job_token = test_env::get_or("DDP_JOB_TOKEN", "");
      o.connect_timeout = Millis(30'000);
      opened = std::make_unique<rdzv::TCPStore>(o);
    }
    rdzv::Store& store = *opened;
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
