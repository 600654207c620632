#pragma once
// ShmRegion: one allocation of a shared-memory group's memory (ProcessGroup::allocate,
// comm/group_memory.h). Each rank creates its own POSIX object (shm_file.h) and maps every
// peer's, so the all_reduce of a view at the same offset on every rank works on the peers'
// buffers in place (shm_allreduce_direct.h).
// - Made collectively: every rank, the same bytes, the same order (the id is the group's count
//   of allocations). Names and sizes meet in the group's store: a different size is an
//   InvalidArgument naming both, a rank that never comes a TimeoutError naming it, a /dev/shm
//   without room (or left with less than half its free space) a BackendError on every rank, so
//   all fall back alike. Each creator unlinks its name once every rank mapped it.
// - ShmRegions: a group's live regions, found by address, held weakly: a region lives as long
//   as the GroupMemory the user holds (and any op that found it).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/tcp/shm_file.h"
#include "common/timeouts.h"

namespace ddp::rdzv {
class Store;
}

namespace ddp::comm::tcp {

class ShmRegion {
 public:
  struct Setup {
    rdzv::Store* store = nullptr;  // the group's
    int rank = 0;
    int world = 1;
    uint64_t id = 0;
    size_t bytes = 0;
    Millis timeout{0};
  };
  static std::shared_ptr<ShmRegion> create(const Setup& setup);

  uint64_t id() const { return id_; }
  size_t bytes() const { return bytes_; }
  char* base(int rank) const { return files_[static_cast<size_t>(rank)].base(); }
  char* mine() const { return base(rank_); }
  int world() const { return static_cast<int>(files_.size()); }

 private:
  ShmRegion() = default;
  int rank_ = 0;
  uint64_t id_ = 0;
  size_t bytes_ = 0;
  std::vector<ShmFile> files_;  // by rank; this rank's is the one it created
};

// Where an op's buffer lies in the group's memory: every rank's copy of it, and a tag that is
// the same on every rank exactly when they all passed the same region, offset and length.
struct DirectView {
  std::shared_ptr<ShmRegion> region;  // kept alive while the op runs
  std::vector<char*> bufs;            // by rank
  uint64_t tag = 0;                   // never 0
};

class ShmRegions {
 public:
  void add(const std::shared_ptr<ShmRegion>& region);
  // The view of [data, data + bytes) for op `seq`, when that lies inside one live region.
  std::optional<DirectView> find(const void* data, size_t bytes, uint64_t seq) const;
  bool empty() const;

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::weak_ptr<ShmRegion>> regions_;  // expired ones pruned by find
};

}  // namespace ddp::comm::tcp
