#include "launcher/cpu_bind.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <sstream>

#include "common/error.h"
#include "common/text.h"

namespace ddp::launcher {
namespace {

// Physical core key of a CPU: (package, core id); unknown topology: the CPU itself.
long core_key(int cpu) {
  std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  std::string core = read_first_line(base + "core_id");
  std::string pkg = read_first_line(base + "physical_package_id");
  if (core.empty()) return -1 - cpu;
  long package = pkg.empty() ? 0 : std::stol(pkg);
  return package * 1'000'000 + std::stol(core);
}

std::map<int, int> numa_node_of_cpus() {
  std::map<int, int> out;
  DIR* dir = ::opendir("/sys/devices/system/node");
  if (dir == nullptr) return out;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind("node", 0) != 0 || name.size() == 4 || !std::isdigit(static_cast<unsigned char>(name[4])))
      continue;
    std::string list = read_first_line("/sys/devices/system/node/" + name + "/cpulist");
    if (list.empty()) continue;  // memory-only node
    int node = std::stoi(name.substr(4));
    for (int cpu : parse_cpu_list(list)) out[cpu] = node;
  }
  ::closedir(dir);
  return out;
}

// Splits `units` (each a list of CPUs) into n contiguous blocks; block sizes differ by <= 1.
std::vector<std::vector<int>> split_units(const std::vector<std::vector<int>>& units, int n) {
  std::vector<std::vector<int>> out(n);
  const int count = static_cast<int>(units.size());
  for (int r = 0; r < n; ++r) {
    int begin = r * count / n;
    int end = (r + 1) * count / n;
    for (int u = begin; u < end; ++u) out[r].insert(out[r].end(), units[u].begin(), units[u].end());
    std::sort(out[r].begin(), out[r].end());
  }
  return out;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(), ::isspace), part.end());
    if (part.empty()) continue;
    size_t dash = part.find('-');
    try {
      size_t used = 0;
      int lo = std::stoi(part.substr(0, dash), &used);
      DDP_CHECK(used == (dash == std::string::npos ? part.size() : dash), "in cpu list '", text, "'");
      int hi = lo;
      if (dash != std::string::npos) hi = std::stoi(part.substr(dash + 1));
      DDP_CHECK(lo >= 0 && lo <= hi && hi < CPU_SETSIZE, "in cpu list '", text, "'");
      for (int c = lo; c <= hi; ++c) out.push_back(c);
    } catch (const std::logic_error&) {
      DDP_THROW(InvalidArgument, "malformed cpu list '", text, "'");
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

cpu_set_t to_cpu_set(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return set;
}

std::vector<std::vector<int>> split_cpus(CpuBind mode, int n, const std::vector<int>& cpus,
                                         const std::vector<long>& core_of, const std::vector<int>& node_of) {
  DDP_CHECK(n >= 1, "cpu binding needs at least one local rank");
  if (mode == CpuBind::kAuto)
    mode = n >= 2 && static_cast<size_t>(n) <= cpus.size() ? CpuBind::kCores : CpuBind::kNone;
  if (mode == CpuBind::kNone) return {};
  DDP_CHECK(!cpus.empty(), "no CPU to bind to");
  // Group CPUs into units (physical cores or NUMA nodes), in ascending order of first CPU.
  std::map<long, std::vector<int>> by_key;
  std::vector<long> order;
  for (size_t i = 0; i < cpus.size(); ++i) {
    long key = mode == CpuBind::kNuma ? node_of[i] : core_of[i];
    if (!by_key.count(key)) order.push_back(key);
    by_key[key].push_back(cpus[i]);
  }
  std::vector<std::vector<int>> units;
  units.reserve(order.size());
  for (long key : order) units.push_back(by_key[key]);

  if (mode == CpuBind::kNuma) {
    // Ranks in contiguous blocks over the nodes: rank r -> node r * nodes / n.
    std::vector<std::vector<int>> out(n);
    for (int r = 0; r < n; ++r) out[r] = units[static_cast<size_t>(r) * units.size() / n];
    return out;
  }
  if (static_cast<int>(units.size()) >= n) return split_units(units, n);
  std::vector<std::vector<int>> single;
  single.reserve(cpus.size());
  for (int c : cpus) single.push_back({c});
  if (static_cast<int>(single.size()) >= n) return split_units(single, n);
  std::vector<std::vector<int>> out(n);  // more ranks than CPUs: share round-robin
  for (int r = 0; r < n; ++r) out[r] = {cpus[r % cpus.size()]};
  return out;
}

std::vector<std::vector<int>> cpu_assignment(CpuBind mode, int local_world_size) {
  DDP_CHECK(local_world_size >= 1, "cpu binding needs at least one local rank");
  if (mode == CpuBind::kNone) return {};
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) DDP_THROW_ERRNO("sched_getaffinity");
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  std::vector<long> core_of;
  std::vector<int> node_of;
  std::map<int, int> numa = mode == CpuBind::kNuma ? numa_node_of_cpus() : std::map<int, int>{};
  for (int c : cpus) {
    core_of.push_back(mode == CpuBind::kCores || mode == CpuBind::kAuto ? core_key(c) : 0);
    auto it = numa.find(c);
    node_of.push_back(it == numa.end() ? 0 : it->second);
  }
  return split_cpus(mode, local_world_size, cpus, core_of, node_of);
}

int numa_node_of(const std::vector<int>& cpus) {
  if (cpus.empty()) return -1;
  const auto nodes = numa_node_of_cpus();
  auto it = nodes.find(cpus.front());
  return it == nodes.end() ? -1 : it->second;
}

CpuBind parse_cpu_bind(const std::string& name) {
  if (name == "none") return CpuBind::kNone;
  if (name == "cores") return CpuBind::kCores;
  if (name == "numa") return CpuBind::kNuma;
  if (name == "auto") return CpuBind::kAuto;
  DDP_THROW(InvalidArgument, "--cpu-bind: unknown mode '", name, "' (expected none, cores, numa or auto)");
}

const char* to_string(CpuBind mode) {
  switch (mode) {
    case CpuBind::kNone: return "none";
    case CpuBind::kCores: return "cores";
    case CpuBind::kNuma: return "numa";
    case CpuBind::kAuto: return "auto";
  }
  return "none";
}

}  // namespace ddp::launcher
