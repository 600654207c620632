#pragma once
// broadcast_coalesced: many small tensors in few collectives (c10d's _broadcast_coalesced).
// Consecutive buffers of the same dtype and device are packed into staging memory of at most
// cap_bytes, broadcast from `root`, and unpacked; a buffer as large as the cap goes alone,
// in place. Collective: every rank passes buffers of the same sizes in the same order.
#include <cstddef>
#include <vector>

#include "comm/process_group.h"

namespace ddp {

inline constexpr size_t kBroadcastCoalesceBytes = size_t{250} << 20;  // c10d's default

void broadcast_coalesced(comm::ProcessGroup& group, const std::vector<comm::Buffer>& buffers, int root,
                         size_t cap_bytes = kBroadcastCoalesceBytes);

}  // namespace ddp
