#include "ddp/torch/python/torch_work.h"

#include <ATen/core/jit_type.h>

#include "common/error.h"

namespace ddp::torch {

TorchWork::TorchWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                     std::vector<at::Tensor> keep_alive)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

TorchWork::~TorchWork() = default;

void TorchWork::track(const c10::intrusive_ptr<TorchWork>& self, std::vector<comm::WorkPtr> works,
                      std::function<void()> on_success) {
  self->on_success_ = std::move(on_success);
  if (works.empty()) {
    self->complete(nullptr);
    return;
  }
  self->pending_ = works.size();
  for (auto& w : works) {
    // The callback holds the TorchWork (and so every tensor) until our Work is done; our Work
    // drops its callbacks once they ran, so nothing stays in a cycle.
    w->then([self](comm::Work& done) {
      if (auto error = done.exception()) {
        std::lock_guard<std::mutex> lock(self->error_mu_);
        if (!self->first_error_) self->first_error_ = error;
      }
      if (--self->pending_ == 0) {
        std::exception_ptr error;
        {
          std::lock_guard<std::mutex> lock(self->error_mu_);
          error = self->first_error_;
        }
        self->complete(error);
      }
    });
  }
}

namespace {
// Our TimeoutError, worded as c10d words a timeout ("Timed out ..."), still a TimeoutError.
std::exception_ptr as_c10d_timeout(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(
        TimeoutError("ddp backend: Timed out in " + e.message(), __FILE__, __LINE__));
  } catch (...) {
    return error;
  }
}
}  // namespace

int TorchWork::sourceRank() const {
  if (!source_) return c10d::Work::sourceRank();  // c10d's error: not a recv from any source
  TORCH_CHECK(*source_ >= 0, "ddp backend: sourceRank() of a recv from any source that did not complete");
  return *source_;
}

void TorchWork::complete(std::exception_ptr error) {
  if (error) error = as_c10d_timeout(error);
  if (!error && on_success_) {
    try {
      on_success_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  on_success_ = nullptr;
  keep_alive_.clear();
  // The future first: whoever wait() wakes may read it at once.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

}  // namespace ddp::torch
