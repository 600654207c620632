#include "cli/dry_run.h"

#include <sstream>

#include "launcher/worker_env.h"

namespace ddp::cli {
namespace {

// Quotes a word the way a POSIX shell would need it.
std::string shell_quote(const std::string& w) {
  if (!w.empty() &&
      w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%") ==
          std::string::npos) {
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

// What a multicast rendezvous will do, step by step: the ranks and store it decides are only
// known once the launchers have met, so the workers below show node 0's layout as a guess.
std::string explain_multicast(const launcher::AgentOptions& o) {
  const auto& l = o.launch;
  std::ostringstream os;
  os << "multicast rendezvous on " << l.rdzv_endpoint << " (TTL " << o.multicast_ttl << ", interface "
     << (o.multicast_interface.empty() ? "the kernel's choice" : o.multicast_interface) << "):\n"
     << "  1. this launcher opens a store on an ephemeral port and announces it, with its addresses, on the "
        "group,\n"
     << "     repeating with backoff; announcements carry an HMAC of the job token (DDP_JOB_TOKEN, else "
        "derived from\n"
     << "     --rdzv-id '" << l.run_id << "') and only launchers of job '" << l.run_id << "' are counted\n"
     << "  2. once " << l.nnodes_max << " launchers are heard, node ranks are agreed: "
     << (l.node_rank >= 0 ? "this node asks for " + std::to_string(l.node_rank)
                          : std::string("this node takes"))
     << (l.node_rank >= 0 ? "" : " a free rank in the order of the launchers' addresses")
     << " (a rank asked twice fails every node)\n"
     << "  3. node 0 keeps its store; the others connect to the first of node 0's addresses that answers, "
        "and the job\n"
     << "     runs as with --rdzv-backend tcp (rounds, restarts, exit barrier)\n"
     << "  fewer than " << l.nnodes_max << " launchers within " << l.rdzv_timeout.count()
     << " ms: every launcher exits 121 naming those it heard\n";
  return os.str();
}

}  // namespace

std::string format_dry_run(const launcher::AgentOptions& options) {
  const auto& l = options.launch;
  rdzv::NodeAssignment a = launcher::predicted_assignment(options);
  std::ostringstream os;
  os << "ddp-launch dry run: node " << a.node_rank << " of " << a.nnodes << ", " << l.nproc_per_node
     << " worker(s), world size " << a.world_size << ", run id " << a.run_id << ", rendezvous "
     << (l.standalone ? "standalone" : launcher::to_string(l.rdzv_backend)) << "\n";
  if (!l.standalone && l.nnodes_max > 1 && l.rdzv_backend == launcher::RdzvBackend::kMulticast)
    os << explain_multicast(options);
  std::string command;
  for (const auto& w : l.command) {
    if (!command.empty()) command.push_back(' ');
    command.append(shell_quote(w));
  }
  for (int local = 0; local < l.nproc_per_node; ++local) {
    os << "\nrank " << a.rank_offset + local << " (local rank " << local << "): " << command << "\n";
    launcher::WorkerEnvInput in;
    in.local_rank = local;
    for (const auto& [k, v] : launcher::worker_env(l, a, in))
      os << "  " << k << "=" << shell_quote(v) << "\n";
  }
  return os.str();
}

}  // namespace ddp::cli
