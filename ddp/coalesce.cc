#include "ddp/coalesce.h"

#include "ddp/device_ops.h"

namespace ddp {

void broadcast_coalesced(comm::ProcessGroup& group, const std::vector<comm::Buffer>& buffers, int root,
                         size_t cap_bytes) {
  if (group.size() == 1) return;
  size_t i = 0;
  while (i < buffers.size()) {
    // The run [i, j): same dtype and device, total within the cap.
    size_t j = i + 1;
    size_t bytes = buffers[i].bytes();
    while (j < buffers.size() && buffers[j].dtype == buffers[i].dtype &&
           buffers[j].device == buffers[i].device && bytes + buffers[j].bytes() <= cap_bytes) {
      bytes += buffers[j].bytes();
      ++j;
    }
    if (j == i + 1) {
      group.broadcast(buffers[i], {root})->wait();
      i = j;
      continue;
    }
    size_t count = bytes / comm::dtype_size(buffers[i].dtype);
    DeviceMemory staging(bytes, buffers[i].device);
    comm::Buffer flat = staging.view(count, buffers[i].dtype);
    size_t offset = 0;
    if (group.rank() == root) {
      for (size_t k = i; k < j; ++k) {
        copy_buffer(flat.slice(offset, buffers[k].count), buffers[k]);
        offset += buffers[k].count;
      }
    }
    group.broadcast(flat, {root})->wait();
    offset = 0;
    for (size_t k = i; k < j; ++k) {
      copy_buffer(buffers[k], flat.slice(offset, buffers[k].count));
      offset += buffers[k].count;
    }
    i = j;
  }
}

}  // namespace ddp
