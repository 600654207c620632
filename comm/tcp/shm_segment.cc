#include "comm/tcp/shm_segment.h"

#include <linux/futex.h>
#include <sys/syscall.h>

#include <climits>
#include <new>

#include "common/error.h"

namespace ddp::comm::tcp {
namespace {
constexpr uint64_t kSegmentMagic = 0x314d485350444444ull;  // "DDDPSHM1"
constexpr size_t kHeaderBytes = 4096;

size_t control_bytes(int world) {
  size_t b = sizeof(RankControl) * static_cast<size_t>(world);
  return (b + 4095) / 4096 * 4096;
}

}  // namespace

size_t slot_bytes_for_l2(size_t l2_bytes) {
  constexpr size_t kMin = size_t{64} << 10, kMax = size_t{256} << 10;
  if (l2_bytes == 0) return kMax;
  size_t slot = kMin;
  while (slot * 2 <= l2_bytes / 4 && slot * 2 <= kMax) slot *= 2;
  return slot;
}

size_t ShmGeometry::total_bytes() const {
  return kHeaderBytes + control_bytes(world) + static_cast<size_t>(world) * depth * slot_bytes;
}

ShmSegment ShmSegment::create(const ShmGeometry& g) {
  ShmSegment s;
  s.geometry_ = g;
  s.file_ = ShmFile::create(g.total_bytes(), detail::str("for a group of ", g.world, " ranks"));
  auto* h = new (s.file_.base()) SegmentHeader();
  h->world = static_cast<uint32_t>(g.world);
  h->depth = static_cast<uint32_t>(g.depth);
  h->slot_bytes = g.slot_bytes;
  h->oneshot_bytes = g.oneshot_bytes;
  for (int r = 0; r < g.world; ++r) new (&s.control(r)) RankControl();
  h->magic.store(kSegmentMagic, std::memory_order_release);  // (a fence and a plain store raced, to TSan)
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, int world) {
  ShmSegment s;
  s.file_ = ShmFile::open(name);
  if (s.file_.bytes() < kHeaderBytes)
    DDP_THROW(InvalidArgument, "shared memory ", name, " is too small (", s.file_.bytes(), " bytes)");
  const SegmentHeader& h = s.header();
  const uint64_t magic = h.magic.load(std::memory_order_acquire);  // before the geometry it publishes
  s.geometry_.world = static_cast<int>(h.world);
  s.geometry_.depth = static_cast<int>(h.depth);
  s.geometry_.slot_bytes = h.slot_bytes;
  s.geometry_.oneshot_bytes = h.oneshot_bytes;
  if (magic != kSegmentMagic || s.geometry_.world != world || s.geometry_.total_bytes() != s.file_.bytes()) {
    DDP_THROW(InvalidArgument, "shared memory ", name, " does not hold a tcp-backend segment for ", world,
              " ranks");
  }
  return s;
}

RankControl& ShmSegment::control(int rank) const {
  auto* base = file_.base() + kHeaderBytes;
  return reinterpret_cast<RankControl*>(base)[rank];
}

char* ShmSegment::slot(int rank, uint64_t ticket) const {
  auto* data = file_.base() + kHeaderBytes + control_bytes(geometry_.world);
  const size_t index = static_cast<size_t>(rank) * geometry_.depth + ticket % geometry_.depth;
  return data + index * geometry_.slot_bytes;
}

void ShmSegment::announce(int rank, const CrossProbe& probe) const {
  RankControl& c = control(rank);
  c.probe_addr.store(probe.addr, std::memory_order_relaxed);
  c.probe_value.store(probe.value, std::memory_order_relaxed);
  c.pid.store(probe.pid, std::memory_order_release);
}

CrossProbe ShmSegment::probe_of(int rank) const {
  const RankControl& c = control(rank);
  CrossProbe p;
  p.pid = c.pid.load(std::memory_order_acquire);
  p.addr = c.probe_addr.load(std::memory_order_relaxed);
  p.value = c.probe_value.load(std::memory_order_relaxed);
  return p;
}

void ShmSegment::publish(int rank, Counter c, uint64_t value) const {
  counter(rank, c).store(value, std::memory_order_seq_cst);
  SegmentHeader& h = header();
  if (h.waiters.load(std::memory_order_seq_cst) > 0) futex_wake_all(h.futex);
}

void ShmSegment::wake() const { futex_wake_all(header().futex); }

void ShmSegment::sleep(uint32_t seen, Millis timeout) const { futex_sleep(header().futex, seen, timeout); }

void futex_wake_all(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_sleep(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::microseconds timeout) {
  const auto us = timeout.count();
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>((us % 1'000'000) * 1000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace ddp::comm::tcp
