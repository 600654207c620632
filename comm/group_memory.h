#pragma once
// GroupMemory: host memory a process group hands out for the buffers of its collectives
// (ProcessGroup::allocate), which the group may reach without staging copies.
//
// - tcp on one host: each rank's allocation is a shared-memory object every rank of the group
//   maps, so an all_reduce of a view in it (at the same offset on every rank) reads the peers'
//   buffers and writes the result into all of them in one pass (docs/tcp.md). shared()
//   says so. Everywhere else: plain host memory (shared() false); every op works on both.
// - 64-byte aligned and zeroed. Freeing it is local (no collective); it must outlive every op
//   on it, as any buffer must.
#include <cstddef>
#include <memory>

#include "comm/types.h"

namespace ddp::comm {

class GroupMemory {
 public:
  virtual ~GroupMemory() = default;
  GroupMemory(const GroupMemory&) = delete;
  GroupMemory& operator=(const GroupMemory&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool shared() const { return shared_; }  // the group reads and writes it in place (see above)
  // `count` elements of `dtype` from byte `offset`: InvalidArgument when that does not fit.
  Buffer view(size_t count, DType dtype, size_t offset = 0) const;

 protected:
  GroupMemory(void* data, size_t bytes, bool shared) : data_(data), bytes_(bytes), shared_(shared) {}

 private:
  void* data_;
  size_t bytes_;
  bool shared_;
};

// Plain host memory (what ProcessGroup::allocate gives where nothing better exists).
std::shared_ptr<GroupMemory> host_memory(size_t bytes);

}  // namespace ddp::comm
