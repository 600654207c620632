#pragma once
// Fashion-MNIST as a LibTorch data set: 60,000 training and 10,000 test images (28x28, ten
// classes of clothing), read from the IDX files Debian's dataset-fashion-mnist installs under
// /usr/share/datasets/fashion-mnist/ (gzip or plain). Images are float [1, 28, 28],
// normalised with the training set's mean and deviation; targets are int64 class indices.
// A missing directory is an InvalidArgument naming it and the package to install.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>

#include <optional>
#include <string>

namespace demo {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public ::torch::data::datasets::Dataset<FashionMnist> {
 public:
  enum class Split { kTrain, kTest };
  // limit: keep only the first `limit` examples (quick runs, tests).
  FashionMnist(const std::string& dir, Split split, std::optional<size_t> limit = std::nullopt);

  ::torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
  const at::Tensor& images() const { return images_; }
  const at::Tensor& targets() const { return targets_; }

 private:
  at::Tensor images_, targets_;
};

}  // namespace demo
