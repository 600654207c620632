#include "cli/values.h"

#include <string.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "cli/device_count.h"
#include "cli/suggest.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/socket.h"
#include "common/text.h"

namespace ddp::cli {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(trim(s.substr(start, p == std::string::npos ? std::string::npos : p - start)));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// [A-Za-z_][A-Za-z0-9_]* (no std::regex: GCC 12 warns inside it under sanitizers).
bool is_variable_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

bool try_int(const std::string& text, int* out) {
  std::string t = trim(text);
  const char* end = t.data() + t.size();
  auto [p, ec] = std::from_chars(t.data(), end, *out);
  return !t.empty() && ec == std::errc() && p == end;
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) { return settings::lookup(name); };
}

int parse_int(const std::string& text, const std::string& what) {
  int v = 0;
  if (!try_int(text, &v)) DDP_THROW(InvalidArgument, what, ": '", text, "' is not an integer");
  return v;
}

Millis parse_seconds(const std::string& text, const std::string& what) {
  std::string t = trim(text);
  char* end = nullptr;
  double s = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(s) || s < 0 || s > 1e9) {
    DDP_THROW(InvalidArgument, what, ": '", text, "' is not a number of seconds >= 0");
  }
  return Millis(static_cast<int64_t>(std::llround(s * 1000)));
}

bool parse_bool(const std::string& text, const std::string& what) {
  if (auto b = settings::parse_bool(trim(text))) return *b;
  DDP_THROW(InvalidArgument, what, ": '", text, "' is not a boolean (1/0, true/false, yes/no, on/off)");
}

int parse_nproc(const std::string& text, const std::string& what, const EnvLookup& env) {
  std::string t = lower(trim(text));
  int n = 0;
  if (t == "auto") {  // torchrun: one per GPU, else one per CPU
    n = count_visible_gpus(env);
    return n > 0 ? n : count_cpus();
  }
  if (t == "gpu") {
    n = count_visible_gpus(env);
    if (n == 0)
      DDP_THROW(InvalidArgument, what,
                ": 'gpu' but no GPU is visible (CUDA_VISIBLE_DEVICES, NVML, /dev/nvidia*)");
    return n;
  }
  if (t == "cpu") return count_cpus();
  if (!try_int(t, &n) || n < 1) {
    DDP_THROW(InvalidArgument, what, ": '", text, "' is not a count >= 1, auto, gpu or cpu");
  }
  return n;
}

std::pair<int, int> parse_nnodes(const std::string& text, const std::string& what) {
  auto parts = split(text, ':');
  int lo = 0, hi = 0;
  bool ok = parts.size() == 1 ? try_int(parts[0], &lo) && (hi = lo, true)
                              : parts.size() == 2 && try_int(parts[0], &lo) && try_int(parts[1], &hi);
  if (!ok || lo < 1 || hi < lo) {
    DDP_THROW(InvalidArgument, what, ": '", text, "' is not N or MIN:MAX with 1 <= MIN <= MAX");
  }
  return {lo, hi};
}

launcher::StreamSelection parse_streams(const std::string& text, const std::string& what) {
  launcher::StreamSelection sel;
  auto bad = [&]() {
    DDP_THROW(InvalidArgument, what, ": '", text,
              "' is not 0..3 (0 none, 1 stdout, 2 stderr, 3 both) or LOCAL_RANK:0..3,...");
  };
  int v = 0;
  if (try_int(text, &v)) {
    if (v < 0 || v > 3) bad();
    sel.all = v;
    return sel;
  }
  for (const auto& item : split(text, ',')) {
    auto kv = split(item, ':');
    int rank = 0;
    if (kv.size() != 2 || !try_int(kv[0], &rank) || !try_int(kv[1], &v) || rank < 0 || v < 0 || v > 3) bad();
    sel.per_rank[rank] = v;
  }
  return sel;
}

std::vector<int> parse_signals(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::vector<std::string> names;
  for (int s = 1; s < NSIG; ++s) {
    if (const char* abbrev = sigabbrev_np(s)) names.push_back(std::string("SIG") + abbrev);
  }
  for (const auto& raw : split(text, ',')) {
    std::string item = raw;
    std::transform(item.begin(), item.end(), item.begin(), [](unsigned char c) { return std::toupper(c); });
    int sig = 0;
    if (!try_int(item, &sig)) {
      std::string name = item.starts_with("SIG") ? item : "SIG" + item;
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) {
        DDP_THROW(InvalidArgument, what, ": unknown signal '", raw, "'", did_you_mean(name, names));
      }
      for (int s = 1; s < NSIG; ++s) {
        const char* abbrev = sigabbrev_np(s);
        if (abbrev && name == std::string("SIG") + abbrev) sig = s;
      }
    }
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD) {
      DDP_THROW(InvalidArgument, what, ": signal '", raw,
                "' cannot be handled (KILL, STOP and CHLD never can)");
    }
    if (std::find(out.begin(), out.end(), sig) == out.end()) out.push_back(sig);
  }
  return out;
}

std::set<int> parse_rank_list(const std::string& text, const std::string& what) {
  std::set<int> out;
  for (const auto& item : split(text, ',')) {
    int r = 0;
    if (!try_int(item, &r) || r < 0)
      DDP_THROW(InvalidArgument, what, ": '", text, "' is not a list of local ranks like 0,2");
    out.insert(r);
  }
  return out;
}

launcher::EventLogTarget parse_event_log_handler(const std::string& text, const std::string& what) {
  using Kind = launcher::EventLogTarget::Kind;
  const std::string t = trim(text);
  if (t == "null" || t == "dynamic_rendezvous") return {};
  if (t == "console") return {Kind::kConsole, ""};
  if (t.starts_with("file:") && t.size() > 5) return {Kind::kFile, t.substr(5)};
  if (t.find('/') != std::string::npos && !t.starts_with("file:")) return {Kind::kFile, t};
  DDP_THROW(InvalidArgument, what, ": '", text,
            "' is not an event log handler here: null, console (stderr), file:PATH, or a path with a '/' "
            "(./events.jsonl); torchrun's other handlers are Python plugins, which ddp-launch does not load",
            did_you_mean(t, {"null", "console"}));
}

launcher::CpuBind parse_cpu_bind(const std::string& text, const std::string& what) {
  std::string t = lower(trim(text));
  if (t == "none") return launcher::CpuBind::kNone;
  if (t == "cores") return launcher::CpuBind::kCores;
  if (t == "numa") return launcher::CpuBind::kNuma;
  if (t == "auto") return launcher::CpuBind::kAuto;
  DDP_THROW(InvalidArgument, what, ": '", text, "' is not auto, none, cores or numa",
            did_you_mean(t, {"auto", "none", "cores", "numa"}));
}

namespace {

constexpr double kMaxConfSeconds = 1e6;  // about 11 days: longer is a typo, not a plan

// Seconds as torchrun reads them (decimals accepted), within [lo, kMaxConfSeconds].
Millis conf_seconds(const std::string& key, const std::string& value, const std::string& what, bool zero_ok) {
  const std::string name = what + " " + key;
  Millis ms = parse_seconds(value, name);
  if ((!zero_ok && ms.count() <= 0) || ms.count() > static_cast<int64_t>(kMaxConfSeconds * 1000)) {
    DDP_THROW(InvalidArgument, name, ": '", value, "' is not a number of seconds in ",
              zero_ok ? "[0, " : "(0, ", static_cast<int64_t>(kMaxConfSeconds), "]");
  }
  return ms;
}

int conf_int(const std::string& key, const std::string& value, const std::string& what, int lo, int hi) {
  const int v = parse_int(value, what + " " + key);
  if (v < lo || v > hi) DDP_THROW(InvalidArgument, what, " ", key, ": ", value, " is not in ", lo, "..", hi);
  return v;
}

// A TLS file named in --rdzv-conf: it must exist now (a typo found at start, not at the first
// request to etcd).
std::string conf_file(const std::string& key, const std::string& value, const std::string& what) {
  if (value.empty()) DDP_THROW(InvalidArgument, what, " ", key, ": needs a file (PEM)");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(value, ec))
    DDP_THROW(InvalidArgument, what, " ", key, ": '", value, "' is not a file");
  return std::filesystem::absolute(value, ec).string();  // the workers may run elsewhere
}

std::string conf_prefix(const std::string& value, const std::string& what) {
  if (value.size() < 2 || value.front() != '/' || value.find_first_of(" \t\n") != std::string::npos) {
    DDP_THROW(InvalidArgument, what, " etcd_prefix: '", value,
              "' is not a key prefix: it must start with '/' and name something (/ddp)");
  }
  return value.back() == '/' ? value : value + "/";
}

void apply_etcd_key(RdzvConf& conf, const std::string& key, const std::string& value,
                    const std::string& what) {
  if (key == "protocol") {
    const std::string p = lower(value);
    if (p != "http" && p != "https")
      DDP_THROW(InvalidArgument, what, " protocol: '", value, "' is not http or https");
    conf.protocol = p;
  } else if (key == "cacert" || key == "ca_cert") {
    conf.cacert = conf_file(key, value, what);
  } else if (key == "cert" || key == "ssl_cert") {
    conf.cert = conf_file(key, value, what);
  } else if (key == "key" || key == "ssl_cert_key") {
    conf.key = conf_file(key, value, what);
  } else if (key == "etcd_prefix") {
    conf.etcd_prefix = conf_prefix(value, what);
  }
}

void apply_conf_key(RdzvConf& conf, const std::string& key, const std::string& value,
                    const std::string& what) {
  if (key == "timeout" || key == "join_timeout") {
    conf.timeout = conf_seconds(key, value, what, false);
  } else if (key == "last_call_timeout") {
    conf.last_call_timeout = conf_seconds(key, value, what, true);
  } else if (key == "close_timeout") {
    conf.close_timeout = conf_seconds(key, value, what, true);
  } else if (key == "read_timeout") {
    conf.read_timeout = conf_seconds(key, value, what, false);
  } else if (key == "keep_alive_interval") {
    conf.keep_alive_interval = conf_seconds(key, value, what, false);
  } else if (key == "keep_alive_max_attempt") {
    conf.keep_alive_max_attempt = conf_int(key, value, what, 1, 1000);
  } else if (key == "is_host") {
    conf.is_host = parse_bool(value, what + " is_host");
  } else if (key == "store_type") {
    if (lower(value) != "tcp") {
      DDP_THROW(InvalidArgument, what, " store_type: '", value,
                "' is not supported: the launchers' store is a TCPStore (store_type=tcp); for a "
                "shared-directory store use --rdzv-backend file, for etcd --rdzv-backend etcd");
    }
  } else if (key == "ttl") {
    conf.ttl = conf_int(key, value, what, 1, 255);
  } else if (key == "interface") {
    if (value.empty())
      DDP_THROW(InvalidArgument, what, ": interface= needs a name (eth0) or an IPv4 address");
    conf.interface = value;
  } else {
    apply_etcd_key(conf, key, value, what);
  }  // use_agent_store: accepted, ignored
}

}  // namespace

RdzvConf parse_rdzv_conf(const std::string& text, const std::string& what) {
  static const std::vector<std::string> kKnown = {"timeout",
                                                  "join_timeout",
                                                  "last_call_timeout",
                                                  "close_timeout",
                                                  "read_timeout",
                                                  "keep_alive_interval",
                                                  "keep_alive_max_attempt",
                                                  "is_host",
                                                  "store_type",
                                                  "ttl",
                                                  "interface",
                                                  "use_agent_store",
                                                  "protocol",
                                                  "cacert",
                                                  "cert",
                                                  "key",
                                                  "etcd_prefix",
                                                  "ca_cert",
                                                  "ssl_cert",
                                                  "ssl_cert_key"};
  RdzvConf conf;
  if (trim(text).empty()) return conf;
  std::set<std::string> seen;
  for (const auto& item : split(text, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) DDP_THROW(InvalidArgument, what, ": '", item, "' is not KEY=VALUE");
    std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end())
      DDP_THROW(InvalidArgument, what, ": unknown key '", key, "'", did_you_mean(key, kKnown));
    // timeout and join_timeout are one setting (and so are the etcd backends' TLS spellings):
    // giving both is giving it twice.
    static const std::map<std::string, std::string> kSame = {
        {"join_timeout", "timeout"}, {"ca_cert", "cacert"}, {"ssl_cert", "cert"}, {"ssl_cert_key", "key"}};
    const auto same = kSame.find(key);
    const std::string canonical = same == kSame.end() ? key : same->second;
    if (!seen.insert(canonical).second) DDP_THROW(InvalidArgument, what, ": key '", key, "' given twice");
    apply_conf_key(conf, key, value, what);
  }
  return conf;
}

std::vector<std::string> parse_etcd_endpoints(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& raw : split(text, ',')) {
    const std::string item = trim(raw);
    std::string scheme, rest = item;
    if (const auto colon = item.find("://"); colon != std::string::npos) {
      scheme = lower(item.substr(0, colon));
      rest = item.substr(colon + 3);
      if (!rest.empty() && rest.back() == '/') rest.pop_back();
      if (scheme != "http" && scheme != "https")
        DDP_THROW(InvalidArgument, what, ": etcd member '", item, "': the scheme must be http or https");
    }
    if (rest.empty()) DDP_THROW(InvalidArgument, what, ": an empty etcd member in '", text, "'");
    net::Endpoint ep;
    try {
      ep = net::parse_endpoint(rest, launcher::kDefaultEtcdPort);
    } catch (const InvalidArgument& e) {
      DDP_THROW(InvalidArgument, what, ": etcd member '", item, "': ", e.message());
    }
    if (ep.port == 0) DDP_THROW(InvalidArgument, what, ": etcd member '", item, "': port 0");
    out.push_back(scheme.empty() ? ep.str() : scheme + "://" + ep.str());
  }
  if (out.empty()) DDP_THROW(InvalidArgument, what, ": no etcd member given");
  return out;
}

namespace {

// Expands the bracket groups of one host list item left to right, as Slurm does:
// rack[1-2]-n[01-02] -> rack1-n01 rack1-n02 rack2-n01 rack2-n02. A range that is not numeric
// stays as written.
void expand_item(const std::string& done, const std::string& rest, const std::string& text,
                 std::vector<std::string>& out) {
  const auto lb = rest.find('[');
  const auto rb = lb == std::string::npos ? std::string::npos : rest.find(']', lb);
  if (rb == std::string::npos) {
    if (out.size() >= kMaxHosts) {
      DDP_THROW(InvalidArgument, "Slurm host list '", text.substr(0, 64), text.size() > 64 ? "..." : "",
                "' names more than ", kMaxHosts, " hosts");
    }
    out.push_back(done + rest);
    return;
  }
  const std::string head = done + rest.substr(0, lb), tail = rest.substr(rb + 1);
  for (const auto& range : split(rest.substr(lb + 1, rb - lb - 1), ',')) {
    auto dash = range.find('-');
    std::string a = range.substr(0, dash), b = dash == std::string::npos ? a : range.substr(dash + 1);
    int lo = 0, hi = 0;
    if (!try_int(a, &lo) || !try_int(b, &hi) || hi < lo || hi - lo > 100000) {
      expand_item(head + range, tail, text, out);
      continue;
    }
    for (int i = lo; i <= hi; ++i) {
      std::string num = std::to_string(i);
      if (num.size() < a.size()) num.insert(0, a.size() - num.size(), '0');
      expand_item(head + num, tail, text, out);
    }
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& text) {
  std::vector<std::string> out;
  // Split on commas outside brackets.
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  items.push_back(cur);
  for (const auto& item : items) {
    if (std::count(item.begin(), item.end(), '[') > static_cast<std::ptrdiff_t>(kMaxHostGroups)) {
      DDP_THROW(InvalidArgument, "Slurm host list item '", item.substr(0, 64), item.size() > 64 ? "..." : "",
                "' has more than ", kMaxHostGroups, " bracket groups");
    }
    if (!trim(item).empty()) expand_item("", trim(item), text, out);
  }
  return out;
}

std::string parse_run_id(const std::string& text, const std::string& what) {
  auto allowed = [](unsigned char c) { return std::isalnum(c) || std::strchr("._-:@+", c) != nullptr; };
  const bool ok = !text.empty() && text.size() <= kMaxRunIdLength && text[0] != '.' &&
                  std::all_of(text.begin(), text.end(),
                              [&](char c) { return c != '\0' && allowed(static_cast<unsigned char>(c)); });
  if (!ok) {
    std::string shown = text.substr(0, kMaxRunIdLength + 8);
    for (char& c : shown) c = std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    DDP_THROW(InvalidArgument, what, ": '", shown, text.size() > shown.size() ? "..." : "",
              "' is not a run id: use 1 to ", kMaxRunIdLength,
              " letters, digits and . _ - : @ + (not starting with '.'), e.g. the scheduler's job id");
  }
  return text;
}

std::pair<std::string, std::string> parse_key_value(const std::string& text, const std::string& what) {
  auto eq = text.find('=');
  std::string key = text.substr(0, eq);
  if (eq == std::string::npos || !is_variable_name(key)) {
    DDP_THROW(InvalidArgument, what, ": '", text, "' is not KEY=VALUE with KEY a variable name");
  }
  return {key, text.substr(eq + 1)};
}

}  // namespace ddp::cli
