#include "comm/tcp/cross_memory.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <random>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

// The probe word: one per process, its value drawn once.
const uint64_t& probe_word() {
  static const uint64_t word = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;  // never 0
  }();
  return word;
}

int yama_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  return f >> scope ? scope : 0;
}

// One direction, retried while the kernel copies part of the range.
template <typename Call>
int copy_all(size_t bytes, Call call) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = call(done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

static_assert(settings::choices_are(settings::kTcpCma, "auto|on|off"));  // CrossSetting

CrossProbe cross_probe() {
  const uint64_t& word = probe_word();
  return {static_cast<int32_t>(::getpid()), reinterpret_cast<uint64_t>(&word), word};
}

bool allow_cross_memory_peers() {
  if (yama_scope() != 1) return true;
  return ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0;
}

bool cross_reachable(const CrossProbe& peer) {
  if (peer.pid <= 0 || peer.addr == 0) return false;
  uint64_t seen = 0;
  return cross_read(peer.pid, peer.addr, &seen, sizeof seen) == 0 && seen == peer.value;
}

int cross_read(int32_t pid, uint64_t remote, void* local, size_t bytes) {
  return copy_all(bytes, [&](size_t done) {
    iovec l{static_cast<char*>(local) + done, bytes - done};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address in the peer, never dereferenced here
    iovec r{reinterpret_cast<void*>(remote + done), bytes - done};
    return ::process_vm_readv(pid, &l, 1, &r, 1, 0);
  });
}

int cross_write(int32_t pid, const void* local, uint64_t remote, size_t bytes) {
  return copy_all(bytes, [&](size_t done) {
    iovec l{const_cast<char*>(static_cast<const char*>(local)) + done, bytes - done};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address in the peer, never dereferenced here
    iovec r{reinterpret_cast<void*>(remote + done), bytes - done};
    return ::process_vm_writev(pid, &l, 1, &r, 1, 0);
  });
}

}  // namespace ddp::comm::tcp
