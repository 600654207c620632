#pragma once
// Checkpoints for the demo job, in a directory: the model (parameters and buffers), the
// optimizer's state and where training stands (Progress), one LibTorch archive per file
// "step-<global step>.ckpt"; the newest is the one with the highest step.
// save() is atomic and durable: it writes a temporary file in the same directory, fsyncs it,
// renames it over the final name and fsyncs the directory, so a job killed at any moment leaves
// whole checkpoints only (and perhaps a ".tmp" file, which load ignores). Only rank 0 saves;
// every rank loads, before the model is wrapped in DDP (loading replaces tensors' storage). A file
// that is not a whole checkpoint (torn, truncated, garbage) is skipped for the previous one and
// reported in `skipped`; when every file is unreadable it is an InvalidArgument naming them all
// (starting over would silently discard the job's progress). A whole checkpoint that does not fit
// the model or the optimizer is an InvalidArgument naming the file: the job is not the one that
// wrote it. Not thread-safe; one saver per directory.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace demo {

// Where training stands after the last optimizer step a checkpoint holds.
struct Progress {
  int64_t step = 0;           // optimizer steps since the job began (names the file)
  int64_t epoch = 1;          // the epoch in progress, from 1
  int64_t epoch_step = 0;     // batches of `epoch` trained by each rank (0: it has not begun)
  int64_t epoch_samples = 0;  // samples of `epoch` trained, all ranks together
  int64_t world_size = 1;     // ranks that trained them
};

struct Loaded {
  std::string path;
  Progress progress;
  std::vector<std::string> skipped;  // "<path>: <why>" for each newer file that was not whole
};

// The file save() writes for `step` in `dir`.
std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes `dir`/step-<progress.step>.ckpt atomically (creating `dir`), then keeps only the newest
// `keep` (>= 1) checkpoints. Returns the path. SystemError naming the path when a write fails.
std::string save_checkpoint(const std::string& dir, ::torch::nn::Module& model,
                            ::torch::optim::Optimizer& optimizer, const Progress& progress, int keep = 2);

// The newest whole checkpoint in `dir`, loaded into `model` and `optimizer`; nullopt (both
// untouched) when `dir` is empty or holds no checkpoint.
std::optional<Loaded> load_newest_checkpoint(const std::string& dir, ::torch::nn::Module& model,
                                             ::torch::optim::Optimizer& optimizer);

}  // namespace demo
