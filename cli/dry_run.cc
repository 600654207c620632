#include "cli/dry_run.h"

#include <sstream>

#include "launcher/worker_env.h"

namespace ddp::cli {
namespace {

// Quotes a word the way a POSIX shell would need it.
std::string shell_quote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%") == std::string::npos) {
    return w;
  }
  std::string out = "'";
  for (char c : w) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

}  // namespace

std::string format_dry_run(const launcher::AgentOptions& options) {
  const auto& l = options.launch;
  rdzv::NodeAssignment a = launcher::predicted_assignment(options);
  std::ostringstream os;
  os << "ddp-launch dry run: node " << a.node_rank << " of " << a.nnodes << ", " << l.nproc_per_node
     << " worker(s), world size " << a.world_size << ", run id " << a.run_id << ", rendezvous "
     << (l.standalone ? "standalone" : l.rdzv_backend) << "\n";
  std::string command;
  for (const auto& w : l.command) {
    if (!command.empty()) command.push_back(' ');
    command.append(shell_quote(w));
  }
  for (int local = 0; local < l.nproc_per_node; ++local) {
    os << "\nrank " << a.rank_offset + local << " (local rank " << local << "): " << command << "\n";
    launcher::WorkerEnvInput in;
    in.local_rank = local;
    for (const auto& [k, v] : launcher::worker_env(l, a, in)) os << "  " << k << "=" << shell_quote(v) << "\n";
  }
  return os.str();
}

}  // namespace ddp::cli
