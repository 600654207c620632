#pragma once
// Parsers for the text forms of ddp-launch's settings (torchrun's syntax where it has one).
// Each takes `what` — the setting and its source, e.g. "nproc_per_node (from --nproc-per-node)" —
// and throws InvalidArgument naming it and the bad text.
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/timeouts.h"
#include "launcher/launch_options.h"

namespace ddp::cli {

// Reads an environment variable; tests pass a map instead of the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

int parse_int(const std::string& text, const std::string& what);
Millis parse_seconds(const std::string& text, const std::string& what);  // "0.5" -> 500 ms
bool parse_bool(const std::string& text, const std::string& what);       // 1/0 true/false yes/no on/off

// N | auto (GPUs, else CPUs) | gpu | cpu, counted as cli/device_count.h says.
int parse_nproc(const std::string& text, const std::string& what, const EnvLookup& env);
// N | MIN:MAX -> {min, max}.
std::pair<int, int> parse_nnodes(const std::string& text, const std::string& what);
// torchrun's --redirects/--tee: "3", or "0:3,1:1".
launcher::StreamSelection parse_streams(const std::string& text, const std::string& what);
// "SIGINT,TERM,15" -> signal numbers.
std::vector<int> parse_signals(const std::string& text, const std::string& what);
// "0,2" -> {0, 2}.
std::set<int> parse_rank_list(const std::string& text, const std::string& what);
// torchrun's --event-log-handler: null (or torchrun's dynamic_rendezvous, also a null handler),
// console (stderr), file:PATH, or a PATH containing '/'. Anything else is an InvalidArgument.
launcher::EventLogTarget parse_event_log_handler(const std::string& text, const std::string& what);
launcher::CpuBind parse_cpu_bind(const std::string& text, const std::string& what);

// torchrun's --rdzv-conf keys, with torchrun's units (seconds, except counts). Each is unset when
// not given; resolve.cc applies them to LaunchOptions / AgentOptions.
struct RdzvConf {
  std::optional<Millis> timeout;              // timeout= / join_timeout=: the rendezvous (> 0)
  std::optional<Millis> last_call_timeout;    // a round open for more nodes (>= 0)
  std::optional<Millis> close_timeout;        // the store host waits for leavers (>= 0)
  std::optional<Millis> read_timeout;         // the launcher's store requests (> 0)
  std::optional<Millis> keep_alive_interval;  // between heartbeats (> 0)
  std::optional<int> keep_alive_max_attempt;  // heartbeats missed = lost (1..1000)
  std::optional<bool> is_host;                // is_host=
  std::optional<int> ttl;                     // ttl= (multicast: IPv4 TTL / IPv6 hop limit, 1..255)
  std::optional<std::string> interface;       // interface= (multicast: interface name or IPv4 address)
  // etcd (torchrun's etcd backends' names; the etcd-v2 backend's ca_cert, ssl_cert and
  // ssl_cert_key are accepted for cacert, cert and key):
  std::optional<std::string> protocol;     // protocol=http|https
  std::optional<std::string> cacert;       // cacert=FILE (PEM, must exist)
  std::optional<std::string> cert;         // cert=FILE
  std::optional<std::string> key;          // key=FILE
  std::optional<std::string> etcd_prefix;  // etcd_prefix=/path (normalized to end with '/')
  // Whether any etcd key was given (they apply to rdzv_backend etcd only).
  bool has_etcd_keys() const { return protocol || cacert || cert || key || etcd_prefix; }
};
// torchrun's --rdzv-conf "k1=v1,k2=v2". An unknown key (with a "did you mean"), a key given
// twice, a value out of range or not a number, a TLS file that does not exist, and store_type
// other than tcp are errors naming the key. use_agent_store is accepted and ignored (the workers
// always get DDP_STORE).
RdzvConf parse_rdzv_conf(const std::string& text, const std::string& what);

// --rdzv-backend etcd's --rdzv-endpoint: "host1:2379,host2,https://host3:2379" -> one entry per
// member ("host:port", the port kDefaultEtcdPort when not given; URLs kept). Empty entries, bad
// ports and schemes other than http(s) are errors naming the entry.
std::vector<std::string> parse_etcd_endpoints(const std::string& text, const std::string& what);

// Slurm host lists: "node[01-03],gpu7" -> node01 node02 node03 gpu7; several bracket groups in a
// name expand left to right, as Slurm does ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). A list that expands to
// more than kMaxHosts names is an InvalidArgument (it comes from the environment: a short
// variable must not make the launcher build millions of strings).
inline constexpr size_t kMaxHosts = 1 << 16;
inline constexpr size_t kMaxHostGroups = 16;  // bracket groups per name: rack[1-2]-n[01-04] has 2
std::vector<std::string> expand_hostlist(const std::string& text);

// A run id (--rdzv-id) names directories (<log_dir>/<id>, the file store's <dir>/<id>.store) and
// store keys: letters, digits and . _ - : @ + only, not starting with '.', at most
// kMaxRunIdLength characters — so no id can climb out of a directory ("../../x").
inline constexpr size_t kMaxRunIdLength = 128;
std::string parse_run_id(const std::string& text, const std::string& what);

// "KEY=VALUE" -> {KEY, VALUE}; the key must be a valid variable name.
std::pair<std::string, std::string> parse_key_value(const std::string& text, const std::string& what);

}  // namespace ddp::cli
