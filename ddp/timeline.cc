#include "ddp/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>

#include "common/error.h"
#include "common/settings.h"
#include "common/timeline_path.h"

namespace ddp {
namespace {

// DDP_TIMELINE, read once: a process pays for the environment lookup at most once.
const std::optional<std::string>& env_path() {
  static const std::optional<std::string> path = settings::get(settings::kTimeline);
  return path;
}

// Names are the engine's own (ASCII, no quotes); args are built by the engine too.
void append_event(std::string& out, char phase, std::string_view name, int rank, int track, int64_t ts,
                  int64_t dur, std::string_view args) {
  out += "{\"ph\":\"";
  out += phase;
  out += "\",\"name\":\"";
  out += name;
  out += "\",\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(track);
  if (phase != 'M') out += ",\"ts\":" + std::to_string(ts);
  if (phase == 'X') out += ",\"dur\":" + std::to_string(dur);
  if (phase == 'i') out += ",\"s\":\"t\"";
  out += ",\"args\":{";
  out += args;
  out += "}}";
}

}  // namespace

std::unique_ptr<Timeline> Timeline::open(const std::string& path, int rank) {
  const std::string& chosen = path.empty() ? env_path().value_or("") : path;
  if (chosen.empty()) return nullptr;
  return std::make_unique<Timeline>(timeline_rank_path(chosen, rank), rank);
}

int64_t Timeline::now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

Timeline::Timeline(const std::string& file, int rank) : file_(file), rank_(rank) {
  fd_ = Fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd_.valid()) DDP_THROW_ERRNO("open timeline '", file, "' (", settings::kTimeline.name, ")");
  std::lock_guard<std::mutex> lock(mu_);
  const std::string r = std::to_string(rank);
  pending_ = "[\n";
  event_locked('M', "process_name", 0, 0, 0, "\"name\":\"rank " + r + "\"");
  event_locked('M', "process_sort_index", 0, 0, 0, "\"sort_index\":" + r);
  name_track_locked(kStepTrack);
  write_locked(false);
}

Timeline::~Timeline() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  write_locked(true);
}

void Timeline::set_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
}

void Timeline::name_track_locked(int track) {
  if (!named_.insert(track).second) return;
  const std::string name = track == kStepTrack ? "step" : "bucket " + std::to_string(track - 1);
  event_locked('M', "thread_name", track, 0, 0, "\"name\":\"" + name + "\"");
  event_locked('M', "thread_sort_index", track, 0, 0, "\"sort_index\":" + std::to_string(track));
}

void Timeline::event_locked(char phase, std::string_view name, int track, int64_t ts, int64_t dur,
                            std::string_view args) {
  std::string all;
  if (phase != 'M') {
    all = "\"step\":" + std::to_string(step_);
    if (!args.empty()) all += ",";
  }
  all += args;
  if (any_event_) pending_ += ",\n";  // the first follows "[" directly
  any_event_ = true;
  append_event(pending_, phase, name, rank_, track, ts, dur, all);
}

void Timeline::span(std::string_view name, int track, int64_t begin_us, int64_t end_us,
                    std::string_view args) {
  std::lock_guard<std::mutex> lock(mu_);
  name_track_locked(track);
  event_locked('X', name, track, begin_us, std::max<int64_t>(0, end_us - begin_us), args);
}

void Timeline::instant(std::string_view name, int track, int64_t at_us, std::string_view args) {
  std::lock_guard<std::mutex> lock(mu_);
  name_track_locked(track);
  event_locked('i', name, track, at_us, 0, args);
}

void Timeline::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  write_locked(false);
}

void Timeline::write_locked(bool close) {
  if (close) pending_ += "\n]\n";
  size_t done = 0;
  while (!failed_ && done < pending_.size()) {
    const ssize_t n = ::write(fd_.get(), pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failed_ = true;
    if (n > 0) done += static_cast<size_t>(n);
  }
  pending_.clear();
}

}  // namespace ddp
