#include "common/task_thread.h"

#include <exception>

#include "common/log.h"

namespace ddp {

TaskThread::TaskThread() : thread_([this] { loop(); }) {}

TaskThread::~TaskThread() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  thread_.join();
}

void TaskThread::post(std::function<void()> task) {
  // Notified under the lock: once the task can run (and perhaps let the owner destroy us),
  // this thread no longer touches the members.
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  cv_.notify_one();
}

size_t TaskThread::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size() + running_;
}

void TaskThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and drained
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      logger("common")->error("a task on a TaskThread threw (a bug): {}", e.what());
    } catch (...) {
      logger("common")->error("a task on a TaskThread threw (a bug)");
    }
    task = nullptr;  // captured buffers are released before the task counts as done
    lock.lock();
    --running_;
  }
}

}  // namespace ddp
