#include "common/machine.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "common/settings.h"
#include "common/text.h"

namespace ddp {
namespace {

std::string cpu_model(const std::string& proc_root) {
  std::ifstream in(proc_root + "/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(colon + 1));
  }
  return "";
}

// CPUs in a sysfs list such as "0-3,8,10-11".
int count_cpu_list(const std::string& list) {
  int n = 0;
  std::stringstream ss(list);
  for (std::string part; std::getline(ss, part, ',');) {
    part = trim(part);
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        std::stoi(part);
        ++n;
      } else {
        n += std::stoi(part.substr(dash + 1)) - std::stoi(part.substr(0, dash)) + 1;
      }
    } catch (const std::exception&) {
      return 0;
    }
  }
  return n;
}

// cpu0's data and unified caches, by level.
void read_caches(const std::string& cpu0, MachineProfile& p) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = cpu0 + "/cache/index" + std::to_string(i);
    const std::string level = read_first_line(dir + "/level");
    if (level.empty()) break;
    const std::string type = read_first_line(dir + "/type");
    if (type == "Instruction") continue;
    const size_t bytes = parse_cache_size(read_first_line(dir + "/size"));
    const int shared = count_cpu_list(read_first_line(dir + "/shared_cpu_list"));
    if (level == "1") {
      p.l1d_bytes = bytes;
    } else if (level == "2") {
      p.l2_bytes = bytes;
      p.l2_shared_by = shared;
    } else if (level == "3") {
      p.l3_bytes = bytes;
      p.l3_shared_by = shared;
    }
  }
}

std::string bytes_text(size_t b) {
  if (b == 0) return "?";
  if (b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

size_t sysconf_bytes(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? static_cast<size_t>(v) : 0;
}

// The L2 size cpuid reports (leaf 0x80000006, ECX[31:16] in KiB: AMD and Intel); 0 elsewhere.
size_t cpuid_l2_bytes() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000006, &a, &b, &c, &d) != 0) return size_t{c >> 16} << 10;
#endif
  return 0;
}

// Sizes sysfs did not give (a VM without cache directories).
void fill_missing_caches(MachineProfile& p) {
  if (p.l1d_bytes == 0) p.l1d_bytes = sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE);
  if (p.l2_bytes == 0) p.l2_bytes = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
  if (p.l2_bytes == 0) p.l2_bytes = cpuid_l2_bytes();
  if (p.l3_bytes == 0) p.l3_bytes = sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
}

}  // namespace

size_t parse_cache_size(const std::string& text) {
  const std::string t = trim(text);
  size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0 || digits > 12) return 0;
  const size_t value = std::stoull(t.substr(0, digits));
  const std::string unit = t.substr(digits);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

std::string MachineProfile::summary() const {
  std::string s = cpu_model.empty() ? "unknown CPU" : cpu_model;
  s += ", " + std::to_string(usable_cpus) + "/" + std::to_string(online_cpus) + " CPUs";
  s += ", L1d " + bytes_text(l1d_bytes) + ", L2 " + bytes_text(l2_bytes);
  if (l2_shared_by > 1) s += " (" + std::to_string(l2_shared_by) + " CPUs share it)";
  s += ", L3 " + bytes_text(l3_bytes);
  if (l3_shared_by > 0) s += " (" + std::to_string(l3_shared_by) + " CPUs share it)";
  return s;
}

MachineProfile read_machine_profile(const MachineProfileOptions& o) {
  MachineProfile p;
  p.cpu_model = cpu_model(o.proc_root);
  p.online_cpus = count_cpu_list(read_first_line(o.sys_cpu_root + "/online"));
  if (p.online_cpus == 0) p.online_cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  p.usable_cpus = affinity_cpus();
  if (p.usable_cpus == 0) p.usable_cpus = p.online_cpus;
  read_caches(o.sys_cpu_root + "/cpu0", p);
  if (o.cache_fallback) fill_missing_caches(p);
  return p;
}

const MachineProfile& machine_profile() {
  static const MachineProfile profile = read_machine_profile();
  return profile;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int local_cpus() {
  if (const std::optional<int64_t> n = settings::get_int(settings::kLocalCpus)) return static_cast<int>(*n);
  return std::max(1, machine_profile().usable_cpus);
}

std::vector<int> first_usable_cpus(int at_most) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < at_most; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace ddp
