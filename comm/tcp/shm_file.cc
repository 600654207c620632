#include "comm/tcp/shm_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <utility>

#include "common/error.h"
#include "common/fd.h"
#include "common/settings.h"
#include "common/shm_names.h"

namespace ddp::comm::tcp {
namespace {

// The launcher removes objects its dead workers left by this name: common/shm_names.h.
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

// Tmpfs allocates on first touch, so a /dev/shm too small for the object (Docker's default is
// 64 MiB) would otherwise be a SIGBUS in the middle of a collective instead of an error here.
void reserve(int fd, size_t bytes, const std::string& name, const std::string& purpose) {
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err == 0 || err == EOPNOTSUPP || err == EINVAL) return;  // no fallocate: pages on first touch
  if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
    DDP_THROW(BackendError, "tcp backend: cannot reserve ", bytes, " bytes of shared memory ", purpose,
              " in /dev/shm (", ::strerror(err), "; /dev/shm is too small — Docker's default is 64 MiB: ",
              "run with --shm-size=1g or more, or set ", settings::kTcpTransport.name, "=socket)");
  }
  errno = err;
  DDP_THROW_ERRNO("posix_fallocate(", name, ", ", bytes, " bytes in /dev/shm)");
}

}  // namespace

ShmFile ShmFile::create(size_t bytes, const std::string& purpose) {
  ShmFile f;
  f.name_ = unique_name();
  f.bytes_ = bytes;
  Fd fd(::shm_open(f.name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) DDP_THROW_ERRNO("shm_open(", f.name_, ")");
  f.owner_ = true;  // from here on, f's destructor unlinks the name
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    DDP_THROW_ERRNO("ftruncate(", f.name_, ", ", bytes, ")");
  }
  reserve(fd.get(), bytes, f.name_, purpose);
  f.base_ = map(fd.get(), bytes, f.name_);
  return f;
}

ShmFile ShmFile::open(const std::string& name) {
  ShmFile f;
  f.name_ = name;
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd) DDP_THROW_ERRNO("shm_open(", name, ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) DDP_THROW_ERRNO("fstat(", name, ")");
  f.bytes_ = static_cast<size_t>(st.st_size);
  if (f.bytes_ > 0) f.base_ = map(fd.get(), f.bytes_, name);
  return f;
}

ShmFile::~ShmFile() { release(); }

ShmFile::ShmFile(ShmFile&& o) noexcept { *this = std::move(o); }

ShmFile& ShmFile::operator=(ShmFile&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    owner_ = std::exchange(o.owner_, false);
    unlinked_ = std::exchange(o.unlinked_, false);
  }
  return *this;
}

void ShmFile::release() noexcept {
  if (owner_) unlink();
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
}

void ShmFile::unlink() noexcept {
  if (unlinked_ || name_.empty()) return;
  unlinked_ = true;
  ::shm_unlink(name_.c_str());
}

}  // namespace ddp::comm::tcp
