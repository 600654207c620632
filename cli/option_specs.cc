#include "cli/option_specs.h"

#include <algorithm>
#include <cctype>

#include "common/settings.h"

namespace ddp::cli {
namespace {

constexpr std::string_view kLayout = "Layout";
constexpr std::string_view kRdzv = "Rendezvous";
constexpr std::string_view kSupervision = "Supervision";
constexpr std::string_view kLogs = "Logs";
constexpr std::string_view kWorkers = "Worker environment";
constexpr std::string_view kProgram = "Program";

// Nodes, ranks and addresses.
std::vector<OptionSpec> layout_options() {
  using K = ValueKind;
  return {
      {"nproc_per_node", K::kIntOrString, kLayout,
       "Workers on this node: N, auto (one per visible GPU, else one per usable CPU, as torchrun), "
       "gpu (one per GPU), cpu (one per usable CPU)",
       "1", "", true, true},
      {"nnodes", K::kIntOrString, kLayout,
       "Number of nodes: N, or MIN:MAX (elastic, rdzv_backend tcp, file or etcd: rounds of MIN to MAX "
       "nodes; nodes may join and leave)",
       "1", "", true, true},
      {"node_rank", K::kInt, kLayout,
       "This node's rank (static rendezvous); unset: from SLURM_NODEID / OMPI_COMM_WORLD_RANK, or "
       "assigned by the tcp/file/etcd rendezvous",
       "", "", true, true},
      {"master_addr", K::kString, kLayout,
       "Address of node 0 (MASTER_ADDR for the workers); static multi-node needs it", "127.0.0.1", "", true,
       true},
      {"master_port", K::kInt, kLayout,
       "MASTER_PORT for the workers (left free for them, e.g. PyTorch rank 0 binds it); the static "
       "rendezvous store listens on master_port+1",
       "29500", "", true, true},
      {"standalone", K::kBool, kLayout,
       "Single node, nothing else needed: a private store on 127.0.0.1 and a free MASTER_PORT "
       "(--rdzv-backend, --rdzv-endpoint and --node-rank are ignored, with a warning)",
       "", "", true, true},
  };
}

// The rendezvous.
std::vector<OptionSpec> rdzv_options() {
  using K = ValueKind;
  return {
      {"rdzv_backend", K::kString, kRdzv,
       "static | tcp (alias c10d) | file | multicast | etcd (aliases etcd-v2, etcd-v3: we speak etcd's "
       "v3 API; torchrun's etcd backends speak v2, off by default since etcd 3.4 and gone in 3.6). "
       "etcd: no node is special, any node's loss is survived",
       "static", "", true, true},
      {"rdzv_endpoint", K::kString, kRdzv,
       "tcp: HOST[:PORT] of the store (default port 29400), hosted by the launcher on that host "
       "or the first to bind it; static: overrides MASTER_ADDR:MASTER_PORT+1; file: a shared "
       "directory; multicast: GROUP:PORT (239.x.y.z:PORT or [ff15::...]:PORT) where the launchers "
       "find each other; etcd: the members, HOST[:PORT],... (default port 2379)",
       "", "", true, true},
      {"rdzv_id", K::kString, kRdzv,
       "Job id shared by every node (e.g. $SLURM_JOB_ID): names the rendezvous and, without "
       "DDP_JOB_TOKEN, seeds the job token",
       "none", "", true, true},
      {"rdzv_conf", K::kString, kRdzv,
       "KEY=VALUE,... (torchrun's keys, seconds): join_timeout (or timeout, default 900), "
       "last_call_timeout (30), close_timeout (30), read_timeout (60), keep_alive_interval (1), "
       "keep_alive_max_attempt (5), is_host=true|false, store_type=tcp; multicast: ttl=N (1), "
       "interface=NAME|IPV4; etcd: protocol=http|https, cacert=, cert=, key= (PEM files), "
       "etcd_prefix (/ddp; torchrun's is /torchelastic/p2p); user and password from DDP_ETCD_USER "
       "and DDP_ETCD_PASSWORD",
       "", "", true, true},
      {"local_addr", K::kString, kRdzv,
       "The address other nodes reach this node at; unset: the source address of the route to the "
       "store, else the first non-loopback interface address",
       "", "", true, true},
  };
}

// Restarts, heartbeats and shutdown.
std::vector<OptionSpec> supervision_options() {
  using K = ValueKind;
  return {
      {"max_restarts", K::kInt, kSupervision,
       "Restart every node's workers up to this many times after a failure", "0", "", true, true},
      {"monitor_interval", K::kSeconds, kSupervision, "Seconds between checks of other nodes' state", "0.1",
       "", true, true},
      {"shutdown_timeout", K::kSeconds, kSupervision,
       "Seconds between SIGTERM and SIGKILL when stopping workers", "30", "", true, true},
      {"signals_to_handle", K::kString, kSupervision,
       "Signals forwarded to the workers, e.g. SIGINT,SIGTERM or INT,TERM",
       "SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2", "", true, true},
  };
}

// Logs.
std::vector<OptionSpec> log_options() {
  using K = ValueKind;
  return {
      {"log_dir", K::kString, kLogs,
       "Write <log-dir>/<run-id>/attempt_<n>/<rank>/{stdout,stderr}.log (run id 'none': none_<random>, "
       "per node); another job's files are never opened",
       "", "", true, true},
      {"redirects", K::kIntOrString, kLogs,
       "Streams to send only to the log files: 0 none, 1 stdout, 2 stderr, 3 both; or per local "
       "rank: 0:3,1:1",
       "0", "-r", true, true},
      {"tee", K::kIntOrString, kLogs,
       "Streams to copy to the log files and the console (same syntax as --redirects)", "0", "-t", true,
       true},
      {"local_ranks_filter", K::kString, kLogs, "Console shows only these local ranks, e.g. 0 or 0,2", "", "",
       true, true},
      {"event_log_handler", K::kString, kLogs,
       "Where the launcher's events go, one JSON object a line (docs/launcher.md): null (nowhere), "
       "console (stderr), file:PATH or a PATH with a '/'",
       "null", "", true, true},
      {"timeline", K::kString, kLogs,
       "Each rank writes a Chrome trace of its DDP steps (DDP_TIMELINE=FILE: libddp's engine), merged "
       "into FILE at exit (this node's ranks; open it in Perfetto, or scripts/timeline_png.py)",
       "", "", true, true},
      {"logs_specs", K::kString, kLogs,
       "torchrun's LogsSpecs plugin name: only 'default' (--log-dir, --redirects, --tee as here); "
       "ddp-launch loads no Python entry points",
       "", "", true, true},
      {"duplicate_stdout_filters", K::kString, kLogs,
       "torchrun's copy of matching stdout lines into one file: only empty is accepted (not "
       "implemented: grep the --log-dir files)",
       "", "", true, true},
      {"duplicate_stderr_filters", K::kString, kLogs, "As --duplicate-stdout-filters, for stderr", "", "",
       true, true},
  };
}

// The workers' environment.
std::vector<OptionSpec> worker_options() {
  using K = ValueKind;
  return {
      {"numa_binding", K::kString, kWorkers,
       "torchrun's --numa-binding: node or socket = --cpu-bind numa with memory preferred on the "
       "rank's NUMA node; exclusive or core-complex = --cpu-bind cores",
       "", "", true, true},
      {"virtual_local_rank", K::kBool, kWorkers,
       "LOCAL_RANK=0 for every worker, and CUDA_VISIBLE_DEVICES its own GPU only (entry <local "
       "rank> of the launcher's CUDA_VISIBLE_DEVICES, else the index), as torchrun",
       "", "", true, true},
      {"role", K::kString, kWorkers, "ROLE_NAME of the workers", "default", "", true, true},
      {"cpu_bind", K::kString, kWorkers,
       "auto | none | cores | numa: split this node's cores among the local ranks; auto = cores for 2 or "
       "more ranks with a CPU each, else none (torchrun binds nothing: none)",
       "auto", "", true, true},
      {"env", K::kKeyValues, kWorkers,
       "KEY=VALUE added to every worker's environment (repeatable; JSON: an object)", "", "", true, true},
  };
}

// The program and the config.
std::vector<OptionSpec> program_options() {
  using K = ValueKind;
  return {
      {"no_python", K::kBool, kProgram, "Run PROGRAM as given even when it ends in .py", "", "", true, true},
      {"run_path", K::kBool, kProgram,
       "Run PROGRAM with the Python interpreter whatever its name ends in (torchrun's --run-path)", "", "",
       true, true},
      {"start_method", K::kString, kProgram,
       "Accepted for torchrun command lines and ignored: spawn | fork | forkserver mean nothing "
       "here (every worker is a fork/exec of PROGRAM)",
       "spawn", "", true, true},
      {"module", K::kBool, kProgram,
       "Run PROGRAM as a Python module: python3 -u -m PROGRAM ($PYTHON_EXEC when set)", "", "-m", true, true},
      {"dry_run", K::kBool, kProgram,
       "Print, per rank, the command and environment it would start, then exit", "", "", true, true},
      {"command", K::kStringList, kProgram,
       "The program and its arguments (config only; the command line's PROGRAM wins)", "", "", true, false},
      {"config", K::kString, kProgram, "JSON job config (see configs/ and its schema)", "", "", false, true},
  };
}

std::vector<OptionSpec> build() {
  std::vector<OptionSpec> all;
  for (const auto& part : {layout_options(), rdzv_options(), supervision_options(), log_options(),
                           worker_options(), program_options()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = build();
  return specs;
}

const OptionSpec* find_option(std::string_view name) {
  const auto& specs = option_specs();
  auto it = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

std::string flag_name(std::string_view name) {
  std::string out = "--";
  for (char c : name) out += c == '_' ? '-' : c;
  return out;
}

std::string env_name(std::string_view name) {
  std::string out(settings::family_prefix(settings::kLaunchOption));
  for (char c : name) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view kind_text(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInt: return "an integer";
    case ValueKind::kSeconds: return "a number (seconds)";
    case ValueKind::kString: return "a string";
    case ValueKind::kIntOrString: return "an integer or a string";
    case ValueKind::kBool: return "true or false";
    case ValueKind::kKeyValues: return "an object of strings";
    case ValueKind::kStringList: return "an array of strings";
  }
  return "?";
}

}  // namespace ddp::cli
