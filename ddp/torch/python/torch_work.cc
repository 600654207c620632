#include "ddp/torch/python/torch_work.h"

#include <ATen/core/jit_type.h>

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

void TorchWork::complete(std::exception_ptr error) {
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
