#pragma once
// Timeline: where a DDP step's time goes, as a Chrome trace event file (docs/timeline.md), one
// file per rank (common/timeline_path.h: trace.json -> trace.rank0.json), pid = the rank; track 0
// holds the step's phases, track 1 + k bucket k's ready instant, collective and copies. Times are
// the system clock in microseconds, so ranks' files merge on one time axis.
// Turned on by EngineOptions::timeline or DDP_TIMELINE=PATH (read once per process). Off, the
// engine holds no Timeline and reads no clock: each hook point is one pointer test.
// Events are buffered and appended to the file at the end of every step (flush) and when the
// Timeline is destroyed, which closes the JSON array; a process killed mid-run leaves the
// array unclosed, which chrome://tracing, Perfetto and scripts/timeline_png.py accept.
// Thread-safe: buckets' collectives complete on other threads.
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "common/fd.h"

namespace ddp {

class Timeline {
 public:
  static constexpr int kStepTrack = 0;
  static int bucket_track(size_t bucket) { return 1 + static_cast<int>(bucket); }

  // `path` (empty: DDP_TIMELINE, else off) made rank-specific; nullptr when off. Throws
  // SystemError when the file cannot be created.
  static std::unique_ptr<Timeline> open(const std::string& path, int rank);
  static int64_t now_us();

  Timeline(const std::string& file, int rank);
  ~Timeline() noexcept;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void set_step(int64_t step);
  // A complete event ("X") on `track`; `args` is extra JSON members ("\"bytes\":4096") or empty.
  void span(std::string_view name, int track, int64_t begin_us, int64_t end_us, std::string_view args = {});
  // An instant event ("i", thread scope).
  void instant(std::string_view name, int track, int64_t at_us, std::string_view args = {});
  // Appends what is buffered to the file (one write).
  void flush();
  const std::string& file() const { return file_; }

 private:
  void name_track_locked(int track);
  void event_locked(char phase, std::string_view name, int track, int64_t ts, int64_t dur,
                    std::string_view args);
  void write_locked(bool close);

  std::mutex mu_;
  std::string file_;
  Fd fd_;
  int rank_;
  int64_t step_ = 0;
  std::string pending_;
  std::set<int> named_;
  bool any_event_ = false;
  bool failed_ = false;  // a write failed: stop writing (a trace is an aid, never a reason to fail)
};

}  // namespace ddp
