#pragma once
// What a launcher prints while it waits for the other nodes of its job (up to the rendezvous
// timeout, 15 minutes by default): who has arrived and who is awaited. On a terminal one line is
// rewritten in place and ended when the wait is over; elsewhere (a log file, a pipe) each report
// is a line of its own. Long lists are shortened ("and 120 more"). Output goes through a writer
// that must never block — by default the launcher's stderr sink (stderr_sink.h: a stderr nobody
// reads buffers, then drops and counts, and the wait goes on). Not thread-safe: one waiting
// thread reports.
#include <functional>
#include <string>
#include <string_view>

#include "rendezvous/node_rendezvous.h"

namespace ddp::launcher {

// "waiting for nodes (run 'job7', round 0, 12 s of 900 s): 2 of 3 arrived (h0 = node 0, ...);
//  awaiting node rank(s) 1"
std::string format_progress(const rdzv::NodeRendezvousProgress& progress);

class ProgressLine {
 public:
  using Writer = std::function<void(std::string_view)>;

  // `terminal`: rewrite one line (callers pass isatty(2)); `out`: where the text goes.
  explicit ProgressLine(bool terminal, Writer out = default_writer())
      : out_(std::move(out)), terminal_(terminal) {}
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void show(const rdzv::NodeRendezvousProgress& progress);
  void finish() noexcept;  // ends a line left open on a terminal

  static Writer default_writer();  // write_stderr (stderr_sink.h)

 private:
  void write(const std::string& text) noexcept;

  Writer out_;
  bool terminal_;
  bool open_line_ = false;
};

}  // namespace ddp::launcher
