// TcpProcessGroup set-up: the mesh, the transport choice and the shared-memory segment.
#include <algorithm>
#include <atomic>
#include <charconv>

#include "comm/agreed_settings.h"
#include "comm/tcp/hierarchical_collectives.h"
#include "comm/tcp/hierarchy_calibration.h"
#include "comm/tcp/peer_mesh.h"
#include "comm/tcp/shm_collectives.h"
#include "comm/tcp/shm_links.h"
#include "comm/tcp/socket_collectives.h"
#include "comm/tcp/socket_engine.h"
#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "common/log.h"
#include "common/machine.h"
#include "common/settings.h"
#include "rendezvous/prefix_store.h"

namespace ddp::comm::tcp {
namespace {

// Rank 0's decisions, published so that every rank follows the same ones; the settings they
// come from are agreed before (agreed_settings.h), but these also depend on rank 0's host (its
// CPUs, whether its /dev/shm could hold the segment).
struct Config {
  TransportKind transport = TransportKind::kSocket;
  int streams = 1;  // connections to each peer (socket transport; hierarchical, unless split)
  // A hierarchical group's all_reduces above the small path: which way auto tries first.
  bool overlap_first = false;
  std::string shm_name;

  std::string encode() const {
    return encode_values({{"transport", to_string(transport)},
                          {"streams", std::to_string(streams)},
                          {"overlap_first", overlap_first ? "1" : "0"},
                          {"shm", shm_name}});
  }
  static Config decode(const std::string& text) {
    const SettingValues v = decode_values(text);
    auto field = [&](const char* name) {
      auto it = v.find(name);
      if (it == v.end()) DDP_THROW(InvalidArgument, "tcp backend: rank 0's config lacks '", name, "'");
      return it->second;
    };
    Config c;
    const std::string t = field("transport");
    c.transport = t == "shm"            ? TransportKind::kShm
                  : t == "hierarchical" ? TransportKind::kHierarchical
                                        : TransportKind::kSocket;
    const std::string s = field("streams");
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), c.streams);
    if (ec != std::errc() || end != s.data() + s.size() || c.streams < 1 || c.streams > kMaxSocketStreams)
      DDP_THROW(InvalidArgument, "tcp backend: rank 0's config has ", s, " connections per peer");
    c.overlap_first = field("overlap_first") == "1";
    c.shm_name = field("shm");
    return c;
  }
};

HostLayout layout_of(const Mesh& mesh) {
  std::vector<std::string> keys;
  for (const auto& p : mesh.peers) keys.push_back(p.boot_id);
  return HostLayout::of(keys);
}

// How long this rank polls for its peers before it sleeps, whatever the transport: ranks that
// have a core each pause-spin (like MPI's shm progress), then poll with sched_yield, then sleep;
// ranks that outnumber this host's cores never spin (a spinning rank would hold the core of the
// peer it waits for) and yield only briefly. Sleeping (a futex, poll(2)) costs a scheduling
// delay, milliseconds on a busy machine; polling with sched_yield keeps the rank runnable and
// lets others run. DDP_TCP_SPIN_US / DDP_TCP_YIELD_US override.
struct WaitBudget {
  bool roomy = true;  // a core for each of this host's ranks
  int spin_us = 0;
  int yield_us = 0;
};

// `cores`: the CPUs this host's ranks share (local_cpus: ddp-launch's, or this process's).
WaitBudget wait_budget(int ranks_here, int cores) {
  WaitBudget b;
  b.roomy = ranks_here <= cores;
  b.spin_us = static_cast<int>(settings::int_or(settings::kTcpSpinUs, b.roomy ? 200 : 0));
  b.yield_us = static_cast<int>(settings::int_or(settings::kTcpYieldUs, b.roomy ? 20000 : 50));
  return b;
}

// How long a caller's thread polls for its peers before the worker takes the op (a negative
// setting: never on the caller's thread).
InlineBudget inline_budget(int fallback_us) {
  const int64_t us = settings::int_or(settings::kTcpInlineSpinUs, fallback_us);
  if (us < 0) return {};
  return {InlineBudget::Mode::kPoll, std::chrono::microseconds(us)};
}

// This rank's host's share of the group (ranks with its same-host key).
int ranks_on_this_host(const HostLayout& layout, int rank) {
  const int host = layout.host_of[static_cast<size_t>(rank)];
  return static_cast<int>(std::count(layout.host_of.begin(), layout.host_of.end(), host));
}

TransportSetting transport_setting() {
  return settings::choice_as<TransportSetting>(settings::kTcpTransport);
}

// The group's medium (plan.h), where its segment can be mapped; a setting it could not follow
// is said.
TransportKind choose_transport(const Mesh& mesh, int world) {
  const HostLayout layout = layout_of(mesh);
  const GroupFacts facts{
      .world = world, .hosts = layout.hosts, .per_host = layout.per_host, .wanted = transport_setting()};
  const TransportKind medium = plan(facts, nullptr).medium;
  if (facts.wanted == TransportSetting::kShm && medium != TransportKind::kShm)
    logger("tcp")->warn("{}=shm but the group spans hosts: using sockets between them",
                        settings::kTcpTransport.name);
  if (facts.wanted == TransportSetting::kHierarchical && layout.hosts > 1 && layout.per_host != 1 &&
      medium != TransportKind::kHierarchical) {
    logger("tcp")->warn(
        "{}=hierarchical needs several ranks on each host, the same number on all: using sockets",
        settings::kTcpTransport.name);
  }
  return medium;
}

size_t bytes_setting(const settings::Setting& s) { return static_cast<size_t>(settings::int_value(s)); }

// How errors name a peer: by its world rank (a subgroup's own rank only beside it), so that a
// failure inside a subgroup or a hierarchy's child group points at the process users know.
std::string peer_name(const GroupSetup& setup, const Mesh& mesh, int r) {
  const auto& p = mesh.peers[static_cast<size_t>(r)];
  const int world = setup.global_ranks.empty() ? r : setup.global_ranks[static_cast<size_t>(r)];
  if (world == r) return detail::str("rank ", r, " (pid ", p.pid, " on ", p.host, ")");
  return detail::str("rank ", world, " (pid ", p.pid, " on ", p.host, "; rank ", r, " of group '", setup.name,
                     "')");
}

ShmGeometry geometry(int world) {
  ShmGeometry g;
  g.world = world;
  g.depth = static_cast<int>(settings::int_value(settings::kTcpShmDepth));
  // Chunks sized from this machine's L2 (slot_bytes_for_l2: rank 0's machine; the others read
  // the geometry from the segment, so every rank agrees). At most 64 MiB in all.
  const size_t fit = (size_t{64} << 20) / static_cast<size_t>(world * std::max(1, g.depth)) / 64 * 64;
  const size_t slot = std::min(slot_bytes_for_l2(machine_profile().l2_bytes), fit);
  g.slot_bytes =
      static_cast<size_t>(settings::int_or(settings::kTcpShmSlotBytes, static_cast<int64_t>(slot)));
  g.oneshot_bytes = bytes_setting(settings::kTcpShmOneshotBytes);
  if (g.slot_bytes % 64 != 0) {
    DDP_THROW(InvalidArgument, "environment variable ", settings::kTcpShmSlotBytes.name, "='", g.slot_bytes,
              "': a multiple of 64");
  }
  g.oneshot_bytes = std::min(g.oneshot_bytes, g.slot_bytes);
  return g;
}

bool shm_forced() { return transport_setting() == TransportSetting::kShm; }

CrossSetting cross_setting() { return settings::choice_as<CrossSetting>(settings::kTcpCma); }

void warn_fallback(const GroupSetup& setup, const ShmGeometry& g, const std::string& why) {
  logger("tcp")->warn(
      "tcp backend: group '{}' rank {}: shared memory unavailable ({}); using sockets for this group. It "
      "needs {} "
      "bytes ({} MiB) in /dev/shm: give the container more (e.g. docker --shm-size={}m), or set "
      "{}=socket to choose sockets without this warning",
      setup.name, setup.rank, why, g.total_bytes(), (g.total_bytes() + (1 << 20) - 1) >> 20,
      2 * ((g.total_bytes() + (1 << 20) - 1) >> 20), settings::kTcpTransport.name);
}

// Rank 0's segment; an invalid one (and a warning naming the size) when /dev/shm cannot hold
// it, unless DDP_TCP_TRANSPORT=shm insists.
ShmSegment create_or_fall_back(const GroupSetup& setup, const ShmGeometry& g) {
  try {
    return ShmSegment::create(g);
  } catch (const Error& e) {
    if (shm_forced()) throw;
    warn_fallback(setup, g, e.message());
    return {};
  }
}

// Another rank's mapping of rank 0's segment; an invalid one (and a warning) when it cannot be
// opened here (its own /dev/shm: another container or mount namespace on the same host).
ShmSegment open_or_fall_back(const GroupSetup& setup, const std::string& name) {
  try {
    return ShmSegment::open(name, setup.size);
  } catch (const Error& e) {
    warn_fallback(setup, geometry(setup.size), e.message());
    return {};
  }
}

// What this rank shows its peers for cross-memory attach (cross_memory.h), in the segment
// before the set-up barrier, so that every peer can test it once the barrier is passed.
void announce_cross(const ShmSegment& segment, int rank, CrossSetting cross) {
  if (cross == CrossSetting::kOn && !allow_cross_memory_peers()) {
    logger("tcp")->warn("{}=on: prctl(PR_SET_PTRACER) refused; peers may not reach rank {}'s memory",
                        settings::kTcpCma.name, rank);
  }
  segment.announce(rank, cross == CrossSetting::kOff ? CrossProbe{} : cross_probe());
}

// Rank 0 picks the transport (and the connections to each peer, and the way of a hierarchy's
// large all_reduces: its own settings) and creates the segment; the others map it. A rank that cannot
// (no room, another /dev/shm) says so in the store before the set-up barrier, and after the
// barrier every rank reads the same count: one failure and the whole group uses sockets. The
// barrier also lets the segment's name go: every rank that could map it has.
Config agree_on_transport(const GroupSetup& setup, const Mesh& mesh, const Config& proposal,
                          const Deadline& deadline, ShmSegment& segment) {
  rdzv::Store& store = *setup.store;
  Config config;
  if (setup.rank == 0) {
    config = proposal;
    config.transport = choose_transport(mesh, setup.size);
    if (config.transport == TransportKind::kShm) segment = create_or_fall_back(setup, geometry(setup.size));
    if (config.transport == TransportKind::kShm && !segment.valid())
      config.transport = TransportKind::kSocket;
    config.shm_name = segment.name();
    store.set("tcp/config", config.encode());
  } else {
    config = Config::decode(store.get_string("tcp/config", deadline.remaining()));
    if (config.transport == TransportKind::kShm) segment = open_or_fall_back(setup, config.shm_name);
  }
  const bool shm = config.transport == TransportKind::kShm;
  if (shm && !segment.valid()) store.add("tcp/shm_failed", 1);
  if (shm && segment.valid()) announce_cross(segment, setup.rank, cross_setting());
  store.set("tcp/ready/" + std::to_string(setup.rank), "1");
  std::vector<std::string> keys;
  keys.reserve(setup.size);
  for (int r = 0; r < setup.size; ++r) keys.push_back("tcp/ready/" + std::to_string(r));
  store.wait(keys, deadline.remaining());
  segment.unlink();
  if (shm) {
    if (const int64_t failed = store.add("tcp/shm_failed", 0); failed > 0) {
      if (shm_forced()) {
        DDP_THROW(BackendError, "tcp backend: group '", setup.name, "': ", failed,
                  " rank(s) could not map the shared memory and ", settings::kTcpTransport.name, "=shm");
      }
      config.transport = TransportKind::kSocket;
      config.shm_name.clear();
      segment = ShmSegment();
    }
  }
  return config;
}

// `streams` - 1 more connection sets (a connection to each peer each), after the
// first mesh's: one more mesh per stream, made by every rank in the same order (the store keys
// and handshake name carry its number).
std::vector<std::vector<Fd>> more_streams(const GroupSetup& setup, int streams, const Deadline& deadline) {
  std::vector<std::vector<Fd>> sets;
  for (int k = 1; k < streams; ++k) {
    auto store = std::make_shared<rdzv::PrefixStore>(detail::str("tcp/stream/", k), setup.store);
    const std::string name = detail::str(setup.name, "/stream", k);
    sets.push_back(build_mesh(*store, {setup.rank, setup.size, setup.job_token, name}, deadline).fds);
  }
  if (streams > 1) logger("tcp")->debug("group '{}': {} connections to each peer", setup.name, streams);
  return sets;
}

// The engines' options but their polling. The unsent bytes a connection holds: one pipeline
// chunk (agreed: part of the wire protocol) unless set (0: no limit).
SocketEngine::Options engine_options(const GroupSetup& setup, const Mesh& mesh) {
  SocketEngine::Options eo;
  eo.rank = setup.rank;
  eo.group = setup.name;
  eo.max_unexpected_bytes = static_cast<uint64_t>(settings::int_value(settings::kTcpMaxUnexpectedBytes));
  const auto chunk_bytes = static_cast<int64_t>(bytes_setting(settings::kTcpSocketChunkBytes));
  eo.notsent_lowat = static_cast<size_t>(settings::int_or(settings::kTcpSocketLowat, chunk_bytes));
  for (int r = 0; r < setup.size; ++r) eo.peer_names.push_back(peer_name(setup, mesh, r));
  return eo;
}

ShmCollectives::Options shm_options(const GroupSetup& setup, bool fingerprints, const WaitBudget& wait,
                                    const std::atomic<int>* blocked, CrossSetting cross) {
  ShmCollectives::Options so;
  so.rank = setup.rank;
  so.world = setup.size;
  so.fingerprints = fingerprints;
  so.spin_us = wait.spin_us;
  so.yield_us = wait.yield_us;
  so.blocked = blocked;
  so.stores = settings::choice_as<StoreSetting>(settings::kTcpShmStores);
  so.cross = cross;
  return so;
}

SocketCollectives::Options socket_options(const GroupSetup& setup, bool fingerprints,
                                          std::chrono::microseconds poll) {
  SocketCollectives::Options so;
  so.rank = setup.rank;
  so.world = setup.size;
  so.fingerprints = fingerprints;
  so.oneshot_bytes = bytes_setting(settings::kTcpSocketOneshotBytes);
  so.chunk_bytes = bytes_setting(settings::kTcpSocketChunkBytes);
  so.algo = settings::choice_as<SocketAlgo>(settings::kTcpSocketAlgo);
  so.world_ranks = setup.global_ranks;
  so.poll = poll;
  return so;
}

}  // namespace

void TcpProcessGroup::connect(const GroupSetup& setup, int ranks_on_host) {
  if (!setup.store) DDP_THROW(InvalidArgument, "tcp backend: group '", setup.name, "' has no store");
  // Every setting is checked before the mesh (a peer failing on its own bad value must not look
  // like a reset connection), and the group's are agreed: a difference fails every rank, naming it.
  settings::check(settings::Section::kTcp);
  const CrossSetting cross = cross_setting();
  WayPolicy ways{.large = settings::choice_as<LargeSetting>(settings::kTcpHierarchyLarge),
                 .overlap = overlap_setting()};
  const SettingValues agreed = group_values(settings::Section::kTcp);
  const int cpus = local_cpus();
  Deadline deadline(setup.options.timeout);
  // The mesh first: its listener is up while this rank waits for the others.
  Mesh mesh = build_mesh(*setup.store, {setup.rank, setup.size, setup.job_token, setup.name}, deadline);
  agree_settings(*setup.store, {setup.rank, setup.size, setup.name, "tcp/settings", deadline.remaining()},
                 agreed);
  Config proposal;
  const HostLayout layout = layout_of(mesh);
  const int ranks_here = ranks_on_host > 0 ? ranks_on_host : ranks_on_this_host(layout, setup.rank);
  proposal.streams = tcp::socket_streams(settings::auto_int(settings::kTcpSocketStreams), cpus, ranks_here);
  proposal.overlap_first = overlap_first(cpus, layout.per_host);

  ShmSegment segment;
  const Config config = agree_on_transport(setup, mesh, proposal, deadline, segment);

  const TransportKind kind = config.transport;
  fingerprints_ = settings::bool_value(settings::kTcpFingerprint);
  ways.overlap_first = config.overlap_first;
  shm_name_ = config.shm_name;
  SocketEngine::Options eo = engine_options(setup, mesh);
  const WaitBudget wait = wait_budget(ranks_here, cpus);
  logger("tcp")->debug("group '{}': {} ranks on this host's {} CPUs: waits spin {} us, then yield {} us",
                       setup.name, ranks_here, cpus, wait.spin_us, wait.yield_us);
  // Messages: the progress thread, and a thread waiting for a message or for a collective over
  // sockets, poll for the whole budget while a thread is blocked on the group (yielding: two
  // or three threads per rank share the cores), then sleep.
  const auto poll = std::chrono::microseconds(std::max(0, wait.spin_us) + std::max(0, wait.yield_us));
  eo.blocked = blocked_.get();
  eo.poll = poll;
  std::vector<std::vector<Fd>> sets;
  sets.push_back(std::move(mesh.fds));
  // A hierarchical group's own sockets carry its all_reduces that go flat (hierarchy_choice.h).
  if (kind == TransportKind::kSocket ||
      (kind == TransportKind::kHierarchical && ways.large != LargeSetting::kSplit)) {
    for (auto& set : more_streams(setup, config.streams, deadline)) sets.push_back(std::move(set));
  }
  for (auto& set : sets) {
    engines_.push_back(std::make_unique<SocketEngine>(eo, std::move(set), &health_));
    // The others carry only large messages (an op's chunks in turn, the parts of larger ones:
    // stripe_plan), whose waits sleep (poll_for): their threads sleep in poll(2) too, leaving
    // the cores to the threads that reduce and send.
    eo.poll = std::chrono::microseconds{0};
  }
  // The caller's thread polls for its peers as long as the worker would spin, no longer: an op
  // issued from a computation that goes on (DDP's backward) must not hold it up. Ranks that
  // outnumber cores poll inline too, yielding from the start (the peer gets the core at once):
  // handing each op to the worker would cost a thread wake-up per op. Over sockets a one-shot
  // all_reduce so drives the sockets itself (no hand-off to the worker and back).
  inline_ = inline_budget(wait.roomy ? wait.spin_us : 2000);
  if (kind == TransportKind::kShm) {
    const ShmCollectives::Options so = shm_options(setup, fingerprints_, wait, blocked_.get(), cross);
    transport_ = shm_transport({.shm = std::make_unique<ShmCollectives>(std::move(segment), so, &health_),
                                .store = store_.get(),
                                .group = setup.name,
                                .rank = setup.rank,
                                .world = setup.size,
                                .timeout = timeout(),
                                .inline_max_bytes = bytes_setting(settings::kTcpInlineMaxBytes)});
  } else {
    std::vector<SocketEngine*> engines;
    for (auto& engine : engines_) engines.push_back(engine.get());
    auto sockets =
        std::make_unique<SocketCollectives>(std::move(engines), socket_options(setup, fingerprints_, poll));
    if (kind == TransportKind::kHierarchical) {
      connect_hierarchy(setup, layout, ways, std::move(sockets));
    } else {
      transport_ = socket_transport(std::move(sockets), socket_streams());
    }
  }
}

namespace {
std::atomic<InterNodeFactory> g_inter_node_factory{nullptr};

// The cross-host child group: this backend's sockets, or the engine settings::kTcpInter names.
void make_cross_group(const GroupSetup& c, int ranks_on_host, HierarchyChildren& children) {
  const std::string inter = settings::choice(settings::kTcpInter);
  if (inter == "socket") {
    children.cross_tcp = TcpProcessGroup::create(c, {true, ranks_on_host});
    children.cross = children.cross_tcp;
    return;
  }
  const InterNodeFactory factory = g_inter_node_factory.load();
  if (factory == nullptr) {
    DDP_THROW(InvalidArgument, settings::kTcpInter.name, "=", inter,
              ": no backend registry here (groups made by make_tcp_group "
              "directly use sockets between hosts)");
  }
  children.cross = factory(inter, c);
}
}  // namespace

// The links among this host's ranks (shm_links.h) that a hierarchical group's flat ops take
// within the host: FIFOs of two pipeline chunks, less where the host's ranks' FIFOs
// (per_host^2) would pass 64 MiB; none where /dev/shm has no room (every rank sees it alike).
static std::unique_ptr<ShmLinks> host_links(const GroupSetup& setup, const HostLayout& layout,
                                            GroupHealth* health) {
  const auto me = static_cast<size_t>(setup.rank);
  const auto per = static_cast<size_t>(layout.per_host);
  const WaitBudget wait = wait_budget(layout.per_host, local_cpus());
  ShmLinks::Options o;
  o.rank = layout.local_of[me];
  o.world = layout.per_host;
  o.chunk_bytes = bytes_setting(settings::kTcpSocketChunkBytes);
  o.fifo_bytes =
      std::clamp<size_t>((size_t{64} << 20) / (per * per), 16 << 10, 2 * o.chunk_bytes) / 4096 * 4096;
  o.spin_us = wait.spin_us;
  o.yield_us = wait.yield_us;
  o.timeout = setup.options.timeout;
  auto store =
      std::make_shared<rdzv::PrefixStore>(detail::str("tcp/links/", layout.host_of[me], "/"), setup.store);
  try {
    return std::make_unique<ShmLinks>(store, o, health);
  } catch (const BackendError& e) {
    logger("tcp")->debug("group '{}': flat ops stay on sockets within the host: {}", setup.name, e.what());
    return nullptr;
  }
}

void set_inter_node_factory(InterNodeFactory factory) { g_inter_node_factory.store(factory); }

// The two child groups of a hierarchical group (hierarchical_collectives.h), made by every rank
// in the same order: this host's ranks, then the ranks with this rank's local index.
void TcpProcessGroup::connect_hierarchy(const GroupSetup& setup, const HostLayout& layout,
                                        const WayPolicy& ways, std::unique_ptr<SocketCollectives> flat) {
  const auto me = static_cast<size_t>(setup.rank);
  const int host = layout.host_of[me], local = layout.local_of[me], cross = layout.cross_of[me];
  auto child = [&](const std::string& part, int index, auto member, int rank) {
    GroupSetup c = setup;
    c.store = std::make_shared<rdzv::PrefixStore>(detail::str("tcp/", part, "/", index), setup.store);
    c.name = detail::str(setup.name, "/", part, index);
    c.global_ranks.clear();
    for (int r = 0; r < setup.size; ++r) {
      if (member(static_cast<size_t>(r))) {
        c.global_ranks.push_back(setup.global_ranks.empty() ? r : setup.global_ranks[static_cast<size_t>(r)]);
      }
    }
    c.size = static_cast<int>(c.global_ranks.size());
    c.rank = rank;
    return c;
  };
  HierarchyChildren children;
  children.local =
      TcpProcessGroup::create(child(
                                  "host", host, [&](size_t r) { return layout.host_of[r] == host; }, local),
                              {true});
  make_cross_group(child(
                       "across", local, [&](size_t r) { return layout.local_of[r] == local; }, cross),
                   layout.per_host, children);
  HierarchicalCollectives::Options ho;
  ho.rank = setup.rank;
  ho.world = setup.size;
  ho.layout = layout;
  // Agreed (it picks the children's ops): measured below unless set.
  const std::optional<int64_t> small = settings::auto_int(settings::kTcpHierarchySmallBytes);
  ho.small_bytes = small ? static_cast<size_t>(*small) : size_t{64} << 10;
  ho.segment_bytes = bytes_setting(settings::kTcpHierarchySegmentBytes);
  ho.ways = ways;  // agreed, and where auto starts is rank 0's
  auto hierarchy = std::make_unique<HierarchicalCollectives>(std::move(ho), std::move(children), flat.get());
  std::string large;
  for (LargeWay w : hierarchy->large_ways()) large += detail::str(large.empty() ? "" : ", ", to_string(w));
  logger("tcp")->debug(
      "group '{}': hierarchical, {} hosts x {} ranks; host {}, local rank {}; between hosts: {}; "
      "large all_reduces: {}",
      setup.name, layout.hosts, layout.per_host, host, local, hierarchy->cross()->backend_name(), large);
  if (!small) calibrate_small_bytes(*hierarchy, setup.name, setup.options.timeout);
  if (auto near = host_links(setup, layout, &health_)) {
    hierarchy->route_within_host(std::move(near));
    logger("tcp")->debug("group '{}': flat ops go through shared memory within the host", setup.name);
  }
  transport_ = hierarchical_transport(std::move(hierarchy), std::move(flat), setup.name);
}

ProcessGroupPtr make_tcp_group(const GroupSetup& setup) { return TcpProcessGroup::create(setup); }

}  // namespace ddp::comm::tcp

namespace ddp::comm {
ProcessGroupPtr make_tcp_group(const GroupSetup& setup) { return tcp::make_tcp_group(setup); }
}  // namespace ddp::comm
