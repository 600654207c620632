#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "common/settings.h"

namespace ddp {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

spdlog::level::level_enum& current_level() {
  static spdlog::level::level_enum level = [] {
    spdlog::level::level_enum l = spdlog::level::warn;
    if (auto name = settings::get(settings::kLogLevel)) parse_log_level(*name, &l);
    return l;
  }();
  return level;
}

spdlog::sink_ptr& current_sink() {
  static spdlog::sink_ptr sink;
  return sink;
}

constexpr char kPattern[] = "[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v";

std::string& current_program() {
  static std::string program;
  return program;
}

// %* in a program's pattern: the level word where it means something.
class LevelPrefix final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
              spdlog::memory_buf_t& dest) override {
    std::string_view word;
    switch (msg.level) {
      case spdlog::level::trace: word = "trace: "; break;
      case spdlog::level::debug: word = "debug: "; break;
      case spdlog::level::warn: word = "warning: "; break;
      case spdlog::level::err: word = "error: "; break;
      case spdlog::level::critical: word = "critical: "; break;
      default: break;
    }
    dest.append(word.data(), word.data() + word.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelPrefix>(); }
};

// Under registry_mutex().
std::unique_ptr<spdlog::formatter> make_formatter() {
  const std::string& program = current_program();
  if (program.empty()) return std::make_unique<spdlog::pattern_formatter>(kPattern);
  std::string escaped;
  for (char c : program) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelPrefix>('*').set_pattern(escaped + ": %*%v");
  return formatter;
}

}  // namespace

bool parse_log_level(const std::string& name, spdlog::level::level_enum* out) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "warning") n = "warn";
  if (n == "fatal") n = "critical";
  auto level = spdlog::level::from_str(n);
  if (level == spdlog::level::off && n != "off") return false;
  *out = level;
  return true;
}

std::shared_ptr<spdlog::logger> logger(const std::string& module) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::string name = "ddp." + module;
  if (auto existing = spdlog::get(name)) return existing;
  spdlog::sink_ptr sink = current_sink();
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>(name, sink);
  log->set_formatter(make_formatter());
  log->set_level(current_level());
  spdlog::register_logger(log);
  return log;
}

void set_log_sink(spdlog::sink_ptr sink) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  current_sink() = sink;
  spdlog::apply_all([&sink](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name().rfind("ddp.", 0) != 0) return;
    l->sinks().assign(1, sink);
    l->set_formatter(make_formatter());
  });
}

void set_log_program(const std::string& program) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  current_program() = program;
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name().rfind("ddp.", 0) == 0) l->set_formatter(make_formatter());
  });
}

void set_log_level(spdlog::level::level_enum level) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  current_level() = level;
  spdlog::apply_all([level](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name().rfind("ddp.", 0) == 0) l->set_level(level);
  });
}

}  // namespace ddp
