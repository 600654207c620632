#include "comm/tcp/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <utility>

#include "common/error.h"
#include "common/fd.h"
#include "common/shm_names.h"

namespace ddp::comm::tcp {
namespace {
constexpr uint64_t kMagic = 0x314d485350444444ull;  // "DDDPSHM1"
constexpr size_t kHeaderBytes = 4096;

size_t control_bytes(int world) {
  size_t b = sizeof(RankControl) * static_cast<size_t>(world);
  return (b + 4095) / 4096 * 4096;
}

// The launcher removes segments its dead workers left by this name: common/shm_names.h.
std::string unique_name() {
  std::random_device rd;
  uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  return shm_names::tcp_segment(::getpid(), r);
}

void* map(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) DDP_THROW_ERRNO("mmap(", name, ", ", bytes, " bytes)");
  return p;
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
  s.bytes_ = g.total_bytes();
  s.name_ = unique_name();
  Fd fd(::shm_open(s.name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) DDP_THROW_ERRNO("shm_open(", s.name_, ")");
  s.owner_ = true;
  if (::ftruncate(fd.get(), static_cast<off_t>(s.bytes_)) != 0) {
    int err = errno;
    ::shm_unlink(s.name_.c_str());
    errno = err;
    DDP_THROW_ERRNO("ftruncate(", s.name_, ", ", s.bytes_, ")");
  }
  // Reserve the pages now: tmpfs allocates on first touch, so a /dev/shm too small for the
  // segment (Docker's default is 64 MiB) would otherwise be a SIGBUS in the middle of a
  // collective instead of this error at set-up.
  if (int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(s.bytes_)); err != 0) {
    if (err != EOPNOTSUPP && err != EINVAL) ::shm_unlink(s.name_.c_str());
    if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
      DDP_THROW(BackendError, "tcp backend: cannot reserve ", s.bytes_,
                " bytes of shared memory for a group of ", g.world, " ranks in /dev/shm (", ::strerror(err),
                "; /dev/shm is too small — Docker's default is 64 MiB: ",
                "run with --shm-size=1g or more, or set DDP_TCP_TRANSPORT=socket)");
    }
    if (err != EOPNOTSUPP && err != EINVAL) {
      errno = err;
      DDP_THROW_ERRNO("posix_fallocate(", s.name_, ", ", s.bytes_, " bytes in /dev/shm)");
    }
    // A file system without fallocate: carry on as before (pages allocated on first touch).
  }
  try {
    s.base_ = map(fd.get(), s.bytes_, s.name_);
  } catch (...) {
    ::shm_unlink(s.name_.c_str());
    throw;
  }
  auto* h = new (s.base_) SegmentHeader();
  h->world = static_cast<uint32_t>(g.world);
  h->depth = static_cast<uint32_t>(g.depth);
  h->slot_bytes = g.slot_bytes;
  h->oneshot_bytes = g.oneshot_bytes;
  for (int r = 0; r < g.world; ++r) new (&s.control(r)) RankControl();
  h->magic.store(kMagic, std::memory_order_release);  // (a fence and a plain store raced, to TSan)
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, int world) {
  ShmSegment s;
  s.name_ = name;
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd) DDP_THROW_ERRNO("shm_open(", name, ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) DDP_THROW_ERRNO("fstat(", name, ")");
  s.bytes_ = static_cast<size_t>(st.st_size);
  if (s.bytes_ < kHeaderBytes)
    DDP_THROW(InvalidArgument, "shared memory ", name, " is too small (", s.bytes_, " bytes)");
  s.base_ = map(fd.get(), s.bytes_, name);
  const SegmentHeader& h = s.header();
  const uint64_t magic = h.magic.load(std::memory_order_acquire);  // before the geometry it publishes
  s.geometry_.world = static_cast<int>(h.world);
  s.geometry_.depth = static_cast<int>(h.depth);
  s.geometry_.slot_bytes = h.slot_bytes;
  s.geometry_.oneshot_bytes = h.oneshot_bytes;
  if (magic != kMagic || s.geometry_.world != world || s.geometry_.total_bytes() != s.bytes_) {
    DDP_THROW(InvalidArgument, "shared memory ", name, " does not hold a tcp-backend segment for ", world,
              " ranks");
  }
  return s;
}

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    owner_ = std::exchange(o.owner_, false);
    unlinked_ = std::exchange(o.unlinked_, false);
    geometry_ = o.geometry_;
  }
  return *this;
}

void ShmSegment::release() noexcept {
  if (owner_) unlink();
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
}

void ShmSegment::unlink() noexcept {
  if (unlinked_ || name_.empty()) return;
  unlinked_ = true;
  ::shm_unlink(name_.c_str());  // ENOENT: another rank was first
}

RankControl& ShmSegment::control(int rank) const {
  auto* base = static_cast<char*>(base_) + kHeaderBytes;
  return reinterpret_cast<RankControl*>(base)[rank];
}

char* ShmSegment::slot(int rank, uint64_t ticket) const {
  auto* data = static_cast<char*>(base_) + kHeaderBytes + control_bytes(geometry_.world);
  const size_t index = static_cast<size_t>(rank) * geometry_.depth + ticket % geometry_.depth;
  return data + index * geometry_.slot_bytes;
}

void ShmSegment::publish(int rank, Counter c, uint64_t value) const {
  counter(rank, c).store(value, std::memory_order_seq_cst);
  SegmentHeader& h = header();
  if (h.waiters.load(std::memory_order_seq_cst) > 0) {
    h.futex.fetch_add(1, std::memory_order_seq_cst);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.futex), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void ShmSegment::sleep(uint32_t seen, Millis timeout) const {
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1'000'000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header().futex), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace ddp::comm::tcp
