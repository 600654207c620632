#pragma once
// TaskThread: one thread that runs posted tasks in the order they were posted — the engine's
// bucket thread, where gradient copies and comm hooks run so the caller's backward pass never
// waits on them.
//
// Tasks must not throw: they report errors through their own Work (an escaping exception is
// swallowed and logged as a bug). post() is safe from any thread, tasks included. The
// destructor runs what is still queued, then joins.
#include <condition_variable>
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

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddp
