#include "comm/gloo/op_worker.h"

namespace ddp::comm::gloo_backend {

OpWorker::OpWorker() : thread_([this] { loop(); }) {}

OpWorker::~OpWorker() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OpWorker::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
}

size_t OpWorker::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

void OpWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;  // release captured buffers before reporting idle
    lock.lock();
    --running_;
  }
}

}  // namespace ddp::comm::gloo_backend
