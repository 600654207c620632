#include "examples/checkpoint.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdio>
#include <filesystem>

#include "common/error.h"

namespace demo {

void save_checkpoint(const std::string& path, ::torch::nn::Module& model,
                     ::torch::optim::Optimizer& optimizer, int epochs_done) {
  ::torch::serialize::OutputArchive archive, model_part, optim_part;
  model.save(model_part);
  optimizer.save(optim_part);
  archive.write("model", model_part);
  archive.write("optimizer", optim_part);
  archive.write("epochs_done", at::tensor(static_cast<int64_t>(epochs_done)));
  const std::string tmp = path + ".tmp";
  archive.save_to(tmp);
  std::filesystem::rename(tmp, path);
}

int load_checkpoint(const std::string& path, ::torch::nn::Module& model,
                    ::torch::optim::Optimizer& optimizer) {
  if (path.empty() || !std::filesystem::exists(path)) return 0;
  try {
    ::torch::serialize::InputArchive archive, model_part, optim_part;
    archive.load_from(path);
    archive.read("model", model_part);
    archive.read("optimizer", optim_part);
    at::Tensor epochs;
    archive.read("epochs_done", epochs);
    model.load(model_part);
    optimizer.load(optim_part);
    return static_cast<int>(epochs.item<int64_t>());
  } catch (const c10::Error& e) {
    DDP_THROW(InvalidArgument, "checkpoint ", path,
              " does not hold this job's model: ", e.what_without_backtrace());
  }
}

}  // namespace demo
