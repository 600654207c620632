#include "common/settings.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/error.h"

extern char** environ;

namespace ddp::settings {
namespace {

constexpr std::array kAll = {
    &kLaunchOption,
    &kPetOption,
    &kLogLevel,
    &kStore,
    &kJobToken,
    &kRunId,
    &kNodeRank,
    &kElasticRound,
    &kTimeline,
    &kLocalCpus,
    &kEtcdCacert,
    &kEtcdCert,
    &kEtcdKey,
    &kTimeoutMs,
    &kCopyKernel,
    &kF16c,
    &kSocketIfname,
    &kTorchBackend,
    &kEtcdUser,
    &kEtcdPassword,
    &kTcpTransport,
    &kTcpFingerprint,
    &kTcpSpinUs,
    &kTcpYieldUs,
    &kTcpInlineSpinUs,
    &kTcpInlineMaxBytes,
    &kTcpShmDepth,
    &kTcpShmSlotBytes,
    &kTcpShmOneshotBytes,
    &kTcpShmStores,
    &kTcpCma,
    &kTcpMaxUnexpectedBytes,
    &kTcpSocketChunkBytes,
    &kTcpSocketLowat,
    &kTcpSocketOneshotBytes,
    &kTcpSocketAlgo,
    &kTcpSocketStreams,
    &kTcpInter,
    &kTcpHierarchyLarge,
    &kTcpHierarchyOverlap,
    &kTcpHierarchySmallBytes,
    &kTcpHierarchySegmentBytes,
    &kMpiCollectives,
    &kMpiCallerBytes,
    &kMpiP2pBytes,
    &kMpiHalvingBytes,
    &kMpiPollUs,
    &kMpiThreadLevel,
    &kBenchGlooHost,
    &kRank,
    &kWorldSize,
    &kLocalRank,
    &kLocalWorldSize,
    &kMasterAddr,
    &kMasterPort,
    &kTorchelasticRunId,
    &kTorchelasticRestartCount,
    &kTorchelasticLinePrefix,
    &kOmpiWorld,
    &kPmi,
    &kSlurm,
    &kPbsJobId,
    &kLsbJobId,
    &kFluxJobId,
    &kCobaltJobId,
    &kCudaVisibleDevices,
    &kGlooSocketIfname,
    &kPythonExec,
    &kNoColor,
    &kTmpdir,
    &kPath,
    &kOmpNumThreads,
    &kTorchNcclAsyncErrorHandling,
};

// The prefix every member of a family shares ("DDP_LAUNCH_" of "DDP_LAUNCH_<OPTION>"); the
// whole name for a single variable.
std::string_view prefix_of(const Setting& s) {
  const size_t cut = s.name.find_first_of("<*");
  return cut == std::string_view::npos ? s.name : s.name.substr(0, cut);
}

bool is_family(const Setting& s) { return prefix_of(s).size() != s.name.size(); }

// The one place the process environment is read (ddp-launch's pass-through of its workers'
// environment aside: launcher/worker_env.cc).
std::optional<std::string> read_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<std::string_view> choices_of(const Setting& s) {
  std::vector<std::string_view> out;
  std::string_view rest = s.choices;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    out.push_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

[[noreturn]] void bad_value(const Setting& s, const std::string& value) {
  DDP_THROW(InvalidArgument, "environment variable ", s.name, "='", value, "': ", allowed_text(s));
}

[[noreturn]] void no_fallback(const Setting& s) {
  throw std::logic_error("settings: " + std::string(s.name) + " has no default in the table; pass one");
}

void require(const Setting& s, Type type) {
  if (s.type != type || is_family(s))
    throw std::logic_error("settings: " + std::string(s.name) + " is read as the wrong type");
}

size_t index_of_choice(const Setting& s, const std::string& value) {
  const std::string v = lower(value);
  const auto c = choices_of(s);
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] == v) return i;
  }
  bad_value(s, value);
}

std::string canonical_choice(const Setting& s, const std::string& value) {
  return std::string(choices_of(s)[index_of_choice(s, value)]);
}

int64_t parse_int(const Setting& s, const std::string& value) {
  int64_t out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < s.min || out > s.max) bad_value(s, value);
  return out;
}

bool parse_boolean(const Setting& s, const std::string& value) {
  if (auto b = parse_bool(value)) return *b;
  bad_value(s, value);
}

std::optional<int64_t> parse_auto_int(const Setting& s, const std::string& value) {
  if (lower(value) == "auto") return std::nullopt;
  return parse_int(s, value);
}

std::optional<bool> parse_auto_bool(const Setting& s, const std::string& value) {
  if (lower(value) == "auto") return std::nullopt;
  return parse_boolean(s, value);
}

// The value set, else the table's fallback (std::logic_error when it has none).
std::string set_or_fallback(const Setting& s) {
  if (auto v = get(s)) return *v;
  if (s.fallback.empty()) no_fallback(s);
  return std::string(s.fallback);
}

// The value set, read by `parse` (which rejects a bad one); nullopt when unset.
template <typename T>
std::optional<T> parsed_if_set(const Setting& s, T (*parse)(const Setting&, const std::string&)) {
  auto v = get(s);
  if (!v) return std::nullopt;
  return parse(s, *v);
}

std::string int_range_text(const Setting& s) {
  if (s.min == INT64_MIN && s.max == INT64_MAX) return "an integer";
  if (s.max == INT64_MAX) return "an integer of at least " + std::to_string(s.min);
  return "an integer from " + std::to_string(s.min) + " to " + std::to_string(s.max);
}

constexpr char kBooleans[] = "a boolean: 1/0, true/false, yes/no, on/off";

std::string type_name(const Setting& s) {
  switch (s.type) {
    case Type::kInt: return "integer";
    case Type::kBool: return "boolean";
    case Type::kChoice: return "choice";
    case Type::kAutoInt: return "integer or auto";
    case Type::kAutoBool: return "boolean or auto";
    case Type::kText: break;
  }
  return "text";
}

std::string default_text(const Setting& s) {
  if (!s.fallback.empty()) return std::string(s.fallback);
  if (!s.computed.empty()) return std::string(s.computed);
  return "unset";
}

// "NAME=value" of the set members of a family, comma-separated.
std::string family_members(const Setting& s) {
  std::string out;
  const std::string_view prefix = prefix_of(s);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (!kv.starts_with(prefix) || kv.size() == prefix.size()) continue;
    out += (out.empty() ? "" : ", ") + std::string(kv);
  }
  return out;
}

std::string value_in_effect(const Setting& s) {
  if (is_family(s)) {
    const std::string set = family_members(s);
    return set.empty() ? "(none set)" : set;
  }
  auto v = get(s);
  if (!v) return default_text(s) + " (default)";
  if (s.secret) return "(set)";
  try {
    effective(s);
  } catch (const InvalidArgument&) {
    return *v + " (INVALID: " + allowed_text(s) + ")";
  }
  return *v;
}

const char* section_title(Section section) {
  switch (section) {
    case Section::kLauncher: return "ddp-launch";
    case Section::kWorker: return "Set by ddp-launch for its workers, read by libddp";
    case Section::kLibrary: return "libddp";
    case Section::kTcp: return "The tcp backend";
    case Section::kMpi: return "The mpi backend";
    case Section::kTools: return "Tools";
    case Section::kExternal: return "Read, not ours: torchrun's, schedulers', the system's";
  }
  return "";
}

std::string escape_cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::span<const Setting* const> all() { return kAll; }

std::string_view family_prefix(const Setting& s) { return prefix_of(s); }

const Setting* find(std::string_view name) {
  for (const Setting* s : kAll) {
    if (s->name == name) return s;
  }
  for (const Setting* s : kAll) {
    if (is_family(*s) && name.starts_with(prefix_of(*s)) && name.size() > prefix_of(*s).size()) return s;
  }
  return nullptr;
}

std::optional<std::string> get(const Setting& s) {
  if (is_family(s))
    throw std::logic_error("settings: read a member of " + std::string(s.name) + " by its name");
  return read_env(std::string(s.name));
}

std::optional<std::string> lookup(std::string_view name) {
  if (find(name) == nullptr)
    throw std::logic_error("settings: " + std::string(name) + " is not declared in common/settings_table.h");
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> get(std::string_view name) {
  auto v = lookup(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

std::string get_or(const Setting& s, const std::string& fallback) { return get(s).value_or(fallback); }

std::string choice(const Setting& s) {
  require(s, Type::kChoice);
  return canonical_choice(s, set_or_fallback(s));
}

size_t choice_index(const Setting& s) {
  require(s, Type::kChoice);
  return index_of_choice(s, set_or_fallback(s));
}

std::optional<int64_t> auto_int(const Setting& s) {
  require(s, Type::kAutoInt);
  return parse_auto_int(s, set_or_fallback(s));
}

std::optional<bool> auto_bool(const Setting& s) {
  require(s, Type::kAutoBool);
  return parse_auto_bool(s, set_or_fallback(s));
}

void check(Section section) {
  for (const Setting* s : kAll) {
    if (s->section == section && !is_family(*s)) effective(*s);
  }
}

std::optional<int64_t> get_int(const Setting& s) {
  require(s, Type::kInt);
  return parsed_if_set(s, parse_int);
}

int64_t int_or(const Setting& s, int64_t fallback) { return get_int(s).value_or(fallback); }

int64_t int_value(const Setting& s) {
  require(s, Type::kInt);
  return parse_int(s, set_or_fallback(s));
}

std::optional<bool> get_bool(const Setting& s) {
  require(s, Type::kBool);
  return parsed_if_set(s, parse_boolean);
}

bool bool_or(const Setting& s, bool fallback) { return get_bool(s).value_or(fallback); }

bool bool_value(const Setting& s) {
  require(s, Type::kBool);
  return parse_boolean(s, set_or_fallback(s));
}

std::optional<bool> parse_bool(const std::string& text) {
  const std::string s = lower(text);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

std::string effective(const Setting& s) {
  const std::optional<std::string> set = get(s);
  if (!set && s.fallback.empty()) return "";
  std::string v = set.value_or(std::string(s.fallback));
  switch (s.type) {
    case Type::kInt: return std::to_string(parse_int(s, v));
    case Type::kBool: return parse_boolean(s, v) ? "1" : "0";
    case Type::kChoice: return canonical_choice(s, v);
    case Type::kAutoInt: {
      const auto n = parse_auto_int(s, v);
      return n ? std::to_string(*n) : "auto";
    }
    case Type::kAutoBool: {
      const auto b = parse_auto_bool(s, v);
      return b ? (*b ? "1" : "0") : "auto";
    }
    case Type::kText: break;
  }
  return v;
}

std::string allowed_text(const Setting& s) {
  switch (s.type) {
    case Type::kBool: return kBooleans;
    case Type::kAutoBool: return std::string("auto, or ") + kBooleans;
    case Type::kAutoInt: return "auto, or " + int_range_text(s);
    case Type::kChoice: {
      std::string out = "one of ";
      const auto c = choices_of(s);
      for (size_t i = 0; i < c.size(); ++i) out += (i == 0 ? "" : ", ") + std::string(c[i]);
      return out;
    }
    case Type::kInt: return int_range_text(s);
    case Type::kText: break;
  }
  return std::string(s.choices.empty() ? "text" : s.choices);
}

const char* to_string(Scope scope) { return scope == Scope::kGroup ? "group" : "process"; }

const char* to_string(Section section) { return section_title(section); }

std::string format_table() {
  std::ostringstream out;
  out << "Environment settings (docs/environment.md). Scope 'group': the same on every rank of a group.\n";
  Section section = Section::kLauncher;
  bool first = true;
  for (const Setting* s : kAll) {
    if (first || s->section != section) out << "\n" << section_title(s->section) << ":\n";
    first = false;
    section = s->section;
    std::string name(s->name);
    name.resize(std::max<size_t>(name.size(), 34), ' ');
    out << "  " << name << " = " << value_in_effect(*s) << "   [" << to_string(s->scope) << "; "
        << allowed_text(*s) << "]\n      " << s->meaning << "\n";
  }
  return out.str();
}

std::string format_markdown() {
  std::ostringstream out;
  out << "# Environment variables\n\n"
         "Every environment variable that ddp-launch, libddp and the tools read. Generated from the\n"
         "table in `common/settings_table.h` by `ddp-launch --print-settings --markdown`: do not edit\n"
         "by hand (the ctest `cli_settings_doc_test` fails when this page and the table differ).\n"
         "`ddp-launch --print-settings` prints the same table with the values in effect.\n\n"
         "An empty value counts as unset; a value that is set but malformed is an error naming the\n"
         "variable and the values it allows. Scope *group*: every rank of a group must hold the same\n"
         "value; the tcp backend compares them at group creation, through the group's store, and a\n"
         "difference fails every rank with an error naming the variable and both values (the mpi\n"
         "backend's are not compared: under mpirun its ranks share no store).\n";
  bool first = true;
  Section section = Section::kLauncher;
  for (const Setting* s : kAll) {
    if (first || s->section != section) {
      out << "\n## " << section_title(s->section) << "\n\n"
          << "| Variable | Type | Default | Allowed | Scope | Meaning |\n"
          << "|---|---|---|---|---|---|\n";
    }
    first = false;
    section = s->section;
    out << "| `" << s->name << "` | " << type_name(*s) << " | " << escape_cell(default_text(*s)) << " | "
        << escape_cell(allowed_text(*s)) << " | " << to_string(s->scope) << " | " << escape_cell(s->meaning)
        << " |\n";
  }
  return out.str();
}

}  // namespace ddp::settings
