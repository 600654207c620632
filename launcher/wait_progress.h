#pragma once
// What a launcher prints while it waits for the other nodes of its job (up to the rendezvous
// timeout, 15 minutes by default): who has arrived and who is awaited. On a terminal one line is
// rewritten in place and ended when the wait is over; elsewhere (a log file, a pipe) each report
// is a line of its own. Long lists are shortened ("and 120 more"). Writes are best effort: a
// console that fails is ignored. Not thread-safe: one waiting thread reports.
#include <string>

#include "rendezvous/node_rendezvous.h"

namespace ddp::launcher {

// "waiting for nodes (run 'job7', round 0, 12 s of 900 s): 2 of 3 arrived (h0 = node 0, ...);
//  awaiting node rank(s) 1"
std::string format_progress(const rdzv::NodeRendezvousProgress& progress);

class ProgressLine {
 public:
  // `terminal`: rewrite one line (callers pass isatty(fd)).
  ProgressLine(int fd, bool terminal) : fd_(fd), terminal_(terminal) {}
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void show(const rdzv::NodeRendezvousProgress& progress);
  void finish() noexcept;  // ends a line left open on a terminal

 private:
  void write(const std::string& text) noexcept;

  int fd_;
  bool terminal_;
  bool open_line_ = false;
};

}  // namespace ddp::launcher
