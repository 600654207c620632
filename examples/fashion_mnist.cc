#include "examples/fashion_mnist.h"

#include <filesystem>

#include "common/error.h"
#include "examples/idx_file.h"

namespace demo {
namespace {

// Over the 60,000 training images, pixel values scaled to [0, 1].
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    std::string path = dir + "/" + stem + ext;
    if (std::filesystem::exists(path)) return path;
  }
  DDP_THROW(InvalidArgument, "Fashion-MNIST: no ", stem, "[.gz] in ", dir,
            " (apt-get install dataset-fashion-mnist, or pass the directory that holds the IDX files)");
}

}  // namespace

FashionMnist::FashionMnist(const std::string& dir, Split split, std::optional<size_t> limit) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  at::Tensor images = read_idx(find_file(dir, prefix + "-images-idx3-ubyte"));
  at::Tensor labels = read_idx(find_file(dir, prefix + "-labels-idx1-ubyte"));
  if (images.dim() != 3 || labels.dim() != 1 || images.size(0) != labels.size(0)) {
    DDP_THROW(InvalidArgument, "Fashion-MNIST in ", dir, ": images ", images.sizes(), " and labels ",
              labels.sizes(), " do not match");
  }
  int64_t n = images.size(0);
  if (limit && static_cast<int64_t>(*limit) < n) n = static_cast<int64_t>(*limit);
  images_ = images.narrow(0, 0, n).unsqueeze(1).to(at::kFloat).div_(255.0).sub_(kMean).div_(kStd);
  targets_ = labels.narrow(0, 0, n).to(at::kLong);
}

::torch::data::Example<> FashionMnist::get(size_t index) { return {images_[index], targets_[index]}; }

c10::optional<size_t> FashionMnist::size() const { return static_cast<size_t>(images_.size(0)); }

}  // namespace demo
