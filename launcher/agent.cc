#include "launcher/agent.h"

#include <unistd.h>

#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/socket.h"
#include "launcher/agent_loop.h"
#include "launcher/etcd_job.h"
#include "launcher/heartbeat.h"
#include "launcher/node_round.h"
#include "launcher/stderr_sink.h"
#include "launcher/wait_progress.h"
#include "launcher/worker_env.h"
#include "rendezvous/elastic_rendezvous.h"
#include "rendezvous/file_store.h"
#include "rendezvous/job_records.h"
#include "rendezvous/multicast_discovery.h"
#include "rendezvous/tcp_store.h"

namespace ddp::launcher {
namespace {

// Thrown out of a wait when a handled signal (Ctrl-C...) arrives between attempts.
struct Interrupted {
  int signal;
};

constexpr Millis kSlice{200};  // how often waits between attempts look for a signal

}  // namespace

struct Agent::Impl {
  explicit Impl(AgentOptions options) : o(std::move(options)), supervisor(o.launch) {}

  AgentOptions o;
  Supervisor supervisor;  // first: blocks the handled signals before any thread exists
  std::unique_ptr<rdzv::Store> store;
  rdzv::EtcdStore* etcd_store = nullptr;                       // `store`, when it is etcd
  bool joining = false;                                        // in a round's rendezvous
  std::unique_ptr<rdzv::TCPStore> worker_store;                // file backend: the TCPStore for the workers
  std::unique_ptr<rdzv::mcast::MulticastDiscovery> discovery;  // multicast: alive until round 0 is done
  int multicast_rank = -1;                                     // multicast: the node rank agreed on the group
  bool hosting = false;                                        // this process serves the rendezvous TCPStore
  std::string store_endpoint;                                  // DDP_STORE
  std::string token;
  int picked_port = 0;                 // MASTER_PORT when LaunchOptions::pick_master_port
  std::unique_ptr<Liveness> liveness;  // multi-node: proves this launcher alive, watches the others
  std::unique_ptr<RoundLoop> loop;
  rdzv::NodeInfo self;
  std::string rendezvous_endpoint;  // host:port of the launchers' TCPStore (not the file backend)
  int my_rank = -1;                 // this node's rank in the round joined last
  std::shared_ptr<spdlog::logger> log = logger("agent");

  const LaunchOptions& l() const { return o.launch; }
  rdzv::JobRecords records() const { return rdzv::JobRecords(*store, l().run_id); }
  bool multi() const { return !l().standalone && l().nnodes_max > 1; }
  void check_interrupt() {
    if (int sig = supervisor.poll_signal()) throw Interrupted{sig};
    // A patient join (etcd) ends within the liveness's bound once its store is gone for good.
    if (joining && liveness) {
      if (auto why = liveness->store_lost()) DDP_THROW(NetworkError, *why);
    }
  }

  rdzv::TCPStoreOptions tcp_options(const std::string& host, uint16_t port, bool server,
                                    Millis connect) const {
    rdzv::TCPStoreOptions t;
    t.host = host;
    t.port = port;
    t.is_server = server;
    t.connect_timeout = connect;
    t.job_token = token;
    t.timeout = l().read_timeout;
    return t;
  }

  // One connection attempt of at most a second (of what is left before `deadline`): the store,
  // or null when nothing there answered yet. A store that refuses this job's token throws.
  std::unique_ptr<rdzv::TCPStore> try_connect(const std::string& host, uint16_t port,
                                              const Deadline& deadline) {
    try {
      return std::make_unique<rdzv::TCPStore>(
          tcp_options(host, port, false, std::max(Millis(1), std::min(Millis(1000), deadline.remaining()))));
    } catch (const TimeoutError&) {
    } catch (const NetworkError&) {
    }
    return nullptr;
  }

  // Connects in short slices so that a Ctrl-C while node 0 is not up yet still stops us.
  std::unique_ptr<rdzv::TCPStore> connect(const std::string& host, uint16_t port) {
    const Deadline deadline(l().rdzv_timeout);
    if (resolve_host(host).empty()) {
      DDP_THROW(NetworkError, "rendezvous store host '", host, "' does not resolve to an address");
    }
    while (true) {
      check_interrupt();
      if (auto s = try_connect(host, port, deadline)) return s;
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, "rendezvous store at ", net::Endpoint{host, port}.str(),
                  " did not answer within ", l().rdzv_timeout.count(),
                  " ms (is the launcher that hosts it running?)");
      }
    }
  }

  void resolve_token() {
    if (!o.job_token.empty())
      token = o.job_token;
    else if (auto t = settings::get(settings::kJobToken))
      token = *t;
    else if (!multi())
      token = random_hex(16);
    else if (l().rdzv_backend != RdzvBackend::kFile && l().rdzv_backend != RdzvBackend::kEtcd) {
      token = derive_job_token(l().run_id);
      log->warn(
          "{0} is not set: the job token is derived from --rdzv-id '{1}', which anyone who can "
          "guess the id can derive too; set {0} to the same secret on every node",
          settings::kJobToken.name, l().run_id);
    }
  }

  // Every launcher hosts a store and announces it; node 0's is kept, the others connect to it.
  void open_multicast_store(const StorePlan& plan) {
    auto own = std::make_unique<rdzv::TCPStore>(tcp_options("", 0, true, kDefaultConnectTimeout));
    rdzv::mcast::DiscoveryOptions d;
    d.socket.group = plan.group;
    d.socket.port = plan.port;
    d.socket.ttl = o.multicast_ttl;
    d.socket.interface = o.multicast_interface;
    d.job_id = l().run_id;
    d.token = token;
    d.world = l().nnodes_max;
    d.requested_rank = l().node_rank;
    d.host = self.host;
    d.addresses = self.addresses;
    d.store_port = own->port();
    d.timeout = l().rdzv_timeout;
    d.check_interrupt = [this] { check_interrupt(); };
    discovery = std::make_unique<rdzv::mcast::MulticastDiscovery>(d);
    const rdzv::mcast::DiscoveryResult r = discovery->wait();
    multicast_rank = r.rank;
    self.requested_rank = r.rank;  // the node rendezvous confirms the ranks agreed on the group
    log->info("multicast rendezvous on {}: node rank {} of {}; node 0 is {}", plan.group, r.rank,
              l().nnodes_max, r.by_rank[0].describe());
    if (r.rank == 0) {
      store_endpoint = net::Endpoint{self.addresses.front(), own->port()}.str();
      store = std::move(own);
      hosting = true;
      log->info("hosting the rendezvous store on {}", store_endpoint);
      return;
    }
    own.reset();
    store = connect_any(r.by_rank[0].reachable_at(), r.by_rank[0].store_port);
  }

  // The first of `hosts` whose store answers, tried in turn until the rendezvous deadline.
  std::unique_ptr<rdzv::TCPStore> connect_any(const std::vector<std::string>& hosts, uint16_t port) {
    const Deadline deadline(l().rdzv_timeout);
    std::string errors;
    while (true) {
      for (const auto& h : hosts) {
        check_interrupt();
        try {
          auto s = std::make_unique<rdzv::TCPStore>(
              tcp_options(h, port, false, std::max(Millis(1), std::min(Millis(1000), deadline.remaining()))));
          store_endpoint = net::Endpoint{h, port}.str();
          log->info("node 0's store answers at {}", store_endpoint);
          return s;
        } catch (const Error& e) {
          errors = e.message();
          log->debug("node 0's store at {}: {}", net::Endpoint{h, port}.str(), e.message());
        }
        if (deadline.expired()) {
          std::string all;
          for (const auto& x : hosts) all += (all.empty() ? "" : ", ") + x;
          DDP_THROW(TimeoutError, "multicast rendezvous: node 0's store (port ", port,
                    ") did not answer at any of its addresses (", all, ") within ", l().rdzv_timeout.count(),
                    " ms; last error: ", errors);
        }
      }
    }
  }

  // etcd: the job's store for launchers and workers alike; the token shared through it.
  void open_etcd() {
    auto s = open_etcd_store(l(), [this] { check_interrupt(); });
    rendezvous_endpoint = s->client().describe();
    etcd_store = s.get();
    store_endpoint = etcd_worker_store(l());
    if (token.empty()) token = rdzv::JobRecords(*s, l().run_id).token(random_hex(16));
    log->info("the job's store is {} under {}", rendezvous_endpoint, l().etcd.prefix);
    store = std::move(s);
  }

  void open_store() {
    const StorePlan plan = plan_store(o);
    using K = StorePlan::Kind;
    if (plan.kind == K::kEtcd) return open_etcd();
    if (plan.kind == K::kMulticast) return open_multicast_store(plan);
    if (plan.kind == K::kFile) {
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(plan.file_path).parent_path(), ec);
      store = std::make_unique<rdzv::FileStore>(plan.file_path);
      // A file left by a finished job with the same id would replay its rounds: refuse it.
      if (records().any_left()) {
        DDP_THROW(InvalidArgument, "rendezvous file ", plan.file_path,
                  " belongs to a finished job with the same --rdzv-id '", l().run_id,
                  "': use a new --rdzv-id per job (e.g. the scheduler's job id) or delete the file");
      }
      if (token.empty()) token = records().token(random_hex(16));
      return;
    }
    if (plan.kind == K::kHost) {
      host_store(plan);
      return;
    }
    if (plan.kind == K::kHostOrConnect) return host_or_connect(plan);
    store = connect(plan.connect_host, plan.port);
    store_endpoint = net::Endpoint{plan.connect_host, plan.port}.str();
  }

  void host_store(const StorePlan& plan) {
    auto s = std::make_unique<rdzv::TCPStore>(
        tcp_options(plan.bind_host, plan.port, true, kDefaultConnectTimeout));
    store_endpoint = net::Endpoint{plan.connect_host, s->port()}.str();
    store = std::move(s);
    hosting = true;
    log->log(multi() ? spdlog::level::info : spdlog::level::debug, "hosting the rendezvous store on {}",
             store_endpoint);
  }

  // The endpoint is on this host: host the store, or connect to the launcher that does. When
  // the port is taken but nothing there answers as this job's store (another program held it a
  // moment, or the launcher that held it left), try to host again, until the rendezvous timeout:
  // otherwise every node could find the port busy once and then wait on an empty port.
  void host_or_connect(const StorePlan& plan) {
    const Deadline deadline(l().rdzv_timeout);
    for (bool told = false;; told = true) {
      check_interrupt();
      try {
        return host_store(plan);
      } catch (const Error& e) {
        if (!told) {
          log->info("endpoint {}:{} is served by another launcher ({}); connecting", plan.connect_host,
                    plan.port, e.message());
        }
      }
      if (auto s = try_connect(plan.connect_host, plan.port, deadline)) {
        store = std::move(s);
        store_endpoint = net::Endpoint{plan.connect_host, plan.port}.str();
        return;
      }
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, "rendezvous store at ", net::Endpoint{plan.connect_host, plan.port}.str(),
                  ": this launcher could not host it (the port is taken) and nothing there answered as this "
                  "job's store within ",
                  l().rdzv_timeout.count(), " ms");
      }
    }
  }

  void describe_self() {
    self.host = net::hostname();
    self.id = random_hex(8);
    self.nproc = l().nproc_per_node;
    self.requested_rank = l().node_rank;
    if (!o.local_addr.empty())
      self.addresses = {o.local_addr};
    else if (!multi())
      self.addresses = {l().master_addr};
    else if (l().rdzv_backend == RdzvBackend::kStatic) {
      self.addresses = local_addresses(l().master_addr);
      if (l().node_rank == 0) self.addresses.insert(self.addresses.begin(), l().master_addr);
    } else if (l().rdzv_backend == RdzvBackend::kTcp || l().rdzv_backend == RdzvBackend::kMulticast) {
      // multicast: the source address of the route to the group first (the interface it uses).
      self.addresses = local_addresses(net::parse_endpoint(l().rdzv_endpoint, kDefaultTcpRdzvPort).host);
    } else if (l().rdzv_backend == RdzvBackend::kEtcd && !l().etcd.endpoints.empty()) {
      std::string first = l().etcd.endpoints.front();  // the route to an etcd member's host
      if (const auto scheme = first.find("://"); scheme != std::string::npos)
        first = first.substr(scheme + 3);
      self.addresses = local_addresses(net::parse_endpoint(first, kDefaultEtcdPort).host);
    } else {
      self.addresses = local_addresses("");
    }
  }

  rdzv::Waiting waiting(std::optional<Millis> timeout) {
    return {.timeout = timeout, .check_interrupt = [this] { check_interrupt(); }};
  }

  // Values node 0 decides for a multi-node tcp/file/etcd round: MASTER_PORT (a free port on node
  // 0, offered in its registration: the round brings it to every node) and, once per job, the
  // workers' TCPStore for the file backend. Node 0 also puts the port under its own key, which a
  // round whose layout lacks it (written by a launcher of an earlier version) is read from.
  void shared_values(rdzv::NodeAssignment& a, int round) {
    rdzv::RoundRecords r = records().round(round);
    if (a.node_rank == 0) r.set_master_port(self.master_port);
    a.master_port = a.offered_port > 0 ? a.offered_port : r.wait_master_port(waiting(l().rdzv_timeout));
    if (l().rdzv_backend != RdzvBackend::kFile) return;
    if (round == 0 && a.node_rank == 0) {
      worker_store = std::make_unique<rdzv::TCPStore>(tcp_options("", 0, true, kDefaultConnectTimeout));
      records().set_worker_store(net::Endpoint{a.master_addr, worker_store->port()}.str());
    }
    if (store_endpoint.empty()) store_endpoint = records().wait_worker_store(waiting(l().rdzv_timeout));
  }

  std::optional<rdzv::NodeAssignment> join_elastic(int round) {
    rdzv::ElasticRendezvousOptions eo;
    eo.run_id = l().run_id;
    eo.round = round;
    eo.min_nodes = l().nnodes_min;
    eo.max_nodes = l().nnodes_max;
    eo.join_timeout = l().rdzv_timeout;
    eo.last_call_timeout = l().last_call_timeout;
    eo.check_interrupt = [this] { check_interrupt(); };
    log->info("joining round {} or later ({} to {} nodes)", round, l().nnodes_min, l().nnodes_max);
    return rdzv::elastic_rendezvous(*store, self, eo);
  }

  std::optional<rdzv::NodeAssignment> rendezvous(int round) {
    // MASTER_PORT, offered in this node's registration should it be node 0 (shared_values).
    if (multi() && l().rdzv_backend != RdzvBackend::kStatic) self.master_port = free_port();
    if (l().elastic()) {
      auto joined = join_elastic(round);
      if (joined) finish_assignment(*joined);
      return joined;
    }
    rdzv::NodeRendezvousOptions ro;
    ro.nnodes = l().nnodes_max;
    ro.run_id = l().run_id;
    ro.round = round;
    ro.timeout = l().rdzv_timeout;
    ro.check_interrupt = [this] { check_interrupt(); };
    // Who arrived, who is awaited: often on a terminal, now and then in a log (within the timeout).
    const bool terminal = ::isatty(STDERR_FILENO) == 1;
    ProgressLine progress(terminal);  // through the stderr sink: never blocks
    if (multi()) {
      ro.on_progress = [&progress](const rdzv::NodeRendezvousProgress& p) { progress.show(p); };
      ro.progress_interval = std::min(terminal ? Millis(1000) : Millis(30'000), l().rdzv_timeout / 4);
    }
    rdzv::NodeAssignment a = rdzv::node_rendezvous(*store, self, ro);
    progress.finish();
    discovery.reset();  // every node reached the store: announcing is over
    finish_assignment(a);
    return a;
  }

  // What the launchers add to a round's layout: ports, the store, the token; then says it.
  void finish_assignment(rdzv::NodeAssignment& a) {
    const int round = a.round;
    a.master_port = l().standalone || l().pick_master_port ? picked_port : l().master_port;
    if (multi() && l().rdzv_backend != RdzvBackend::kStatic) shared_values(a, round);
    if (!multi()) a.master_addr = l().master_addr;
    a.store_endpoint = store_endpoint;
    a.job_token = token;
    a.run_id = l().run_id;
    a.round = round;
    log->log(multi() ? spdlog::level::info : spdlog::level::debug,
             "round {}: node {}/{}, ranks {}-{} of {}, MASTER_ADDR={} MASTER_PORT={} {}={}", round,
             a.node_rank, a.nnodes, a.rank_offset, a.rank_offset + a.local_world_size - 1, a.world_size,
             a.master_addr, a.master_port, settings::kStore.name, a.store_endpoint);
  }

  // The store host outlives every client: before leaving it waits (bounded by close_timeout)
  // for each other node of the last round to say it is leaving too, so no node loses the store
  // while it still reports its outcome. Every leaver sets "<run>/round/<n>/left/<node rank>"
  // (and counts itself in "<run>/left", which marks a file store as a finished job's).
  void leave() noexcept {
    if (!multi() || !store || store_gone()) return;
    try {
      records().count_left();
      if (!loop || loop->nodes() == 0) return;
      rdzv::RoundRecords round = records().round(loop->round());
      round.leave(my_rank);
      if (!hosting || loop->lost_nodes()) return;  // lost nodes will not say goodbye
      std::vector<int> others;
      for (int r = 0; r < loop->nodes(); ++r) {
        if (r != my_rank) others.push_back(r);
      }
      // A signal ends the wait, as the deadline does: the other nodes' launchers are on their own.
      auto signalled = [this] {
        if (int sig = supervisor.poll_signal()) throw Interrupted{sig};
      };
      round.wait_left(others, {.timeout = l().close_timeout, .check_interrupt = signalled, .slice = kSlice});
    } catch (const TimeoutError&) {
    } catch (const Interrupted&) {
    } catch (const std::exception& e) {
      log->debug("leaving: {}", e.what());
    }
  }

  // The heartbeat found the store unreachable: requests to it would wait for the link's timeout.
  bool store_gone() const { return liveness && liveness->store_lost(); }

  // Tells every launcher still waiting to join that the job is over (best effort).
  void close_job(const std::string& why) noexcept {
    if (!multi() || !store) return;
    try {
      records().close(why);
    } catch (const std::exception& e) {
      log->debug("closing the job: {}", e.what());
    }
  }

  // A store connection of the heartbeat's own, whose requests give up within the interval.
  std::unique_ptr<rdzv::Store> open_heartbeat_store() const {
    if (l().rdzv_backend == RdzvBackend::kFile)
      return std::make_unique<rdzv::FileStore>(plan_store(o).file_path);
    const net::Endpoint ep = net::parse_endpoint(rendezvous_endpoint);
    rdzv::TCPStoreOptions t = tcp_options(ep.host, ep.port, false, l().keep_alive_interval);
    t.timeout = l().keep_alive_interval;
    return std::make_unique<rdzv::TCPStore>(t);
  }

  // Liveness through the job's store (launcher/heartbeat.h), or on etcd leases.
  void start_liveness() {
    if (!multi()) return;
    if (l().rdzv_backend == RdzvBackend::kEtcd) {
      liveness = start_lease_liveness(l(), self.id, [this] { supervisor.wake_monitor(); });
      return;
    }
    if (l().rdzv_backend != RdzvBackend::kFile) rendezvous_endpoint = store_endpoint;
    StoreHeartbeatOptions h;
    h.run_id = l().run_id;
    h.id = self.id;
    h.interval = l().keep_alive_interval;
    h.max_attempt = l().keep_alive_max_attempt;
    h.join_patience = l().rdzv_timeout;
    h.store_name = l().rdzv_backend == RdzvBackend::kFile ? "the file store " + plan_store(o).file_path
                                                          : "the rendezvous store at " + rendezvous_endpoint;
    h.open_store = [this] { return open_heartbeat_store(); };
    h.on_loss = [this] { supervisor.wake_monitor(); };  // the round ends now, not at the next tick
    liveness = std::make_unique<StoreHeartbeat>(std::move(h));
  }

  // While a round's rendezvous runs: etcd's slow answers (a burst of joining launchers) are
  // waited for up to the rendezvous timeout instead of ending the launcher; check_interrupt ends
  // the join once the liveness finds etcd lost for good.
  struct Joining {
    explicit Joining(Impl* i) : impl(i) {
      impl->joining = true;
      if (impl->etcd_store) impl->etcd_store->set_patience(impl->l().rdzv_timeout);
    }
    ~Joining() {
      impl->joining = false;
      if (impl->etcd_store) impl->etcd_store->set_patience(Millis(0));
    }
    Joining(const Joining&) = delete;
    Joining& operator=(const Joining&) = delete;
    Impl* impl;
  };

  AgentOutcome run_rounds() {
    start_liveness();
    RoundLoopContext c;
    c.launch = &l();
    c.supervisor = &supervisor;
    c.store = multi() ? store.get() : nullptr;
    c.liveness = liveness.get();
    c.self = &self;
    c.store_name = l().rdzv_backend == RdzvBackend::kFile ? plan_store(o).file_path : rendezvous_endpoint;
    if (l().rdzv_backend == RdzvBackend::kEtcd) {
      c.store_lost_hint = "etcd lost its quorum (too few members alive) or is unreachable from this host";
      c.transient_store_errors = true;
    }
    c.hosting = hosting;
    c.join = [this](int round) {
      Joining j(this);
      auto a = rendezvous(round);
      if (a) my_rank = a->node_rank;
      return a;
    };
    c.check_interrupt = [this] { check_interrupt(); };
    // The round's outcome on a handle of its own (no request per tick): the heartbeat's kind of
    // connection, or on etcd a clone of the job's EtcdStore (its own HTTP connections and watch).
    if (l().rdzv_backend == RdzvBackend::kEtcd)
      c.open_watch_store = [this] { return store->clone(); };
    else
      c.open_watch_store = [this] { return open_heartbeat_store(); };
    loop = std::make_unique<RoundLoop>(std::move(c));
    AgentOutcome out = loop->run();
    if (store_gone()) return out;
    close_job(out.status == AgentStatus::kSucceeded ? "done" : "ended: " + out.detail);
    return out;
  }
};

Agent::Agent(AgentOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& d = *impl_;
  if (d.l().standalone || d.l().pick_master_port) d.picked_port = free_port();
}

Agent::~Agent() = default;

AgentOutcome Agent::run() {
  auto& d = *impl_;
  AgentOutcome out;
  try {
    d.resolve_token();
    d.describe_self();
    d.open_store();
    out = d.run_rounds();
  } catch (const Interrupted& i) {
    // Tell the other nodes (best effort) so they stop instead of restarting without us.
    if (d.multi() && d.store) {
      try {
        NodeRoundOptions ro;
        ro.run_id = d.l().run_id;
        ro.round = d.loop ? d.loop->round() : 0;
        NodeRound(*d.store, ro)
            .announce(RoundOutcome::interrupted(d.self.host + " got " + signal_name(i.signal)));
      } catch (const Error&) {
      }
      d.close_job("interrupted: " + d.self.host + " got " + signal_name(i.signal));
    }
    out = AgentOutcome{};
    out.status = AgentStatus::kInterrupted;
    out.last.interrupted_by = i.signal;
  } catch (...) {
    d.leave();
    d.liveness.reset();
    throw;
  }
  d.leave();
  d.liveness.reset();
  return out;
}

rdzv::NodeAssignment predicted_assignment(const AgentOptions& options) {
  const auto& l = options.launch;
  const bool multi = !l.standalone && l.nnodes_max > 1;
  rdzv::NodeAssignment a;
  a.nnodes = multi ? l.nnodes_max : 1;
  a.node_rank = multi ? std::max(0, l.node_rank) : 0;
  a.local_world_size = l.nproc_per_node;
  a.nproc_by_node.assign(a.nnodes, l.nproc_per_node);
  a.world_size = a.nnodes * l.nproc_per_node;
  a.rank_offset = a.node_rank * l.nproc_per_node;
  a.master_addr = l.master_addr;
  a.master_port = l.standalone || l.pick_master_port ? free_port() : l.master_port;
  a.store_endpoint = "<host:port, decided at start>";
  a.job_token = "<secret>";
  a.run_id = l.run_id;
  return a;
}

}  // namespace ddp::launcher
