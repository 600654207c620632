#pragma once
// Everything a launch is made of, after flags, DDP_LAUNCH_* variables and the JSON config have
// been merged by cli/. Names follow torchrun's flags. Plain data: no I/O here.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/timeouts.h"

namespace ddp::launcher {

enum class CpuBind { kNone, kCores, kNuma, kAuto };

// How the nodes meet (--rdzv-backend; cli/ parses the text once, "c10d" is kTcp, "etcd-v2" and
// "etcd-v3" are kEtcd).
enum class RdzvBackend { kStatic, kTcp, kFile, kMulticast, kEtcd };
const char* to_string(RdzvBackend backend);  // "static", "tcp", "file", "multicast", "etcd"

// torchrun's default TCP rendezvous port (--rdzv-endpoint HOST without a port).
inline constexpr uint16_t kDefaultTcpRdzvPort = 29400;
// etcd's client port (an etcd member given as HOST without a port).
inline constexpr uint16_t kDefaultEtcdPort = 2379;

// --rdzv-backend etcd: the members (--rdzv-endpoint) and how to reach them (--rdzv-conf, with
// torchrun's key names). User and password come from DDP_ETCD_USER / DDP_ETCD_PASSWORD only.
struct EtcdRendezvousOptions {
  std::vector<std::string> endpoints;  // "host:port" or "http(s)://host:port", one per member
  std::string protocol = "http";       // for endpoints without a scheme
  std::string cacert;                  // PEM files for https
  std::string cert;
  std::string key;
  std::string prefix = "/ddp/";  // etcd_prefix: every key of the job is prefix + "<run_id>/..."
};

// torchrun's --redirects/--tee value: 0 none, 1 stdout, 2 stderr, 3 both; per local rank.
struct StreamSelection {
  int all = 0;                  // for ranks not in per_rank
  std::map<int, int> per_rank;  // local rank -> 0..3
  int for_rank(int local_rank) const {
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? all : it->second;
  }
};

// torchrun's --event-log-handler: where the launcher's JSON event lines go (launcher/event_log.h).
struct EventLogTarget {
  enum class Kind { kNull, kConsole, kFile };
  Kind kind = Kind::kNull;  // torchrun's default handler, "null": events go nowhere
  std::string path;         // kFile
};

struct LaunchOptions {
  // What to run.
  std::vector<std::string> command;  // program and its arguments
  bool no_python = true;             // programs run as given (torchrun's --no-python)
  std::string program;               // what messages call the job: the user's PROGRAM (a script,
                                     // not its interpreter); empty: command[0]

  // Layout.
  int nproc_per_node = 1;  // resolved from N|auto|gpu|cpu by cli/
  int nnodes_min = 1;      // --nnodes N or MIN:MAX
  int nnodes_max = 1;
  int node_rank = -1;       // -1: assigned by the rendezvous
  std::string master_addr;  // empty: this host for single node
  int master_port = 29500;
  bool pick_master_port = false;  // MASTER_PORT: a free port on this host (standalone always)
  RdzvBackend rdzv_backend = RdzvBackend::kStatic;
  std::string rdzv_endpoint;   // host:port (tcp), directory (file), group:port (multicast), members (etcd)
  EtcdRendezvousOptions etcd;  // rdzv_backend kEtcd: rdzv_endpoint and --rdzv-conf, parsed
  std::string rdzv_id = "none";
  Millis rdzv_timeout = kDefaultRendezvousTimeout;  // join_timeout (torchrun's timeout too)
  // Rounds and heartbeats (--rdzv-conf, torchrun's names; see common/timeouts.h).
  Millis last_call_timeout = kDefaultLastCallTimeout;
  Millis close_timeout = kDefaultCloseTimeout;
  Millis keep_alive_interval = kDefaultKeepAliveInterval;
  int keep_alive_max_attempt = kDefaultKeepAliveMaxAttempt;
  Millis read_timeout = kDefaultRendezvousReadTimeout;
  bool standalone = false;

  // Supervision.
  int max_restarts = 0;
  Millis monitor_interval = kDefaultMonitorInterval;
  Millis shutdown_timeout = kDefaultShutdownGrace;
  std::vector<int> signals_to_handle;  // signal numbers; empty: INT TERM HUP QUIT USR1 USR2

  // Logs.
  std::string log_dir;                              // empty: no log files
  StreamSelection redirects;                        // to files only
  StreamSelection tee;                              // to files and the console
  std::optional<std::set<int>> local_ranks_filter;  // console shows only these ranks
  // torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (${role_name} ${rank} ${local_rank}); empty:
  // "[<role><local rank>]:" as torchrun.
  std::string log_line_prefix_template;
  std::string log_run_dir;   // the directory under log_dir; empty: run_id
  EventLogTarget event_log;  // --event-log-handler
  std::string timeline;      // --timeline: DDP_TIMELINE for the workers, merged here at exit

  // Worker environment.
  std::string role = "default";
  CpuBind cpu_bind = CpuBind::kAuto;  // --cpu-bind (launcher/cpu_bind.h)
  bool numa_memory = false;           // --numa-binding node: memory preferred on the rank's node
  // torchrun's --virtual-local-rank: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES one GPU per worker.
  bool virtual_local_rank = false;
  std::vector<std::pair<std::string, std::string>> env;  // --env KEY=VALUE, in order
  std::string run_id;  // resolved: rdzv_id, the scheduler's job id, or a fresh id

  bool dry_run = false;

  bool elastic() const { return nnodes_min < nnodes_max; }
  // A launcher silent this long is lost.
  Millis heartbeat_bound() const { return keep_alive_interval * keep_alive_max_attempt; }
  const std::string& program_name() const { return program.empty() ? command.front() : program; }
};

}  // namespace ddp::launcher
