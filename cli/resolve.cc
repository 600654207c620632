#include "cli/resolve.h"

#include <algorithm>

#include "cli/config_file.h"
#include "cli/option_specs.h"
#include "cli/suggest.h"
#include "common/error.h"
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

std::string normalize_backend(const Settings& s) {
  if (!s.has("rdzv_backend")) return "static";
  std::string b = s.text("rdzv_backend");
  std::transform(b.begin(), b.end(), b.begin(), [](unsigned char c) { return std::tolower(c); });
  if (b == "c10d") return "tcp";
  if (b == "static" || b == "tcp" || b == "file" || b == "multicast") return b;
  DDP_THROW(InvalidArgument, s.what("rdzv_backend"), ": unknown rendezvous backend '", b,
            "' (static, tcp, c10d, file, multicast)", did_you_mean(b, {"static", "tcp", "c10d", "file", "multicast"}));
}

// Slurm (srun, one task per node) and Open MPI (mpirun, one process per node) fill in the node
// rank, node count and master address the user did not give.
void infer_from_scheduler(const Settings& s, const EnvLookup& env, AgentOptions& o) {
  auto get = [&](std::initializer_list<const char*> names) -> std::optional<std::string> {
    for (const char* n : names) {
      if (auto v = env(n); v && !v->empty()) return v;
    }
    return std::nullopt;
  };
  auto& l = o.launch;
  if (l.standalone) return;
  auto slurm_nodes = get({"SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  auto slurm_tasks = get({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  auto slurm_node = get({"SLURM_NODEID"});
  bool slurm = slurm_nodes && slurm_node && (!slurm_tasks || *slurm_tasks == *slurm_nodes);
  auto ompi_size = get({"OMPI_COMM_WORLD_SIZE"});
  auto ompi_rank = get({"OMPI_COMM_WORLD_RANK"});
  auto ompi_local = get({"OMPI_COMM_WORLD_LOCAL_SIZE"});
  bool ompi = !slurm && ompi_size && ompi_rank && (!ompi_local || *ompi_local == "1");
  if (!slurm && !ompi) return;
  const std::string src = slurm ? "Slurm (SLURM_NNODES/SLURM_NODEID)" : "Open MPI (OMPI_COMM_WORLD_SIZE/RANK)";
  if (!s.has("nnodes")) {
    int n = parse_int(slurm ? *slurm_nodes : *ompi_size, src);
    l.nnodes_min = l.nnodes_max = n;
  }
  if (l.nnodes_max <= 1) return;
  if (!s.has("node_rank") && l.rdzv_backend == "static") {
    l.node_rank = parse_int(slurm ? *slurm_node : *ompi_rank, src);
  }
  if (!s.has("master_addr") && slurm) {
    if (auto list = get({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
      auto hosts = expand_hostlist(*list);
      if (!hosts.empty()) l.master_addr = hosts.front();
    }
  }
}

void check_combinations(const Settings& s, const AgentOptions& o) {
  const auto& l = o.launch;
  if (l.nnodes_min != l.nnodes_max) {
    DDP_THROW(InvalidArgument, s.what("nnodes"), ": elastic node counts (MIN < MAX) are not supported yet; give a fixed count");
  }
  if (l.standalone) {
    if (l.nnodes_max > 1) {
      DDP_THROW(InvalidArgument, "standalone (from ", s.what("standalone"), ") runs one node, but ",
                s.show("nnodes", std::to_string(l.nnodes_max)));
    }
    for (const char* k : {"rdzv_endpoint", "rdzv_backend", "node_rank"}) {
      if (s.has(k)) DDP_THROW(InvalidArgument, "standalone (from ", s.what("standalone"), ") picks its own rendezvous: drop ", k, " (from ", s.what(k), ")");
    }
  }
  if (l.node_rank >= 0 && l.node_rank >= l.nnodes_max) {
    DDP_THROW(InvalidArgument, s.show("node_rank", std::to_string(l.node_rank)), " must be below ",
              s.show("nnodes", std::to_string(l.nnodes_max)));
  }
  if (l.rdzv_backend == "file" && l.rdzv_endpoint.empty()) {
    DDP_THROW(InvalidArgument, "rdzv_backend file (from ", s.what("rdzv_backend"), ") needs rdzv_endpoint: a directory every node shares");
  }
  if (l.rdzv_backend == "tcp" && l.rdzv_endpoint.empty()) {
    DDP_THROW(InvalidArgument, "rdzv_backend tcp (from ", s.what("rdzv_backend"), ") needs rdzv_endpoint: HOST[:PORT] of the store");
  }
  if (l.rdzv_backend == "multicast") {
    const std::string why = "rdzv_backend multicast (from " + s.what("rdzv_backend") +
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
    DDP_THROW(InvalidArgument, s.what("rdzv_conf"), ": ttl= and interface= apply to rdzv_backend multicast only");
  }
  if (l.rdzv_backend == "static" && l.nnodes_max > 1) {
    if (l.node_rank < 0) {
      DDP_THROW(InvalidArgument, "a static rendezvous over ", l.nnodes_max, " nodes needs node_rank (--node-rank) on every node, or rdzv_backend tcp/file to assign ranks");
    }
    if (!s.has("master_addr") && l.rdzv_endpoint.empty() && l.master_addr == "127.0.0.1") {
      DDP_THROW(InvalidArgument, "a static rendezvous over ", l.nnodes_max, " nodes needs master_addr (--master-addr): node 0's address (under srun Slurm's node list gives it; Open MPI exports none)");
    }
  }
  if (s.has("module") && s.has("no_python") && s.text("module") == "true" && s.text("no_python") == "true") {
    DDP_THROW(InvalidArgument, "module (from ", s.what("module"), ") and no_python (from ", s.what("no_python"), ") exclude each other");
  }
  if (l.master_port < 0 || l.master_port > 65534) {
    DDP_THROW(InvalidArgument, s.what("master_port"), ": ", l.master_port, " is not a port in 0..65534");
  }
  if (l.max_restarts < 0) DDP_THROW(InvalidArgument, s.what("max_restarts"), ": must be >= 0");
  if (l.monitor_interval.count() <= 0) DDP_THROW(InvalidArgument, s.what("monitor_interval"), ": must be > 0");
  if (l.rdzv_timeout.count() <= 0) DDP_THROW(InvalidArgument, s.what("rdzv_conf"), ": timeout must be > 0");
}

// PROGRAM.py runs with python3 (like torchrun) unless --no-python; --module runs python3 -m.
void wrap_python(const Settings& s, std::vector<std::string>& command) {
  bool module = s.has("module") && parse_bool(s.text("module"), s.what("module"));
  bool no_python = s.has("no_python") && parse_bool(s.text("no_python"), s.what("no_python"));
  if (module) {
    command.insert(command.begin(), {"python3", "-u", "-m"});
  } else if (!no_python && command.front().size() > 3 && command.front().ends_with(".py")) {
    command.insert(command.begin(), {"python3", "-u"});
  }
}

}  // namespace

SettingLayer env_layer(const EnvLookup& env, const std::vector<std::string>& env_names) {
  SettingLayer layer;
  std::vector<std::string> known;
  for (const auto& spec : option_specs()) {
    if (spec.in_cli) known.push_back(env_name(spec.name));
  }
  for (const auto& name : env_names) {
    if (name.starts_with("DDP_LAUNCH_") && std::find(known.begin(), known.end(), name) == known.end()) {
      DDP_THROW(InvalidArgument, "unknown environment variable ", name, did_you_mean(name, known));
    }
  }
  for (const auto& spec : option_specs()) {
    if (!spec.in_cli) continue;
    std::string var = env_name(spec.name);
    auto v = env(var);
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
  if (auto it = flags.find("config"); it != flags.end()) path = &it->second;
  else if (auto e = env.find("config"); e != env.end()) path = &e->second;
  if (path != nullptr) config = load_config_file(path->items.at(0));
  return merge_layers({config, env, flags});
}

launcher::AgentOptions resolve_options(const SettingLayer& merged, std::vector<std::string> command,
                                       const EnvLookup& env) {
  Settings s(merged);
  AgentOptions o;
  auto& l = o.launch;
  auto str = [&](const char* name, std::string& out) {
    if (s.has(name)) out = s.text(name);
  };
  auto integer = [&](const char* name, int& out) {
    if (s.has(name)) out = parse_int(s.text(name), s.what(name));
  };
  auto flag = [&](const char* name) { return s.has(name) && parse_bool(s.text(name), s.what(name)); };

  l.standalone = flag("standalone");
  l.dry_run = flag("dry_run");
  if (s.has("nproc_per_node")) l.nproc_per_node = parse_nproc(s.text("nproc_per_node"), s.what("nproc_per_node"), env);
  if (s.has("nnodes")) std::tie(l.nnodes_min, l.nnodes_max) = parse_nnodes(s.text("nnodes"), s.what("nnodes"));
  integer("node_rank", l.node_rank);
  if (s.has("node_rank") && l.node_rank < 0) DDP_THROW(InvalidArgument, s.what("node_rank"), ": must be >= 0");
  l.master_addr = "127.0.0.1";
  str("master_addr", l.master_addr);
  integer("master_port", l.master_port);
  l.rdzv_backend = normalize_backend(s);
  str("rdzv_endpoint", l.rdzv_endpoint);
  if (s.has("rdzv_id")) l.rdzv_id = parse_run_id(s.text("rdzv_id"), s.what("rdzv_id"));
  if (s.has("rdzv_conf")) {
    RdzvConf conf = parse_rdzv_conf(s.text("rdzv_conf"), s.what("rdzv_conf"));
    if (conf.timeout) l.rdzv_timeout = *conf.timeout;
    o.rdzv_is_host = conf.is_host;
    if (conf.ttl) o.multicast_ttl = *conf.ttl;
    if (conf.interface) o.multicast_interface = *conf.interface;
  }
  str("local_addr", o.local_addr);
  integer("max_restarts", l.max_restarts);
  if (s.has("monitor_interval")) l.monitor_interval = parse_seconds(s.text("monitor_interval"), s.what("monitor_interval"));
  if (s.has("shutdown_timeout")) l.shutdown_timeout = parse_seconds(s.text("shutdown_timeout"), s.what("shutdown_timeout"));
  if (s.has("signals_to_handle")) l.signals_to_handle = parse_signals(s.text("signals_to_handle"), s.what("signals_to_handle"));
  str("log_dir", l.log_dir);
  if (s.has("redirects")) l.redirects = parse_streams(s.text("redirects"), s.what("redirects"));
  if (s.has("tee")) l.tee = parse_streams(s.text("tee"), s.what("tee"));
  if (s.has("local_ranks_filter")) l.local_ranks_filter = parse_rank_list(s.text("local_ranks_filter"), s.what("local_ranks_filter"));
  str("role", l.role);
  if (s.has("cpu_bind")) l.cpu_bind = parse_cpu_bind(s.text("cpu_bind"), s.what("cpu_bind"));
  if (s.has("env")) {
    for (const auto& item : s.items("env")) l.env.push_back(parse_key_value(item, s.what("env")));
  }
  if (command.empty() && s.has("command")) command = s.items("command");
  if (command.empty()) {
    DDP_THROW(InvalidArgument, "no PROGRAM given: ddp-launch [options] [--] PROGRAM [ARGS...] (or \"command\" in a config)");
  }
  wrap_python(s, command);
  l.command = std::move(command);
  l.no_python = true;  // the command is final: python3 was prepended above where needed

  infer_from_scheduler(s, env, o);
  check_combinations(s, o);
  // Multi-node jobs share the rendezvous id as their run id; a lone node gets a fresh one so that
  // its log directory and store keys are its own.
  l.run_id = l.rdzv_id;
  if (l.rdzv_id == "none" && l.nnodes_max == 1) l.run_id = launcher::random_hex(8);
  return o;
}

}  // namespace ddp::cli
