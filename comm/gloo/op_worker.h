#pragma once
// OpWorker: one thread that runs a group's operations one at a time, in the order they were
// posted, so ops complete in issue order (the ProcessGroup contract). Tasks must not throw
// (the backend wraps each op so failures finish its Work instead). The destructor runs what is
// still queued (the owner first makes pending ops fail fast) and joins.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ddp::comm::gloo_backend {

class OpWorker {
 public:
  using Task = std::function<void()>;

  OpWorker();
  ~OpWorker() noexcept;
  OpWorker(const OpWorker&) = delete;
  OpWorker& operator=(const OpWorker&) = delete;

  void post(Task task);
  // Tasks queued or running.
  size_t pending();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddp::comm::gloo_backend
