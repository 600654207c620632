#include <string.h>

#include <cstdio>
#include <ctime>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launcher/supervisor.h"

namespace ddp::launcher {
namespace {

std::string format_time(double epoch) {
  time_t secs = static_cast<time_t>(epoch);
  tm local{};
  ::localtime_r(&secs, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d_%H:%M:%S", &local);
  return buf;
}

void format_one(std::ostringstream& os, int index, const WorkerFailure& f) {
  os << "[" << index << "]:\n";
  os << "  time      : " << format_time(f.time) << "\n";
  os << "  host      : " << f.host << "\n";
  os << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ")\n";
  if (f.signal != 0) {
    os << "  exitcode  : -" << f.signal << " (" << signal_name(f.signal) << ", pid: " << f.pid << ")\n";
  } else {
    os << "  exitcode  : " << f.exit_code << " (pid: " << f.pid << ")\n";
  }
  if (!f.message.empty()) os << "  error     : " << f.message << "\n";
  os << "  error_file: " << (f.error_head.empty() ? std::string("<N/A>") : f.error_file) << "\n";
  std::string traceback = f.error_head;
  if (traceback.empty()) {
    traceback = f.signal != 0 ? "Signal " + std::to_string(f.signal) + " (" + signal_name(f.signal) +
                                    ") received by PID " + std::to_string(f.pid)
                              : "no error file: the worker wrote none (PyTorch: decorate main with @record)";
  }
  std::string indented;
  for (char c : traceback) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
  os << "  traceback : " << indented << "\n";
}

}  // namespace

std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "SIG" + std::to_string(signal);
}

std::string format_failure_summary(const AttemptResult& result, const std::string& program) {
  const std::string rule(60, '=');
  const std::string thin(60, '-');
  std::ostringstream os;
  os << rule << "\n" << program << " FAILED\n" << thin << "\n";
  if (result.interrupted_by != 0) {
    os << "Interrupted by " << signal_name(result.interrupted_by) << " (exit code " << result.exit_code()
       << ")\n";
  }
  if (result.stopped_externally && result.failures.empty()) {
    os << "Stopped: another node of the job failed or stopped\n";
  }
  if (result.failures.size() > 1) {
    os << "Failures:\n";
    for (size_t i = 1; i < result.failures.size(); ++i)
      format_one(os, static_cast<int>(i), result.failures[i]);
    os << thin << "\n";
  } else if (!result.failures.empty()) {
    os << "Failures:\n  <NO_OTHER_FAILURES>\n" << thin << "\n";
  }
  if (!result.failures.empty()) {
    os << "Root Cause (first observed failure):\n";
    format_one(os, 0, result.failures.front());
  }
  os << rule << "\n";
  return os.str();
}

nlohmann::ordered_json attempt_json(const AttemptResult& result) {
  nlohmann::ordered_json failures = nlohmann::ordered_json::array();
  for (const auto& f : result.failures) {
    failures.push_back(
        {{"rank", f.rank},
         {"local_rank", f.local_rank},
         {"host", f.host},
         {"pid", f.pid},
         {"exit_code", f.signal == 0 ? nlohmann::ordered_json(f.exit_code) : nullptr},
         {"signal", f.signal != 0 ? nlohmann::ordered_json(signal_name(f.signal)) : nlohmann::ordered_json()},
         {"time", f.time},
         {"error_file",
          f.error_head.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(f.error_file)},
         {"error", f.error_head.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(f.error_head)},
         {"message", f.message.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(f.message)}});
  }
  const char* outcome = result.success               ? "succeeded"
                        : result.interrupted_by != 0 ? "interrupted"
                        : !result.failures.empty()   ? "failed"
                        : result.stopped_externally  ? "stopped"
                                                     : "failed";
  return {{"outcome", outcome},
          {"exit_code", result.exit_code()},
          {"interrupted_by", result.interrupted_by != 0
                                 ? nlohmann::ordered_json(signal_name(result.interrupted_by))
                                 : nlohmann::ordered_json()},
          {"failures", std::move(failures)}};
}

}  // namespace ddp::launcher
