#pragma once
// EtcdWatch: the changes to a key, or a range of keys, from a revision on, read from etcd's
// streamed /v3/watch (one HTTP connection of its own per watch).
// - Events come in revision order, none missed and none twice: when the member it reads from
//   is lost (killed, or cut off from its leader), the watch opens again on another member from
//   the revision after the last event it delivered.
// - next(deadline) blocks until events come; an empty batch when the deadline passes. Etcd
//   unreachable on every member until then: NetworkError naming them; a watch etcd cancels for
//   another reason (permission): StoreError. A start revision etcd compacted away: a batch with
//   `compacted` set, and nothing more (read the keys again, watch from that read's revision).
// - Any thread, noexcept: cancel() makes the next() blocked now, and every later one, throw a
//   NetworkError; wake() makes the next() blocked now (or the next one) return at once.
// The watch shares the client. next() from one thread at a time.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "rendezvous/etcd_response.h"

namespace ddp::rdzv {

class EtcdClient;
class EtcdStream;

struct EtcdWatchRequest {
  std::string key;
  std::string range_end;        // empty: the key alone; etcd::prefix_end(key): every key under it
  int64_t start_revision = 0;   // 0: changes from now on
  std::string strip_prefix;     // taken off the events' keys (a store's prefix)
  bool deletions_only = false;  // etcd's NOPUT filter: a put sends no event
};

struct EtcdWatchBatch {
  std::vector<etcd::Event> events;
  bool compacted = false;
};

class EtcdWatch {
 public:
  // Nothing is sent until the first next().
  EtcdWatch(std::shared_ptr<EtcdClient> client, EtcdWatchRequest request);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  EtcdWatchBatch next(const Deadline& deadline);
  void cancel() noexcept;
  void wake() noexcept;
  // The revision the next event will have at least (0 before the stream started from "now").
  int64_t next_revision() const { return next_revision_; }

 private:
  bool ensure_stream(const Deadline& deadline);
  // Handles one chunk; true when it ends next() with `out`.
  bool on_chunk(const etcd::WatchResponse& r, EtcdWatchBatch* out);
  void lost(const std::string& why);
  [[noreturn]] void unreachable() const;

  std::shared_ptr<EtcdClient> client_;
  EtcdWatchRequest request_;
  int64_t next_revision_ = 0;
  size_t member_ = 0;
  bool created_ = false;
  bool reauthenticated_ = false;
  bool compacted_ = false;
  Deadline create_by_;               // the stream must be created by then, or the member is skipped
  std::vector<std::string> errors_;  // per member: what went wrong last, for unreachable()
  size_t failures_in_a_row_ = 0;
  std::string token_;
  std::mutex mu_;  // guards stream_ against cancel()
  std::unique_ptr<EtcdStream> stream_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> woken_{false};
};

}  // namespace ddp::rdzv
