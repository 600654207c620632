#pragma once
// PeerBuffers: the op's buffer on every rank of the host, as the one-pass algorithms reach it:
// mapped into this process (group memory, at the same place on every rank: shm_region.h), or by
// cross-memory attach (shm_cross.h), a chunk at a time through the step's scratch. The passes
// below are written once over it, so the direct and cross-memory algorithms share them.
#include <cstddef>

#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

class PeerBuffers {
 public:
  static PeerBuffers mapped(const ShmChannel& ch, const ShmStep& s);    // s.direct's view
  static PeerBuffers attached(const ShmChannel& ch, const ShmStep& s);  // the buffers peers offered
  // This rank's buffer at `offset` bytes.
  char* own(size_t offset) const;
  // `bytes` (at most chunk_bytes()) at `offset` in peer's buffer: where they lie (mapped), or a
  // copy in the step's scratch (attached), valid until the next read.
  const char* read(int peer, size_t offset, size_t bytes) const;
  void write(int peer, size_t offset, const void* from, size_t bytes) const;
  // The most a pass handles at a time: a slot (the machine's L2 / 4: shm_segment.h), so a chunk
  // is still in cache when it is copied out.
  size_t chunk_bytes() const;

 private:
  PeerBuffers(const ShmChannel& ch, const ShmStep& s) : ch_(ch), s_(s) {}
  const ShmChannel& ch_;
  const ShmStep& s_;
  bool mapped_ = false;
};

// all_reduce: this rank's share (part()) of every rank's buffer, reduced and written into all of them.
void reduce_share(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs);
// reduce_scatter: this rank's block of every rank's input, reduced into its output. The CPU goes
// to any thread waiting for it between chunks: in a hierarchical all_reduce whose steps overlap,
// this rank's step across hosts runs beside this pass, which would otherwise hold the CPU for
// milliseconds while the link idles (with nothing else to run, one syscall per chunk).
void reduce_block(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs);
// all_gather: this rank's input into its block of every rank's output (the buffers are the
// outputs), giving way between chunks as reduce_block does.
void scatter_own(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs);

}  // namespace ddp::comm::tcp
