#include "cli/resolve.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "cli/config_file.h"
#include "cli/option_specs.h"
#include "cli/run_id.h"
#include "cli/suggest.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/socket.h"
#include "rendezvous/init_method.h"

namespace ddp::cli {
namespace {

using launcher::AgentOptions;

// Typed access to the merged settings, with the source of each value for messages.
class Settings {
 public:
  explicit Settings(const SettingLayer& layer) : layer_(layer) {}
  bool has(const std::string& name) const { return layer_.count(name) > 0; }
  const std::string& text(const std::string& name) const { return layer_.at(name).items.at(0); }
  const std::vector<std::string>& items(const std::string& name) const { return layer_.at(name).items; }
  // "--nproc-per-node", "DDP_LAUNCH_X", "job.json line 3 (key 'x')".
  std::string what(const std::string& name) const {
    auto it = layer_.find(name);
    return it == layer_.end() ? name : it->second.source;
  }
  // "nnodes 2 (from --nnodes)".
  std::string show(const std::string& name, const std::string& value) const {
    return name + " " + value + (has(name) ? " (from " + what(name) + ")" : " (default)");
  }

 private:
  const SettingLayer& layer_;
};

launcher::RdzvBackend parse_backend(const Settings& s) {
  using B = launcher::RdzvBackend;
  if (!s.has("rdzv_backend")) return B::kStatic;
  std::string b = s.text("rdzv_backend");
  std::transform(b.begin(), b.end(), b.begin(), [](unsigned char c) { return std::tolower(c); });
  if (b == "static") return B::kStatic;
  if (b == "tcp" || b == "c10d") return B::kTcp;
  if (b == "file") return B::kFile;
  if (b == "multicast") return B::kMulticast;
  // torchrun's etcd backends speak etcd's v2 API; ours speaks v3 under either name.
  if (b == "etcd" || b == "etcd-v2" || b == "etcd-v3") return B::kEtcd;
  DDP_THROW(InvalidArgument, s.what("rdzv_backend"), ": unknown rendezvous backend '", b,
            "' (static, tcp, c10d, file, multicast, etcd)",
            did_you_mean(b, {"static", "tcp", "c10d", "file", "multicast", "etcd"}));
}

// Slurm (srun, one task per node) and Open MPI (mpirun, one process per node) fill in the node
// rank, node count and master address the user did not give.
// srun with several tasks per node starts several launchers per node: each would be a job of its
// own (or, told the node count, clash over node ranks). Refused unless the layout is given.
void check_slurm_tasks(const Settings& s, const EnvLookup& env, std::vector<std::string>& warnings) {
  auto nodes = env("SLURM_STEP_NUM_NODES"), tasks = env("SLURM_STEP_NUM_TASKS");
  auto as_int = [](const std::optional<std::string>& v) {
    try {
      return v ? parse_int(*v, "") : 0;
    } catch (const InvalidArgument&) {
      return 0;
    }
  };
  if (as_int(tasks) <= as_int(nodes)) return;
  const std::string what = "srun started " + *tasks + " tasks on " + *nodes +
                           " node(s), but ddp-launch runs once per node and starts the workers itself";
  const std::string fix =
      "run `srun --ntasks-per-node=1 ddp-launch --nproc-per-node N ...` (N workers per node)";
  if (!s.has("nnodes")) DDP_THROW(InvalidArgument, what, ": ", fix);
  warnings.push_back(what + "; nnodes, node_rank and master_addr are not taken from Slurm (" + fix + ")");
}

void infer_from_scheduler(const Settings& s, const EnvLookup& env, AgentOptions& o,
                          std::vector<std::string>& warnings) {
  auto get = [&](std::initializer_list<const char*> names) -> std::optional<std::string> {
    for (const char* n : names) {
      if (auto v = env(n); v && !v->empty()) return v;
    }
    return std::nullopt;
  };
  auto& l = o.launch;
  if (l.standalone) return;
  // Only srun exports SLURM_STEP_*: the batch script (and an salloc shell) has SLURM_NNODES and
  // SLURM_NODEID=0 too, but runs once, on the first node, so it is one node, not node 0 of many.
  auto slurm_nodes = get({"SLURM_STEP_NUM_NODES"});
  auto slurm_tasks = get({"SLURM_STEP_NUM_TASKS"});
  auto slurm_node = get({"SLURM_NODEID"});
  check_slurm_tasks(s, env, warnings);
  bool slurm = slurm_nodes && slurm_node && (!slurm_tasks || *slurm_tasks == *slurm_nodes);
  auto ompi_size = get({"OMPI_COMM_WORLD_SIZE"});
  auto ompi_rank = get({"OMPI_COMM_WORLD_RANK"});
  auto ompi_local = get({"OMPI_COMM_WORLD_LOCAL_SIZE"});
  bool ompi = !slurm && ompi_size && ompi_rank && (!ompi_local || *ompi_local == "1");
  if (!slurm && !ompi) return;
  const std::string src =
      slurm ? "Slurm (SLURM_STEP_NUM_NODES/SLURM_NODEID)" : "Open MPI (OMPI_COMM_WORLD_SIZE/RANK)";
  if (!s.has("nnodes")) {
    int n = parse_int(slurm ? *slurm_nodes : *ompi_size, src);
    l.nnodes_min = l.nnodes_max = n;
  }
  if (l.nnodes_max <= 1) return;
  if (!s.has("node_rank") && l.rdzv_backend == launcher::RdzvBackend::kStatic) {
    l.node_rank = parse_int(slurm ? *slurm_node : *ompi_rank, src);
  }
  if (!s.has("master_addr") && slurm) {
    if (auto list = get({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
      auto hosts = expand_hostlist(*list);
      if (!hosts.empty()) l.master_addr = hosts.front();
    }
  }
}

// Node counts and ranks: elastic counts need a rendezvous that forms rounds; ranks below nnodes.
void check_node_counts(const Settings& s, const launcher::LaunchOptions& l) {
  if (l.elastic()) {
    using B = launcher::RdzvBackend;
    if (l.rdzv_backend != B::kTcp && l.rdzv_backend != B::kFile && l.rdzv_backend != B::kEtcd) {
      DDP_THROW(InvalidArgument,
                s.show("nnodes", std::to_string(l.nnodes_min) + ":" + std::to_string(l.nnodes_max)),
                ": elastic node counts (MIN < MAX) need rdzv_backend tcp (c10d), file or etcd, which form "
                "rounds as "
                "nodes come and go; rdzv_backend is ",
                launcher::to_string(l.rdzv_backend),
                s.has("rdzv_backend") ? " (from " + s.what("rdzv_backend") + ")" : "");
    }
    if (l.node_rank >= 0) {
      DDP_THROW(InvalidArgument, "node_rank (from ", s.what("node_rank"),
                ") with elastic node counts: the rendezvous ranks the nodes of every round by arrival");
    }
  }
  if (l.standalone) {
    if (l.nnodes_max > 1) {
      DDP_THROW(InvalidArgument, "standalone (from ", s.what("standalone"), ") runs one node, but ",
                s.show("nnodes", std::to_string(l.nnodes_max)));
    }
  }
  if (l.node_rank >= 0 && l.node_rank >= l.nnodes_max) {
    DDP_THROW(InvalidArgument, s.show("node_rank", std::to_string(l.node_rank)), " must be below ",
              s.show("nnodes", std::to_string(l.nnodes_max)));
  }
}

// What each rendezvous backend needs of rdzv_endpoint (tcp, file, etcd).
void check_endpoint(const Settings& s, const launcher::LaunchOptions& l) {
  if (l.rdzv_backend == launcher::RdzvBackend::kFile && l.rdzv_endpoint.empty()) {
    DDP_THROW(InvalidArgument, "rdzv_backend file (from ", s.what("rdzv_backend"),
              ") needs rdzv_endpoint: a directory every node shares");
  }
  if (l.rdzv_backend == launcher::RdzvBackend::kTcp && l.rdzv_endpoint.empty()) {
    DDP_THROW(InvalidArgument, "rdzv_backend tcp (from ", s.what("rdzv_backend"),
              ") needs rdzv_endpoint: HOST[:PORT] of the store");
  }
  if (l.rdzv_backend == launcher::RdzvBackend::kTcp && l.nnodes_max > 1 && !l.standalone &&
      net::parse_endpoint(l.rdzv_endpoint, launcher::kDefaultTcpRdzvPort).port == 0) {
    DDP_THROW(InvalidArgument, "rdzv_endpoint ", l.rdzv_endpoint, " (from ", s.what("rdzv_endpoint"),
              "): port 0 (any free port) works for one node only; ", l.nnodes_max,
              " nodes must meet on a port they all know");
  }
  if (l.rdzv_backend == launcher::RdzvBackend::kEtcd && l.rdzv_endpoint.empty()) {
    DDP_THROW(InvalidArgument, "rdzv_backend etcd (from ", s.what("rdzv_backend"),
              ") needs rdzv_endpoint: the etcd members, HOST[:PORT][,HOST[:PORT]...] (port ",
              launcher::kDefaultEtcdPort, " when not given)");
  }
}

// Multicast's group and its own rdzv_conf keys; a static rendezvous over several nodes.
void check_multicast_and_static(const Settings& s, const AgentOptions& o) {
  const auto& l = o.launch;
  if (l.rdzv_backend == launcher::RdzvBackend::kMulticast) {
    const std::string why =
        "rdzv_backend multicast (from " + s.what("rdzv_backend") +
        ") needs rdzv_endpoint GROUP:PORT, a multicast group and port (239.x.y.z:PORT or [ff15::...]:PORT)";
    if (l.rdzv_endpoint.empty()) DDP_THROW(InvalidArgument, why);
    net::Endpoint ep;
    try {
      ep = net::parse_endpoint(l.rdzv_endpoint);
    } catch (const InvalidArgument& e) {
      DDP_THROW(InvalidArgument, why, "; ", e.message());
    }
    if (!rdzv::is_multicast_address(ep.host) || ep.port == 0) {
      DDP_THROW(InvalidArgument, why, "; got '", l.rdzv_endpoint, "' (from ", s.what("rdzv_endpoint"), ")");
    }
  } else if (o.multicast_ttl != 1 || !o.multicast_interface.empty()) {
    DDP_THROW(InvalidArgument, s.what("rdzv_conf"),
              ": ttl= and interface= apply to rdzv_backend multicast only");
  }
  if (l.rdzv_backend == launcher::RdzvBackend::kStatic && l.nnodes_max > 1) {
    if (l.node_rank < 0) {
      DDP_THROW(
          InvalidArgument, "a static rendezvous over ", l.nnodes_max,
          " nodes needs node_rank (--node-rank) on every node, or rdzv_backend tcp/file to assign ranks");
    }
    if (!s.has("master_addr") && l.rdzv_endpoint.empty() && l.master_addr == "127.0.0.1") {
      DDP_THROW(InvalidArgument, "a static rendezvous over ", l.nnodes_max,
                " nodes needs master_addr (--master-addr): node 0's address (under srun Slurm's node list "
                "gives it; Open MPI exports none)");
    }
  }
}

void check_combinations(const Settings& s, const AgentOptions& o) {
  const auto& l = o.launch;
  check_node_counts(s, l);
  check_endpoint(s, l);
  check_multicast_and_static(s, o);
  for (const char* other : {"no_python", "run_path"}) {
    if (s.has("module") && s.has(other) && s.text("module") == "true" && s.text(other) == "true") {
      DDP_THROW(InvalidArgument, "module (from ", s.what("module"), ") and ", other, " (from ", s.what(other),
                ") exclude each other");
    }
  }
  if (s.has("run_path") && s.has("no_python") && s.text("run_path") == "true" &&
      s.text("no_python") == "true") {
    DDP_THROW(InvalidArgument, "run_path (from ", s.what("run_path"), ") and no_python (from ",
              s.what("no_python"), ") exclude each other");
  }
  if (l.master_port < 0 || l.master_port > 65534) {
    DDP_THROW(InvalidArgument, s.what("master_port"), ": ", l.master_port, " is not a port in 0..65534");
  }
  if (l.max_restarts < 0) DDP_THROW(InvalidArgument, s.what("max_restarts"), ": must be >= 0");
  if (l.monitor_interval.count() <= 0)
    DDP_THROW(InvalidArgument, s.what("monitor_interval"), ": must be > 0");
  if (l.rdzv_timeout.count() <= 0) DDP_THROW(InvalidArgument, s.what("rdzv_conf"), ": timeout must be > 0");
}

// PROGRAM.py (or any PROGRAM with --run-path) runs with the interpreter, like torchrun, unless
// --no-python; --module runs it with -m. The interpreter is $PYTHON_EXEC (torchrun's variable:
// a venv or conda env that is not activated), else python3 from PATH. Messages keep naming the
// user's PROGRAM, not the interpreter.
void wrap_python(const Settings& s, const EnvLookup& env, launcher::LaunchOptions& l,
                 std::vector<std::string>& command) {
  auto flag = [&](const char* name) { return s.has(name) && parse_bool(s.text(name), s.what(name)); };
  std::string python = "python3";
  if (auto p = env("PYTHON_EXEC"); p && !p->empty()) python = *p;
  const bool script = command.front().size() > 3 && command.front().ends_with(".py");
  if (flag("module")) {
    l.program = command.front();
    command.insert(command.begin(), {python, "-u", "-m"});
  } else if (!flag("no_python") && (script || flag("run_path"))) {
    l.program = command.front();
    command.insert(command.begin(), {python, "-u"});
  }
}

// torchrun's --numa-binding, mapped onto --cpu-bind (giving both is an error).
void apply_numa_binding(const Settings& s, launcher::LaunchOptions& l) {
  if (!s.has("numa_binding")) return;
  std::string t = s.text("numa_binding");
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.has("cpu_bind")) {
    DDP_THROW(InvalidArgument, "numa_binding (from ", s.what("numa_binding"), ") and cpu_bind (from ",
              s.what("cpu_bind"), ") both bind the workers: give one");
  }
  if (t == "node" || t == "socket") {
    l.cpu_bind = launcher::CpuBind::kNuma;
    l.numa_memory = true;
  } else if (t == "exclusive" || t == "core-complex" || t == "core_complex") {
    l.cpu_bind = launcher::CpuBind::kCores;
  } else {
    DDP_THROW(InvalidArgument, s.what("numa_binding"), ": '", s.text("numa_binding"),
              "' is not node, socket, exclusive or core-complex",
              did_you_mean(t, {"node", "socket", "exclusive", "core-complex"}));
  }
}

void check_start_method(const Settings& s) {
  if (!s.has("start_method")) return;
  const std::string& m = s.text("start_method");
  if (m != "spawn" && m != "fork" && m != "forkserver") {
    DDP_THROW(InvalidArgument, s.what("start_method"), ": '", m, "' is not spawn, fork or forkserver",
              did_you_mean(m, {"spawn", "fork", "forkserver"}));
  }
}

// torchrun ignores these with --standalone (it picks its own rendezvous): so do we, saying so.
void drop_standalone_conflicts(const Settings& s, launcher::LaunchOptions& l,
                               std::vector<std::string>& warnings) {
  if (!l.standalone) return;
  for (const char* k : {"rdzv_backend", "rdzv_endpoint", "node_rank"}) {
    if (s.has(k))
      warnings.push_back(std::string(k) + " (from " + s.what(k) + ") is ignored: standalone (from " +
                         s.what("standalone") + ") picks its own rendezvous");
  }
  l.rdzv_backend = launcher::RdzvBackend::kStatic;
  l.rdzv_endpoint.clear();
  l.node_rank = -1;
}

std::string pet_name(std::string_view option) {
  const std::string launch(settings::family_prefix(settings::kLaunchOption));
  return std::string(settings::family_prefix(settings::kPetOption)) + env_name(option).substr(launch.size());
}

}  // namespace

SettingLayer env_layer(const EnvLookup& env, const std::vector<std::string>& env_names) {
  SettingLayer layer;
  std::vector<std::string> known;
  for (const auto& spec : option_specs()) {
    if (spec.in_cli) known.push_back(env_name(spec.name));
  }
  for (const auto& name : env_names) {
    if (name.starts_with(settings::family_prefix(settings::kLaunchOption)) &&
        std::find(known.begin(), known.end(), name) == known.end()) {
      DDP_THROW(InvalidArgument, "unknown environment variable ", name, did_you_mean(name, known));
    }
  }
  for (const auto& spec : option_specs()) {
    if (!spec.in_cli) continue;
    std::string var = env_name(spec.name);
    auto v = env(var);
    if ((!v || v->empty()) && spec.name != "config") {  // torchrun's PET_<NAME>, under ours
      var = pet_name(spec.name);
      v = env(var);
    }
    if (!v || v->empty()) continue;
    SettingValue sv{{*v}, var};
    if (spec.kind == ValueKind::kBool) sv.items = {parse_bool(*v, var) ? "true" : "false"};
    if (spec.kind == ValueKind::kKeyValues) {
      // Several KEY=VALUE pairs separated by newlines or ';'.
      sv.items.clear();
      std::string cur;
      for (char c : *v + ";") {
        if (c == ';' || c == '\n') {
          if (!cur.empty()) sv.items.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
    }
    layer[std::string(spec.name)] = sv;
  }
  return layer;
}

SettingLayer merge_settings(const SettingLayer& flags, const SettingLayer& env) {
  SettingLayer config;
  const SettingValue* path = nullptr;
  if (auto it = flags.find("config"); it != flags.end())
    path = &it->second;
  else if (auto e = env.find("config"); e != env.end())
    path = &e->second;
  if (path != nullptr) config = load_config_file(path->items.at(0));
  return merge_layers({config, env, flags});
}

namespace {

// Typed setters over the merged settings, each naming the setting's source in its errors.
struct Reader {
  const Settings& s;
  void str(const char* name, std::string& out) const {
    if (s.has(name)) out = s.text(name);
  }
  void integer(const char* name, int& out) const {
    if (s.has(name)) out = parse_int(s.text(name), s.what(name));
  }
  void seconds(const char* name, Millis& out) const {
    if (s.has(name)) out = parse_seconds(s.text(name), s.what(name));
  }
  bool flag(const char* name) const { return s.has(name) && parse_bool(s.text(name), s.what(name)); }
};

// --rdzv-conf's etcd keys: for rdzv_backend etcd only; a client certificate needs its key.
void read_etcd_conf(const Settings& s, const RdzvConf& conf, launcher::LaunchOptions& l) {
  if (!conf.has_etcd_keys()) return;
  if (l.rdzv_backend != launcher::RdzvBackend::kEtcd) {
    DDP_THROW(InvalidArgument, s.what("rdzv_conf"),
              ": protocol=, cacert=, cert=, key= and etcd_prefix= apply to rdzv_backend etcd only");
  }
  auto& e = l.etcd;
  if (conf.protocol) e.protocol = *conf.protocol;
  if (conf.cacert) e.cacert = *conf.cacert;
  if (conf.cert) e.cert = *conf.cert;
  if (conf.key) e.key = *conf.key;
  if (conf.etcd_prefix) e.prefix = *conf.etcd_prefix;
  if (e.cert.empty() != e.key.empty())
    DDP_THROW(InvalidArgument, s.what("rdzv_conf"),
              ": cert= and key= go together (a client certificate and its key)");
}

// Layout and rendezvous: nproc, nodes, ranks, master, backend, endpoint, id, --rdzv-conf.
void read_layout(const Reader& r, const EnvLookup& env, AgentOptions& o) {
  const Settings& s = r.s;
  auto& l = o.launch;
  l.standalone = r.flag("standalone");
  l.dry_run = r.flag("dry_run");
  if (s.has("nproc_per_node"))
    l.nproc_per_node = parse_nproc(s.text("nproc_per_node"), s.what("nproc_per_node"), env);
  if (s.has("nnodes"))
    std::tie(l.nnodes_min, l.nnodes_max) = parse_nnodes(s.text("nnodes"), s.what("nnodes"));
  r.integer("node_rank", l.node_rank);
  if (s.has("node_rank") && l.node_rank < 0)
    DDP_THROW(InvalidArgument, s.what("node_rank"), ": must be >= 0");
  l.master_addr = "127.0.0.1";
  r.str("master_addr", l.master_addr);
  r.integer("master_port", l.master_port);
  l.rdzv_backend = parse_backend(s);
  r.str("rdzv_endpoint", l.rdzv_endpoint);
  if (s.has("rdzv_id")) l.rdzv_id = parse_run_id(s.text("rdzv_id"), s.what("rdzv_id"));
  if (s.has("rdzv_conf")) {
    RdzvConf conf = parse_rdzv_conf(s.text("rdzv_conf"), s.what("rdzv_conf"));
    if (conf.timeout) l.rdzv_timeout = *conf.timeout;
    if (conf.last_call_timeout) l.last_call_timeout = *conf.last_call_timeout;
    if (conf.close_timeout) l.close_timeout = *conf.close_timeout;
    if (conf.read_timeout) l.read_timeout = *conf.read_timeout;
    if (conf.keep_alive_interval) l.keep_alive_interval = *conf.keep_alive_interval;
    if (conf.keep_alive_max_attempt) l.keep_alive_max_attempt = *conf.keep_alive_max_attempt;
    o.rdzv_is_host = conf.is_host;
    if (conf.ttl) o.multicast_ttl = *conf.ttl;
    if (conf.interface) o.multicast_interface = *conf.interface;
    read_etcd_conf(s, conf, l);
  }
  if (l.rdzv_backend == launcher::RdzvBackend::kEtcd && !l.rdzv_endpoint.empty())
    l.etcd.endpoints =
        parse_etcd_endpoints(l.rdzv_endpoint, "rdzv_endpoint (from " + s.what("rdzv_endpoint") + ")");
  r.str("local_addr", o.local_addr);
}

// Supervision, logs and the workers' environment.
void read_supervision(const Reader& r, const EnvLookup& env, launcher::LaunchOptions& l) {
  const Settings& s = r.s;
  r.integer("max_restarts", l.max_restarts);
  r.seconds("monitor_interval", l.monitor_interval);
  r.seconds("shutdown_timeout", l.shutdown_timeout);
  if (s.has("signals_to_handle"))
    l.signals_to_handle = parse_signals(s.text("signals_to_handle"), s.what("signals_to_handle"));
  r.str("log_dir", l.log_dir);
  if (s.has("redirects")) l.redirects = parse_streams(s.text("redirects"), s.what("redirects"));
  if (s.has("tee")) l.tee = parse_streams(s.text("tee"), s.what("tee"));
  if (s.has("local_ranks_filter"))
    l.local_ranks_filter = parse_rank_list(s.text("local_ranks_filter"), s.what("local_ranks_filter"));
  if (auto t = env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")) l.log_line_prefix_template = *t;
  r.str("role", l.role);
  if (s.has("cpu_bind")) l.cpu_bind = parse_cpu_bind(s.text("cpu_bind"), s.what("cpu_bind"));
  apply_numa_binding(s, l);
  check_start_method(s);
  if (s.has("env")) {
    for (const auto& item : s.items("env")) l.env.push_back(parse_key_value(item, s.what("env")));
  }
}

// torchrun's flags about plugins and GPU visibility: what they mean here, or why not.
void read_torchrun_extras(const Reader& r, const EnvLookup& env, launcher::LaunchOptions& l) {
  const Settings& s = r.s;
  if (s.has("timeline")) {
    // Workers may run elsewhere in the tree (a --chdir in their own code): an absolute path.
    l.timeline = std::filesystem::absolute(s.text("timeline")).lexically_normal().string();
  }
  if (s.has("event_log_handler"))
    l.event_log = parse_event_log_handler(s.text("event_log_handler"), s.what("event_log_handler"));
  if (s.has("logs_specs") && s.text("logs_specs") != "default") {
    DDP_THROW(InvalidArgument, s.what("logs_specs"), ": '", s.text("logs_specs"),
              "' names a Python plugin (torchrun.logs_specs entry point), which ddp-launch does not load; "
              "only 'default' exists here (--log-dir, --redirects, --tee)");
  }
  for (const char* k : {"duplicate_stdout_filters", "duplicate_stderr_filters"}) {
    if (s.has(k) && !s.text(k).empty()) {
      DDP_THROW(InvalidArgument, s.what(k), ": '", s.text(k),
                "': copying matching lines into one file is not implemented in ddp-launch; "
                "give --log-dir and grep the per-rank files");
    }
  }
  l.virtual_local_rank = r.flag("virtual_local_rank");
  if (l.virtual_local_rank) {
    auto visible = env("CUDA_VISIBLE_DEVICES");
    if (visible && !visible->empty()) {
      const auto n = static_cast<int>(std::count(visible->begin(), visible->end(), ',')) + 1;
      if (n < l.nproc_per_node) {
        DDP_THROW(InvalidArgument, s.what("virtual_local_rank"), ": ", l.nproc_per_node,
                  " workers but CUDA_VISIBLE_DEVICES='", *visible, "' lists ", n,
                  " device(s): each worker needs its own");
      }
    }
  }
}

}  // namespace

launcher::AgentOptions resolve_options(const SettingLayer& merged, std::vector<std::string> command,
                                       const EnvLookup& env, std::vector<std::string>* warnings_out) {
  std::vector<std::string> ignored;
  std::vector<std::string>& warnings = warnings_out != nullptr ? *warnings_out : ignored;
  Settings s(merged);
  const Reader r{s};
  AgentOptions o;
  auto& l = o.launch;
  read_layout(r, env, o);
  read_supervision(r, env, l);
  read_torchrun_extras(r, env, l);
  if (command.empty() && s.has("command")) command = s.items("command");
  if (command.empty()) {
    DDP_THROW(InvalidArgument,
              "no PROGRAM given: ddp-launch [options] [--] PROGRAM [ARGS...] (or \"command\" in a config)");
  }
  wrap_python(s, env, l, command);
  l.command = std::move(command);
  l.no_python = true;  // the command is final: the interpreter was prepended above where needed

  drop_standalone_conflicts(s, l, warnings);
  infer_from_scheduler(s, env, o, warnings);
  check_combinations(s, o);
  resolve_run_id(env, l);
  // One node with a rendezvous backend but no port of its own (torchrun's recipe for several
  // jobs on a host: --rdzv-backend c10d --rdzv-endpoint localhost:0): a free MASTER_PORT, as
  // torchrun's agent picks one, so two such jobs never share 29500.
  const bool one_node = l.standalone || l.nnodes_max == 1;
  l.pick_master_port = one_node && !s.has("master_port") && (l.standalone || s.has("rdzv_backend"));
  return o;
}

}  // namespace ddp::cli
