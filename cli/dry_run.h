#pragma once
// --dry-run: what ddp-launch would start on this node, per local rank: the command and the
// variables the launcher sets (on top of its own environment, which workers inherit). Nothing is
// started, no store is hosted, no rendezvous runs; every node is assumed to run the same nproc.
#include <string>

#include "launcher/agent.h"

namespace ddp::cli {

std::string format_dry_run(const launcher::AgentOptions& options);

}  // namespace ddp::cli
