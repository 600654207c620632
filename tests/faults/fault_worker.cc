// ddp_fault_worker: the worker of the fault matrix (tests/faults) and of `make soak`.
//   ddp_fault_worker --backend tcp|gloo|mpi --dir D [--iters N] [--seconds S] [--count C]
//                    [--close-mid-frame-rank R] [--init-method URL] [--ddp 1]
//                    [--stall-in-backward-rank R]
//   ddp_fault_worker --serve-store PORT        (hosts a TCPStore on 127.0.0.1:PORT until killed)
// Joins the default group (env:// as under ddp-launch, or --init-method) and runs all_reduce of C
// floats in a loop (N iterations, or for S seconds as rank 0 counts them; neither: until killed),
// checking every result; with --ddp 1 each iteration is also a checked DDP engine step. After the
// first op it writes D/ready.<rank> (its pid), so a driver knows every rank is inside the loop
// before it injects a fault (the faults: Args). The last line of a good run names the attempt.
// Exit codes: 0 every result right; 3 a ddp::Error, printed as "fault_worker rank R: <kind>:
// <message>" (then _Exit: no teardown); 4 a wrong result (never reported as success); 2 usage.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/init.h"
#include "common/error.h"
#include "common/socket.h"
#include "ddp/engine.h"
#include "rendezvous/tcp_store.h"
#include "test_env.h"

namespace {

struct Args {
  std::string backend = "tcp";
  std::string dir = ".";
  std::string init_method = "env://";
  long iters = 0;
  double seconds = 0;
  size_t count = 1 << 16;
  // Rank R of --close-mid-frame-rank, once every rank is ready, writes half a frame to every peer
  // socket, shuts them down and waits to be killed: a peer that closes mid-message.
  int close_rank = -1;
  int serve_port = -1;
  // Rank R of --stall-in-backward-rank (--ddp 1; first attempt: TORCHELASTIC_RESTART_COUNT unset
  // or 0) marks half its gradients ready in its third step (their buckets' all_reduce in flight),
  // writes D/in_backward.<rank> (its pid) and waits to be killed: a peer lost mid-backward.
  int stall_rank = -1;
  bool ddp = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--backend")
      a.backend = v;
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--iters")
      a.iters = std::stol(v);
    else if (k == "--count")
      a.count = std::stoul(v);
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--close-mid-frame-rank")
      a.close_rank = std::stoi(v);
    else if (k == "--serve-store")
      a.serve_port = std::stoi(v);
    else if (k == "--init-method")
      a.init_method = v;
    else if (k == "--ddp")
      a.ddp = v == "1";
    else if (k == "--stall-in-backward-rank")
      a.stall_rank = std::stoi(v);
    else
      throw std::invalid_argument("unknown flag " + k);
  }
  return a;
}

const char* kind(const ddp::Error& e) {
  if (dynamic_cast<const ddp::TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const ddp::NetworkError*>(&e)) return "NetworkError";
  if (dynamic_cast<const ddp::StoreError*>(&e)) return "StoreError";
  if (dynamic_cast<const ddp::BackendError*>(&e)) return "BackendError";
  return "Error";
}

int serve_store(int port) {
  ddp::rdzv::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.is_server = true;
  ddp::rdzv::TCPStore store(o);
  std::printf("store serving on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  for (;;) ::pause();
}

// The port of the store this process talks to, so its connection is left alone.
int store_port() {
  if (auto s = ddp::test_env::get("DDP_STORE")) return ddp::net::parse_endpoint(*s).port;
  return static_cast<int>(ddp::test_env::get_int_or("MASTER_PORT", -1));
}

int peer_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

// Every connected TCP socket of this process but the store's: the backend's peer connections.
std::vector<int> peer_sockets() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int skip = store_port();
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd <= 2 || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, listening = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening) continue;
    const int port = peer_port(fd);
    if (port > 0 && port != skip) out.push_back(fd);
  }
  ::closedir(d);
  return out;
}

// Once every rank is inside its loop (their ready files: a bad frame fails a peer's group at
// once, even in an op that needs nothing from us, so injecting earlier could stop a peer
// before it says it is ready).
[[noreturn]] void close_mid_frame(const Args& a, int rank, int world) {
  for (int r = 0, tries = 0; r < world && tries < 6000; ++tries) {
    if (std::filesystem::exists(a.dir + "/ready." + std::to_string(r))) {
      ++r;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const char half[5] = {'\x01', '\x00', '\x00', '\x00', '\x2a'};
  for (int fd : peer_sockets()) {
    (void)!::write(fd, half, sizeof half);
    ::shutdown(fd, SHUT_RDWR);
  }
  std::fprintf(stderr, "fault_worker rank %d: closed its peer sockets mid-frame\n", rank);
  for (;;) ::pause();
}

// D/ready.<rank> holding this pid, whole when it appears (written aside, then renamed).
void say_ready(const Args& a, int rank) {
  const std::string path = a.dir + "/ready." + std::to_string(rank);
  std::ofstream(path + ".tmp") << ::getpid() << "\n";
  std::filesystem::rename(path + ".tmp", path);
}

// Stands still in the middle of backward until killed, having said where (D/in_backward.<rank>).
[[noreturn]] void stall_in_backward(const Args& a, int rank) {
  const std::string path = a.dir + "/in_backward." + std::to_string(rank);
  std::ofstream(path + ".tmp") << ::getpid() << "\n";
  std::filesystem::rename(path + ".tmp", path);
  std::fprintf(stderr, "fault_worker rank %d: standing still in backward, buckets in flight\n", rank);
  for (;;) ::pause();
}

// Rank 0's clock decides for everyone (a broadcast), so every rank runs the same ops.
bool keep_going(ddp::comm::ProcessGroup& pg, std::chrono::steady_clock::time_point start, double seconds) {
  int32_t go =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds ? 1 : 0;
  pg.broadcast(ddp::comm::view(&go, 1))->wait();
  return go != 0;
}

// A DDP engine over four parameters (sizes that make several buckets), for --ddp.
class DdpSteps {
 public:
  explicit DdpSteps(const ddp::comm::ProcessGroupPtr& pg) : rank_(pg->rank()), world_(pg->size()) {
    ddp::EngineOptions o;
    o.first_bucket_cap_mb = 0.05;  // several buckets, launched as they fill
    o.bucket_cap_mb = 0.1;
    engine_ = std::make_unique<ddp::Engine>(pg, o);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      data_[i].assign(kSizes[i], 1.0f);
      grad_[i].assign(kSizes[i], 0.0f);
      std::string name(1, 'p');  // (not "p" + ...: gcc 12's -Wrestrict false positive)
      name.append(std::to_string(i));
      engine_->register_param({name,
                               ddp::comm::view(data_[i].data(), data_[i].size()),
                               ddp::comm::view(grad_[i].data(), grad_[i].size()),
                               {}});
    }
    engine_->finalize();
  }

  // One step: every rank's gradient of parameter i is rank + 1 + i; the average is checked.
  // `stall`: after half the gradients, the caller's stall() instead of the rest.
  bool step(const std::function<void()>& stall = {}) {
    engine_->pre_forward();
    for (size_t i = kSizes.size(); i-- > 0;) {
      for (auto& g : grad_[i]) g = static_cast<float>(rank_ + 1 + static_cast<int>(i));
      engine_->mark_ready(i);
      if (stall && i == kSizes.size() / 2) stall();
    }
    engine_->finish_backward();
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const float want = static_cast<float>(world_ + 1) / 2.0f + static_cast<float>(i);
      const std::vector<float>& g = grad_[i];
      for (size_t j = 0; j < g.size(); j += 331) {
        if (g[j] != want) {
          std::fprintf(stderr, "fault_worker rank %d: WRONG DDP GRADIENT p%zu[%zu]: %g, not %g\n", rank_, i,
                       j, g[j], want);
          return false;
        }
      }
    }
    return true;
  }

 private:
  static constexpr std::array<size_t, 4> kSizes = {1000, 40000, 300, 20000};
  int rank_, world_;
  std::array<std::vector<float>, 4> data_, grad_;
  std::unique_ptr<ddp::Engine> engine_;
};

int run(const Args& a) {
  ddp::InitOptions init;
  init.backend = a.backend;
  init.init_method = a.init_method;
  auto pg = ddp::init_process_group(init);
  const int rank = pg->rank(), world = pg->size();
  std::vector<float> buf(a.count);
  const float want = static_cast<float>(world * (world + 1) / 2);
  std::unique_ptr<DdpSteps> ddp_steps;
  if (a.ddp) ddp_steps = std::make_unique<DdpSteps>(pg);
  const std::string attempt = ddp::test_env::get_or("TORCHELASTIC_RESTART_COUNT", "0");
  const auto start = std::chrono::steady_clock::now();
  long it = 0;
  for (bool go = true; go && (a.iters == 0 || it < a.iters); ++it) {
    for (auto& x : buf) x = static_cast<float>(rank + 1);
    pg->all_reduce(ddp::comm::view(buf.data(), buf.size()))->wait();
    for (size_t i = 0; i < buf.size(); i += 997) {
      if (buf[i] != want) {
        std::fprintf(stderr, "fault_worker rank %d: WRONG RESULT at %zu: %g, not %g\n", rank, i, buf[i],
                     want);
        return 4;
      }
    }
    const bool stall = rank == a.stall_rank && it == 2 && attempt == "0";
    if (ddp_steps && !ddp_steps->step(stall ? std::function<void()>([&] { stall_in_backward(a, rank); })
                                            : std::function<void()>()))
      return 4;
    if (it == 0) say_ready(a, rank);
    if (rank == a.close_rank) close_mid_frame(a, rank, world);
    if (a.seconds > 0) go = keep_going(*pg, start, a.seconds);
  }
  std::printf("fault_worker rank %d: %ld iterations%s, every result right (attempt %s, world %d)\n", rank, it,
              a.ddp ? " (all_reduce + DDP step)" : "", attempt.c_str(), world);
  ddp_steps.reset();
  ddp::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_fault_worker: %s\n", e.what());
    return 2;
  }
  try {
    if (a.serve_port >= 0) return serve_store(a.serve_port);
    return run(a);
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "fault_worker rank %s: %s: %s\n",
                 ddp::test_env::get_or("RANK", ddp::test_env::get_or("OMPI_COMM_WORLD_RANK", "?")).c_str(),
                 kind(e), e.message().c_str());
    // A failed rank leaves at once, its broken group and store still up (as a real job's failed
    // rank does): no teardown that waits on dead peers, and nothing at exit (a leak check of
    // threads never joined, under ASan) can change the exit code the matrix checks.
    std::fflush(stderr);
    std::_Exit(3);
  }
}
