#pragma once
// RoundWatcher: a thread that waits for one round's outcome in the launchers' store
// (rendezvous/job_records.h) and, when it is a membership change (kChanged), calls
// on_change(outcome) once, on its own thread (ddp::elastic::Session aborts its group there, so that
// a collective already waiting fails at once instead of at the lost peer's link timeout). Any
// other outcome ends the watch without a call: the launcher stops the worker then.
// - The store is watched through a handle of the watcher's own (Store::clone: a connection of
//   its own for TCPStore and EtcdStore), opened on its thread (a wait on the shared one would
//   hold every other request of the process behind it); stopping interrupts that wait at once
//   (Store::interrupt). A store that cannot be cloned (an adapter of another library's) is
//   waited on in slices of kSlice, so stopping takes at most one slice.
// - The destructor stops and joins the thread; on_change has returned by then if it ran.
// - Errors never leave the thread: a lost store or a refused connection ends the watch, logged.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {
struct RoundOutcome;  // rendezvous/round_outcome.h
}  // namespace ddp::rdzv

namespace ddp::elastic {

class RoundWatcher {
 public:
  static constexpr Millis kSlice{50};
  struct Options {
    std::shared_ptr<rdzv::Store> store;  // the launchers' store
    std::string run_id;                  // the job (DDP_RUN_ID)
    int round = 0;                       // the round whose outcome is watched
    std::function<void(const rdzv::RoundOutcome& outcome)> on_change;
  };
  explicit RoundWatcher(Options options);
  ~RoundWatcher();
  RoundWatcher(const RoundWatcher&) = delete;
  RoundWatcher& operator=(const RoundWatcher&) = delete;

  // Whether on_change ran (or is running).
  bool fired() const;

 private:
  void run() noexcept;
  void watch();
  // The store this thread waits on: its own handle (a clone), else the given one. Null when
  // stopped meanwhile.
  std::shared_ptr<rdzv::Store> open();
  bool stopping() const;

  Options o_;
  mutable std::mutex mu_;
  bool stop_ = false;
  bool fired_ = false;
  std::shared_ptr<rdzv::Store> own_;  // the watcher's own handle, once open
  std::thread thread_;
};

}  // namespace ddp::elastic
