#include "bench/cma_floor.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "comm/reduce_kernels.h"
#include "comm/tcp/cross_memory.h"
#include "comm/types.h"
#include "common/machine.h"

namespace ddp::bench {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// What the parent and its two children share (a MAP_SHARED page, made before the fork).
struct Control {
  std::atomic<int32_t> pid[2] = {0, 0};
  std::atomic<int> ready{0};
  std::atomic<int> go{0};     // the repeat the children may start
  std::atomic<int> done{0};   // repeats finished, both children together
  std::atomic<int> error{0};  // the errno of the first refused copy
  std::atomic<int64_t> end_ns[2] = {0, 0};
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

// An anonymous mapping, unmapped on scope exit; MAP_SHARED for the control page, MAP_PRIVATE
// for the buffers (each child's pages become its own when it writes them).
class Mapping {
 public:
  Mapping(size_t bytes, int flags) : bytes_(bytes) {
    ptr_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    if (ptr_ == MAP_FAILED) throw std::runtime_error(std::string("cma floor: mmap: ") + std::strerror(errno));
  }
  ~Mapping() { ::munmap(ptr_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

struct Child {
  int id = 0;
  Control* ctl = nullptr;
  float* buf = nullptr;      // n floats, the same address in both children
  float* scratch = nullptr;  // one chunk, this child's own
  size_t n = 0;
  size_t chunk = 0;  // floats
  int repeats = 0;
  int cpu = 0;
  int wake_fd = -1;  // a byte here wakes the parent (it sleeps, leaving both CPUs to the children)
};

// This child's half: the peer's copy through the scratch, added into its own, written back.
int reduce_half(const Child& c, pid_t peer) {
  const size_t half = c.n / 2;
  const size_t begin = c.id == 0 ? 0 : half, end = c.id == 0 ? half : c.n;
  for (size_t off = begin; off < end; off += c.chunk) {
    const size_t len = std::min(c.chunk, end - off), bytes = len * sizeof(float);
    const auto remote = reinterpret_cast<uint64_t>(c.buf + off);  // the same address in the peer
    if (int e = comm::tcp::cross_read(peer, remote, c.scratch, bytes)) return e;
    comm::combine(c.buf + off, c.scratch, len, comm::DType::kFloat32, comm::ReduceOp::kSum);
    if (int e = comm::tcp::cross_write(peer, c.buf + off, remote, bytes)) return e;
  }
  return 0;
}

void wake(const Child& c) {
  const char byte = 1;
  while (::write(c.wake_fd, &byte, 1) < 0 && errno == EINTR) {
  }
}

// The child's whole life; its exit status: 0 every sum right, 1 a wrong sum, 2 a failed copy
// (its errno in the control page).
[[noreturn]] void run_child(const Child& c) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(c.cpu, &set);
  ::sched_setaffinity(0, sizeof(set), &set);
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // Yama scope 1: let the sibling in
  std::fill(c.buf, c.buf + c.n, 1.0F);                   // this child's own pages from here on
  std::memset(c.scratch, 0, c.chunk * sizeof(float));
  if (c.ctl->ready.fetch_add(1, std::memory_order_acq_rel) == 1) wake(c);
  while (c.ctl->ready.load(std::memory_order_acquire) < 2) std::this_thread::yield();
  pid_t peer = 0;  // the parent stores the second pid after that child may have started
  while ((peer = c.ctl->pid[1 - c.id].load(std::memory_order_acquire)) == 0) std::this_thread::yield();
  for (int r = 1; r <= c.repeats; ++r) {
    while (c.ctl->go.load(std::memory_order_acquire) != r) std::this_thread::yield();
    if (int e = reduce_half(c, peer)) {
      int none = 0;
      c.ctl->error.compare_exchange_strong(none, e);
      ::_exit(2);
    }
    c.ctl->end_ns[c.id].store(now_ns(), std::memory_order_release);
    if (c.ctl->done.fetch_add(1, std::memory_order_acq_rel) == 2 * r - 1) wake(c);
  }
  while (c.ctl->done.load(std::memory_order_acquire) != 2 * c.repeats) std::this_thread::yield();
  // Every element went through `repeats` sums of two equal copies: 2^repeats (inf past 127).
  const float want = std::ldexp(1.0F, c.repeats);
  const bool right = std::all_of(c.buf, c.buf + c.n, [&](float v) { return v == want; });
  ::_exit(right ? 0 : 1);
}

// The children, killed and reaped on every way out that did not reap them.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (pid_t p : pids_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }
  void add(pid_t p) { pids_.push_back(p); }
  // How a child that has ended ended ("exit status 2", "signal 9"), or nothing while both run.
  // Left unreaped (WNOWAIT): a child that ended as it should is reaped and checked by reap().
  std::optional<std::string> ended() const {
    for (pid_t p : pids_) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(p), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == p) {
        return (info.si_code == CLD_EXITED ? "exit status " : "signal ") + std::to_string(info.si_status);
      }
    }
    return std::nullopt;
  }
  // Waits for both: nothing when both exited 0, else how the first that did not ended.
  std::optional<std::string> reap() {
    std::optional<std::string> bad;
    for (size_t i = 0; i < pids_.size(); ++i) {
      int status = 0;
      ::waitpid(pids_[i], &status, 0);
      if (bad || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) continue;
      const std::string who = "process " + std::to_string(i);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
        bad = who + " found a wrong sum";
      } else {
        bad = who + (WIFEXITED(status) ? " ended with exit status " + std::to_string(WEXITSTATUS(status))
                                       : " was killed by signal " + std::to_string(WTERMSIG(status)));
      }
    }
    pids_.clear();
    return bad;
  }

 private:
  std::vector<pid_t> pids_;
};

// Waits, asleep, until `done` holds, or a child has ended while it does not (how it ended). The
// children write a byte to `wake_fd` as they make `done` hold; the timeout is for one that dies.
// A child ends as it should only after the last `done` holds, so that is checked after the child.
template <typename Done>
std::optional<std::string> await(const Children& kids, int wake_fd, Done done) {
  while (!done()) {
    pollfd p{wake_fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0 && (p.revents & POLLIN) != 0) {
      char bytes[16];
      (void)!::read(wake_fd, bytes, sizeof bytes);
    }
    if (auto how = kids.ended(); how && !done()) return how;
  }
  return std::nullopt;
}

// Both ends of a pipe, closed on scope exit (or the write end at once, once the children hold it).
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe(fd) != 0) throw std::runtime_error(std::string("cma floor: pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    close_write();
    ::close(fd[0]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_write() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
};

// A child left early: the kernel refused the copies (not measured here, and why), or anything
// else (a copy that failed otherwise, a process that died), which is an error.
CmaFloor left_early(const Control& ctl, const std::string& how, size_t chunk) {
  const int e = ctl.error.load();
  if (e == EPERM || e == EACCES || e == ENOSYS)
    return {{}, std::string("process_vm_readv/writev: ") + std::strerror(e), chunk};
  if (e != 0)
    throw std::runtime_error(std::string("cma floor: process_vm_readv/writev: ") + std::strerror(e));
  throw std::runtime_error("cma floor: a process ended early (" + how + ")");
}

}  // namespace

size_t cma_chunk_bytes(size_t l2_bytes) {
  if (l2_bytes == 0) return 256 << 10;
  return std::clamp<size_t>(l2_bytes / 4, 64 << 10, 1 << 20);
}

CmaFloor cma_floor(const CmaFloorOptions& o) {
  const size_t n = o.bytes / sizeof(float);
  if (n < 2 || o.repeats < 1) throw std::invalid_argument("cma floor: two floats and one repeat at least");
  const size_t chunk_bytes = o.chunk_bytes ? o.chunk_bytes : cma_chunk_bytes(machine_profile().l2_bytes);
  // Never more than a half (the larger one): a chunk past it would only enlarge the scratch.
  const size_t chunk = std::clamp<size_t>(chunk_bytes / sizeof(float), 1, n - n / 2);
  Mapping shared(sizeof(Control), MAP_SHARED), buf(n * sizeof(float), MAP_PRIVATE),
      scratch(chunk * sizeof(float), MAP_PRIVATE);
  auto* ctl = new (shared.get()) Control{};
  Pipe wake;
  Children kids;
  for (int id = 0; id < 2; ++id) {
    Child c{id,
            ctl,
            static_cast<float*>(buf.get()),
            static_cast<float*>(scratch.get()),
            n,
            chunk,
            o.repeats,
            id == 0 ? o.cpus.first : o.cpus.second,
            wake.fd[1]};
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("cma floor: fork: ") + std::strerror(errno));
    if (pid == 0) run_child(c);
    ctl->pid[id].store(pid, std::memory_order_release);
    kids.add(pid);
  }
  wake.close_write();
  const int fd = wake.fd[0];
  if (auto how = await(kids, fd, [&] { return ctl->ready.load(std::memory_order_acquire) == 2; }))
    return left_early(*ctl, *how, chunk * sizeof(float));
  std::vector<double> samples;
  for (int r = 1; r <= o.repeats; ++r) {
    const int64_t start = now_ns();
    ctl->go.store(r, std::memory_order_release);
    if (auto how = await(kids, fd, [&] { return ctl->done.load(std::memory_order_acquire) == 2 * r; }))
      return left_early(*ctl, *how, chunk * sizeof(float));
    const int64_t end = std::max(ctl->end_ns[0].load(), ctl->end_ns[1].load());
    samples.push_back(static_cast<double>(end - start) / 1e3);
  }
  if (auto bad = kids.reap()) throw std::runtime_error("cma floor: " + *bad);
  return {samples, "", chunk * sizeof(float)};
}

}  // namespace ddp::bench
