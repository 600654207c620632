#include "comm/tcp/shm_peer_buffers.h"

#include <sched.h>

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"
#include "comm/tcp/shm_cross.h"
#include "comm/tcp/shm_region.h"

namespace ddp::comm::tcp {

PeerBuffers PeerBuffers::mapped(const ShmChannel& ch, const ShmStep& s) {
  PeerBuffers b(ch, s);
  b.mapped_ = true;
  return b;
}

PeerBuffers PeerBuffers::attached(const ShmChannel& ch, const ShmStep& s) { return PeerBuffers(ch, s); }

char* PeerBuffers::own(size_t offset) const {
  if (mapped_) return s_.direct->bufs[static_cast<size_t>(ch_.rank())] + offset;
  return static_cast<char*>(s_.in.data) + offset;
}

const char* PeerBuffers::read(int peer, size_t offset, size_t bytes) const {
  if (mapped_) return s_.direct->bufs[static_cast<size_t>(peer)] + offset;
  read_from_peer(ch_, s_, peer, offset, s_.scratch.data(), bytes);
  return s_.scratch.data();
}

void PeerBuffers::write(int peer, size_t offset, const void* from, size_t bytes) const {
  if (mapped_) {
    copy_bytes(s_.direct->bufs[static_cast<size_t>(peer)] + offset, from, bytes);
  } else {
    write_to_peer(ch_, s_, peer, from, offset, bytes);
  }
}

size_t PeerBuffers::chunk_bytes() const {
  const size_t slot = ch_.geometry().slot_bytes;
  return mapped_ ? slot : std::min(slot, s_.scratch.size());
}

namespace {

// f(offset, count) for each chunk of the elements [first, first + n), a chunk at most
// bufs.chunk_bytes() (one element at least).
template <typename F>
void for_each_chunk(size_t first, size_t n, size_t elem_bytes, const PeerBuffers& bufs, F f) {
  const size_t chunk = std::max<size_t>(1, bufs.chunk_bytes() / elem_bytes);
  for (size_t off = first; off < first + n; off += chunk) f(off, std::min(chunk, first + n - off));
}

}  // namespace

void reduce_share(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs) {
  const DType t = s.in.dtype;
  const size_t es = dtype_size(t);
  const ReduceOp rop = s.ctx.desc.rop;
  const Part me = part(s.in.count, ch.world(), ch.rank());
  for_each_chunk(me.off, me.len, es, bufs, [&](size_t off, size_t n) {
    char* dst = bufs.own(off * es);
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank()) combine(dst, bufs.read(p, off * es, n * es), n, t, rop);
    }
    if (rop == ReduceOp::kAvg) finish_avg(dst, n, t, ch.world());
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank()) bufs.write(p, off * es, dst, n * es);
    }
  });
}

void reduce_block(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs) {
  const Buffer& out = s.out;
  const size_t es = dtype_size(out.dtype);
  const size_t first = static_cast<size_t>(ch.rank()) * out.count * es;  // this rank's block, in bytes
  for_each_chunk(0, out.count, es, bufs, [&](size_t off, size_t m) {
    char* dst = at(out, off);
    const char* own = bufs.own(first + off * es);
    if (dst != own) copy_bytes(dst, own, m * es);
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank()) combine(dst, bufs.read(p, first + off * es, m * es), m, out.dtype, s.ctx.desc.rop);
    }
    if (s.ctx.desc.rop == ReduceOp::kAvg) finish_avg(dst, m, out.dtype, ch.world());
    ::sched_yield();
  });
}

void scatter_own(const ShmChannel& ch, const ShmStep& s, const PeerBuffers& bufs) {
  const Buffer& in = s.in;
  const size_t es = dtype_size(in.dtype);
  const size_t first = static_cast<size_t>(ch.rank()) * in.count * es;  // this rank's block, in bytes
  for_each_chunk(0, in.count, es, bufs, [&](size_t off, size_t m) {
    const char* from = at(in, off);
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank()) {
        bufs.write(p, first + off * es, from, m * es);
      } else if (char* own = bufs.own(first + off * es); own != from) {
        copy_bytes(own, from, m * es);
      }
    }
    ::sched_yield();
  });
}

}  // namespace ddp::comm::tcp
