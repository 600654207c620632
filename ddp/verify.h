#pragma once
// The construction-time check that every rank registered the same thing (c10d's
// _verify_param_shape_across_processes), without ever hanging on a mismatch.
//
// Each rank describes what it registered as lines ("param fc1.weight [64, 32] float32 cpu",
// options that change the sequence of collectives). One all_gather of a 64-bit hash settles the
// common case; only on a mismatch are the full texts gathered (lengths, then padded bytes), so
// every rank throws the same InvalidArgument naming the first differing line and which ranks
// have what. Collective: every rank must call it.
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ddp {

void verify_same_across_ranks(comm::ProcessGroup& group, const std::vector<std::string>& lines,
                              const std::string& what);

uint64_t fnv1a(const std::string& text, uint64_t seed = 1469598103934665603ull);

}  // namespace ddp
