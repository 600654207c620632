#include "launcher/wait_progress.h"

#include "launcher/stderr_sink.h"

namespace ddp::launcher {
namespace {

constexpr size_t kMaxListed = 8;  // hosts named before "and N more"

// 1,2,3,5 -> "1-3,5"
std::string ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out.push_back(',');
    out.append(std::to_string(ranks[i]));
    if (j > i) {
      out.push_back('-');
      out.append(std::to_string(ranks[j]));
    }
    i = j + 1;
  }
  return out;
}

std::string seconds(Millis m) { return std::to_string(m.count() / 1000) + " s"; }

}  // namespace

std::string format_progress(const rdzv::NodeRendezvousProgress& p) {
  std::string out = "waiting for nodes (run '" + p.run_id + "', round " + std::to_string(p.round) + ", " +
                    seconds(p.waited) + " of " + seconds(p.timeout) + "): " + std::to_string(p.count) +
                    " of " + std::to_string(p.nnodes) + " arrived";
  if (!p.arrived.empty()) {
    std::string hosts;
    for (size_t i = 0; i < p.arrived.size() && i < kMaxListed; ++i) {
      if (!hosts.empty()) hosts.append(", ");
      hosts.append(p.arrived[i].second).append(" = node ").append(std::to_string(p.arrived[i].first));
    }
    if (p.arrived.size() > kMaxListed)
      hosts.append(", and ").append(std::to_string(p.arrived.size() - kMaxListed)).append(" more");
    out += " (" + hosts + ")";
  }
  if (!p.missing.empty()) out += "; awaiting node rank(s) " + ranges(p.missing);
  return out;
}

void ProgressLine::show(const rdzv::NodeRendezvousProgress& progress) {
  const std::string text = "ddp-launch: " + format_progress(progress);
  if (terminal_) {
    write("\r\x1b[K" + text);
    open_line_ = true;
  } else {
    write(text + "\n");
  }
}

void ProgressLine::finish() noexcept {
  if (!open_line_) return;
  open_line_ = false;
  write("\n");
}

ProgressLine::Writer ProgressLine::default_writer() { return write_stderr; }

void ProgressLine::write(const std::string& text) noexcept {
  try {
    out_(text);
  } catch (const std::exception&) {  // best effort: a console that fails is not the job's failure
  }
}

}  // namespace ddp::launcher
