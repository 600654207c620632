#pragma once
// Checkpoints for the demo job: the model (parameters and buffers), the optimizer's state and
// the number of finished epochs, in one LibTorch archive. save() writes a temporary file beside
// the target and renames it, so a job killed mid-write leaves the previous checkpoint intact.
// Only rank 0 saves; every rank loads (the same file, so optimizer state agrees everywhere).
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>

namespace demo {

void save_checkpoint(const std::string& path, ::torch::nn::Module& model,
                     ::torch::optim::Optimizer& optimizer, int epochs_done);
// Returns the finished epochs, or 0 when there is no file at `path` (model and optimizer
// untouched). A file that is not a checkpoint of this model is an error naming it.
int load_checkpoint(const std::string& path, ::torch::nn::Module& model,
                    ::torch::optim::Optimizer& optimizer);

}  // namespace demo
