#pragma once
// TaskThread: one thread that runs posted tasks one at a time, in the order they were posted.
// The gloo backend runs a group's ops on one (so they complete in issue order); the DDP engine
// runs gradient copies and comm hooks on one (so the backward pass never waits on them).
//
// Tasks must not throw: they report errors through their own Work (an escaping exception is
// swallowed and logged as a bug). post() is safe from any thread, tasks included. The
// destructor runs what is still queued (owners first make pending work fail fast), then joins.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ddp {

class TaskThread {
 public:
  TaskThread();
  ~TaskThread() noexcept;
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  void post(std::function<void()> task);
  // Tasks queued or running.
  size_t pending();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddp
