#include "launcher/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <mutex>

#include "common/error.h"
#include "common/fd.h"
#include "common/socket.h"
#include "launcher/stderr_sink.h"

namespace ddp::launcher {
namespace {

struct EventLogState {
  std::mutex mutex;
  EventLogTarget::Kind kind = EventLogTarget::Kind::kNull;
  Fd file;
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  std::string host;
  uint64_t failures = 0;
};

EventLogState& state() {
  static EventLogState s;
  return s;
}

double now_epoch_us() {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return static_cast<double>(us.count()) / 1e6;
}

bool write_all(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void install_event_log(const EventLogTarget& target) {
  Fd file;
  if (target.kind == EventLogTarget::Kind::kFile) {
    file = Fd(::open(target.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640));
    if (!file.valid()) DDP_THROW_ERRNO("open event log '", target.path, "' (--event-log-handler)");
  }
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.kind = target.kind;
  s.file = std::move(file);
  if (s.host.empty()) s.host = net::hostname();
}

bool event_log_enabled() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.kind != EventLogTarget::Kind::kNull;
}

void set_event_context(const std::string& key, nlohmann::ordered_json value) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (value.is_null()) {
    s.context.erase(key);
  } else {
    s.context[key] = std::move(value);
  }
}

void emit_event(std::string_view event, nlohmann::ordered_json fields) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.kind == EventLogTarget::Kind::kNull) return;
  nlohmann::ordered_json line = {{"event", event},
                                 {"time", now_epoch_us()},
                                 {"host", s.host},
                                 {"launcher_pid", static_cast<int64_t>(::getpid())}};
  for (const auto& [k, v] : s.context.items()) line[k] = v;
  if (fields.is_object()) {
    for (auto& [k, v] : fields.items()) line[k] = std::move(v);
  }
  // Worker error files and host names are input: invalid UTF-8 becomes U+FFFD, never a throw.
  const std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (s.kind == EventLogTarget::Kind::kConsole) {
    write_stderr(text);
  } else if (!write_all(s.file.get(), text)) {
    ++s.failures;
  }
}

uint64_t event_log_failures() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.failures;
}

}  // namespace ddp::launcher
