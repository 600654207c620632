#pragma once
// SocketEngine: tagged, asynchronous messages over the group's TCP mesh, moved by one progress
// thread (poll over every peer socket and an eventfd), or by the thread that waits (Driver).
// - send/recv post an op and return; its Work finishes when the bytes reached the kernel (send)
//   or the buffer (recv). Matching: mailbox.h. Every op ends by its deadline (TimeoutError
//   naming it), after which its buffer is not touched.
// - A peer that closes after a goodbye fails only the ops that need it; one that closes without,
//   breaks the wire format (wire_header.h) or exceeds Options::max_unexpected_bytes fails the
//   group (GroupHealth, which several engines may share): every pending and later op names it.
// - An aborted group fails every pending op with Aborted once the thread is woken (interrupt());
//   a message partly written is finished from a copy, so the stream stays whole for goodbyes.
// Thread-safe: any thread may post; nothing escapes the progress thread; Works finish unlocked.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/wire_header.h"
#include "comm/work.h"
#include "common/fd.h"

namespace ddp::comm::tcp {

class SocketEngine {
 public:
  struct Options {
    int rank = 0;
    std::string group = "world";
    std::vector<std::string> peer_names;  // "rank 1 (pid 42 on host)", for errors
    // Per peer: bytes of messages that arrived before their recv, buffered at most.
    uint64_t max_unexpected_bytes = kDefaultMaxUnexpectedBytes;
    // While *blocked > 0 (a thread waits on one of the group's collectives) the progress thread
    // polls its sockets without sleeping, yielding the core each pass, until `poll` has passed
    // since it last moved anything; otherwise it sleeps in poll(2). Null or 0: always sleeps.
    const std::atomic<int>* blocked = nullptr;
    std::chrono::microseconds poll{0};
    // TCP_NOTSENT_LOWAT on every connection (0: the kernel's default, no limit): sendmsg takes
    // no more than this beyond what the peer's window lets go at once, so one call never queues
    // megabytes that later leave at the peer's pace (see docs/tcp.md, "Unsent bytes").
    size_t notsent_lowat = 0;
  };
  // fds[r]: the connection to rank r (empty for this rank).
  SocketEngine(Options options, std::vector<Fd> fds, GroupHealth* health);
  ~SocketEngine();
  // Says goodbye to every peer (after flushing what is queued, bounded), stops the progress
  // thread and fails every pending op; later posts fail at once. Idempotent.
  void shutdown() noexcept;
  // Wakes the progress thread, which then follows the group's health at once (fails what is
  // pending once the health records a lost peer or an abort). Any thread; never blocks.
  void interrupt() noexcept { wake(); }
  SocketEngine(const SocketEngine&) = delete;
  SocketEngine& operator=(const SocketEngine&) = delete;

  void send(int peer, Channel ch, int64_t tag, const void* data, size_t bytes, const Deadline& deadline,
            const WorkPtr& work, std::string label);
  void recv(int peer, Channel ch, int64_t tag, void* data, size_t bytes, const Deadline& deadline,
            const WorkPtr& work, std::string label);
  // A recv from whichever peer's message for (ch, tag) comes first; *source names that peer
  // before the Work finishes. A peer's own recvs for the key take its messages before it; of
  // messages already buffered, the lowest peer's is taken. Fails when no peer is left.
  void recv_any(Channel ch, int64_t tag, void* data, size_t bytes, const Deadline& deadline,
                const WorkPtr& work, std::string label, std::shared_ptr<int> source);
  // While a Hold lives the progress thread writes nothing: messages posted under it leave
  // together, in as few sendmsg calls (and small ones in as few TCP segments) as fit. For a few
  // posts in a row, never across a wait.
  class Hold {
   public:
    explicit Hold(SocketEngine& engine);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    SocketEngine& engine_;
  };
  // The calling thread drives the engine itself. While a Driver lives the progress thread
  // leaves the sockets alone (it sleeps, watching deadlines) and posts wake nobody; drive(work)
  // polls the sockets and moves the bytes on the calling thread until `work` finishes or
  // `until` passes. A small message's round trip is then the network's, with no thread
  // hand-off on either side (each would cost a thread wake-up).
  // release() (or the destructor) hands the sockets back, waking the progress thread when
  // anything is still in flight. Used by one thread; Drivers may coexist.
  class Driver {
   public:
    explicit Driver(SocketEngine& engine);
    ~Driver() { release(); }
    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;
    // True when `work` completed; false once `until` passed (the Driver still holds).
    bool drive(Work& work, Clock::time_point until);
    void release() noexcept;

   private:
    SocketEngine* engine_;  // null once released
  };

 private:
  struct SendOp;
  struct Peer;
  struct AnyRecv;
  using Done = std::vector<std::pair<WorkPtr, std::exception_ptr>>;  // = Completions (mailbox.h)
  using ErrorFor = std::function<std::exception_ptr(const std::string& label)>;

  const std::string& name_of(int p) const { return options_.peer_names[static_cast<size_t>(p)]; }
  void loop() noexcept;
  void run_loop(Done& done);
  // Under mu_: the poll set (the wake fd first when `wake_fd`; each live peer's socket, writable
  // too when it has something to send and no Hold lives).
  void gather(bool wake_fd, std::vector<pollfd>& fds, std::vector<int>& ranks) const;
  // Reads and writes what poll(2) reported (from fds[first] on); the caller holds io_mu_.
  void move_bytes(const std::vector<pollfd>& fds, const std::vector<int>& ranks, size_t first, Done& done);
  bool in_flight() const;  // under mu_: a send queued or a recv waiting
  void wake_unless_driven();
  void fail_engine(Done& done, const std::string& why) noexcept;
  void wake();
  int next_timeout_ms();
  bool polling(Clock::time_point last_moved) const;
  void on_readable(int p, Done& done);
  bool read_header(int p, Done& done);
  bool read_payload(int p, Done& done);
  // Up to `want` bytes into dst: from what an earlier read brought ahead, else one recvmsg that
  // also brings up to kReadAhead bytes beyond them (a small message's header and payload, and
  // the next one's, in one system call), or a plain recv for a large piece. recv's result;
  // `drained` when the socket had less than asked (nothing more to read until poll says so).
  ssize_t pull(Peer& peer, char* dst, size_t want, bool& drained);
  // After a read: whether reading again may find anything (not when the socket was drained
  // and nothing is left read ahead: that read would only say EAGAIN).
  static bool more_to_read(const Peer& peer, bool drained);
  void on_writable(int p, Done& done);
  void expire(Done& done);
  // Under mu_: a header for `key` arrived from p with no recv of p's own for it: the first
  // recv_any waiting for the key, if any, becomes p's.
  void claim_for_any(int p, const std::pair<uint8_t, int64_t>& key);
  void fail_any(const ErrorFor& err, Done& done);  // under mu_: every waiting recv_any
  void lose_peer(int p, const std::string& why, Done& done);
  void close_peer(int p, Done& done);  // EOF after goodbye
  void fail_ops(Peer& peer, const ErrorFor& err, Done& done);
  void fail_all(Done& done, const std::string& reason);
  // Under mu_: every pending operation fails with the group's (aborted) failure; partly written
  // messages are finished from a copy of their bytes (as expire() does).
  void abort_all(Done& done);
  // Under mu_: once the shared health records a lost peer (seen by this engine or another) or
  // an abort, fails what is still pending here.
  void follow_health(Done& done);
  static void finish_all(Done& done);

  Options options_;
  GroupHealth* health_;
  std::vector<std::unique_ptr<Peer>> peers_;  // one per connection
  std::deque<AnyRecv> any_;                   // recv_any ops no message has come for yet
  Fd wake_fd_;
  std::mutex mu_;
  bool stop_ = false;
  bool followed_ = false;        // follow_health acted
  int held_ = 0;                 // live Holds
  std::atomic<int> drivers_{0};  // live Drivers (the progress thread leaves the sockets to them)
  // Serializes socket I/O and the reader state between the progress thread and Drivers.
  std::mutex io_mu_;
  std::thread thread_;
};

}  // namespace ddp::comm::tcp
