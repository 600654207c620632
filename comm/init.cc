#include "comm/init.h"

#include <mutex>

#include "comm/init_store.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "rendezvous/prefix_store.h"

// How each init method meets (ranks resolved as init.h says):
// - env://  DDP_STORE when set: host:port (the launcher's store) or etcd://members/prefix/ (etcd
//   itself: rendezvous/store_url.h); else rank 0 hosts a TCPStore on MASTER_ADDR:MASTER_PORT; a
//   world of one needs no store, and mpi runs without one (MPI_COMM_WORLD is the rendezvous).
// - tcp://host:port?rank=R&world_size=N: rank 0 hosts the store at host:port.
// - tcp://239.x.y.z:PORT?world_size=N&group_name=G (or [ff15::...]:PORT): multicast discovery
//   assigns ranks not given; rank 0 hosts a store on an ephemeral port and announces it
//   (rendezvous/multicast_rendezvous.h); ttl=, interface=, timeout=.
// - file:///path: a FileStore shared by every rank.
// Keys live under "run/<DDP_RUN_ID>/<DDP_ELASTIC_ROUND>/<TORCHELASTIC_RESTART_COUNT>/<init #>",
// so a restarted worker never reads keys of the round or attempt before it.

namespace ddp {
namespace {

struct DefaultState {
  std::mutex mu;
  std::shared_ptr<comm::GroupFactory> factory;
  comm::StoreHandle store;
  int inits = 0;  // numbers each init in this process, so a re-init meets under fresh keys
};

DefaultState& state() {
  static DefaultState s;
  return s;
}

std::string run_prefix(int init_number) {
  const std::string run_id =
      settings::get(settings::kRunId).value_or(settings::get_or(settings::kTorchelasticRunId, "none"));
  const int64_t restart = settings::int_value(settings::kTorchelasticRestartCount);
  // The round too: a membership change starts new workers without counting a restart.
  const int64_t round = settings::int_or(settings::kElasticRound, 0);
  return "run/" + run_id + "/" + std::to_string(round) + "/" + std::to_string(restart) + "/" +
         std::to_string(init_number);
}

// The timeout the caller gave (the option, else DDP_TIMEOUT_MS); kUseDefault when none.
Millis given_timeout(Millis option) {
  if (option != kUseDefault) return option;
  if (auto ms = settings::get_int(settings::kTimeoutMs)) return Millis(*ms);
  return kUseDefault;
}

// Teardown order matters: groups before the store they met in; the store host last of all.
void leave(DefaultState& s) noexcept {
  try {
    if (s.factory && s.store.store) {
      // The last rank to leave says so; the host waits for that (bounded: a dead peer never
      // leaves) before its server goes away.
      const int n = s.factory->world()->size();
      if (s.store.store->add("left", 1) == n) s.store.store->set("left/all", "1");
      if (s.store.hosts_server) {
        s.store.store->wait({"left/all"}, std::min(s.factory->world()->timeout(), Millis(30'000)));
      }
    }
  } catch (const std::exception& e) {
    logger("comm")->warn("destroy_process_group: leaving the store: {}", e.what());
  }
  s.factory.reset();
  s.store = {};
}

}  // namespace

EnvRanks ranks_from_env() { return comm::env_ranks(); }

comm::ProcessGroupPtr init_process_group(const InitOptions& options) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.factory) DDP_THROW(InvalidArgument, "init_process_group: the default group exists already");
  // This library's own variables, checked before any peer waits on us (DDP_COPY_KERNEL and
  // DDP_F16C are otherwise read at a first copy or conversion, maybe on a backend's thread).
  settings::check(settings::Section::kLibrary);
  const int init_number = s.inits++;

  comm::StoreRequest request;
  request.backend = options.backend;
  request.init_method = options.init_method;
  request.rank = options.rank;
  request.world_size = options.world_size;
  request.job_token =
      options.job_token.empty() ? settings::get_or(settings::kJobToken, "") : options.job_token;
  request.given = options.store;
  const Millis timeout = given_timeout(options.timeout);
  request.connect_timeout = timeout;  // a store that never answers fails init within it
  comm::StoreHandle handle = comm::open_init_store(request);

  comm::GroupFactoryOptions fo;
  fo.backend = options.backend;
  fo.store = std::make_shared<rdzv::PrefixStore>(run_prefix(init_number), handle.store);
  fo.rank = handle.rank;
  fo.world_size = handle.world_size;
  fo.timeout = timeout == kUseDefault ? kDefaultCollectiveTimeout : timeout;
  fo.job_token = request.job_token;
  auto factory = std::make_shared<comm::GroupFactory>(fo);
  s.store = handle;
  s.store.store = fo.store;  // teardown bookkeeping under this init's prefix (it owns the base)
  s.factory = std::move(factory);
  return s.factory->world();
}

bool is_initialized() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.factory != nullptr;
}

comm::ProcessGroupPtr default_group() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.factory) DDP_THROW(NotInitialized, "default_group: init_process_group was not called");
  return s.factory->world();
}

comm::ProcessGroupPtr new_group(const std::vector<int>& ranks, const comm::NewGroupOptions& options) {
  std::shared_ptr<comm::GroupFactory> factory;
  {
    // Not under the lock while the backend meets its peers: destroy may come from elsewhere.
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.factory) DDP_THROW(NotInitialized, "new_group: init_process_group was not called");
    factory = s.factory;
  }
  return factory->new_group(ranks, options);
}

void destroy_process_group() noexcept {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.factory) leave(s);
}

}  // namespace ddp
