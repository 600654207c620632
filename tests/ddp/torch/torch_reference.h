#pragma once
// Runs companions_reference.py (PyTorch 1.13's own PowerSGD / post-local SGD) on a model, data
// and bucket layout of a ddp::torch suite, and returns each rank's parameters after the steps.
// The script and its file formats: tests/ddp/torch/companions_reference.py.
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "test_env.h"
#include "torch_models.h"

namespace torch_test {

inline constexpr const char* kReferencePython = "/usr/bin/python3";

using Layers = std::vector<std::pair<int64_t, int64_t>>;  // Linear (in, out), ReLU between

inline ::torch::nn::Sequential seeded_layers(const Layers& layers, uint64_t seed) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(seed);
  ::torch::nn::Sequential net;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i) net->push_back(::torch::nn::Functional(::torch::relu));
    net->push_back(::torch::nn::Linear(layers[i].first, layers[i].second));
  }
  return net;
}

inline std::string reference_script() {
  return ddp::test_env::get_or("DDP_SOURCE_DIR", ".") + "/tests/ddp/torch/companions_reference.py";
}

inline bool reference_available() {
  return std::filesystem::exists(kReferencePython) && std::filesystem::exists(reference_script());
}

inline void write_tensor(const std::filesystem::path& path, const std::vector<::torch::Tensor>& parts) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& t : parts) {
    auto c = t.contiguous();
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  }
}

// For each run of `configs` (one Python start for all), each rank's parameters (flattened,
// concatenated) after its steps in PyTorch.
inline std::vector<std::vector<::torch::Tensor>> run_reference(std::vector<nlohmann::json> configs,
                                                               const Layers& layers,
                                                               const std::vector<::torch::Tensor>& init,
                                                               const Batches& data) {
  char dir_template[] = "/tmp/ddp-companions-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(dir_template);
  for (auto& config : configs) {
    for (const auto& [in, out] : layers) config["layers"].push_back({in, out});
  }
  std::ofstream(dir / "config.json") << nlohmann::json(configs).dump();
  write_tensor(dir / "init.bin", init);
  write_tensor(dir / "x.bin", data.x);
  write_tensor(dir / "y.bin", data.y);
  const std::string cmd = std::string(kReferencePython) + " " + reference_script() + " " + dir.string();
  const int rc = std::system(cmd.c_str());
  std::vector<std::vector<::torch::Tensor>> out(configs.size());
  for (size_t i = 0; rc == 0 && i < configs.size(); ++i) {
    for (int r = 0; r < configs[i]["world"].get<int>(); ++r) {
      const auto path = dir / ("run" + std::to_string(i) + "_rank" + std::to_string(r) + ".bin");
      const auto n = static_cast<int64_t>(std::filesystem::file_size(path) / sizeof(float));
      auto t = ::torch::empty({n}, ::torch::kFloat);
      std::ifstream(path, std::ios::binary)
          .read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(n * sizeof(float)));
      out[i].push_back(t);
    }
  }
  std::filesystem::remove_all(dir);
  if (rc != 0) DDP_THROW(InvalidArgument, "the PyTorch reference failed (", cmd, "): status ", rc);
  return out;
}

inline ::torch::Tensor flat(const std::vector<::torch::Tensor>& params) {
  std::vector<::torch::Tensor> parts;
  for (const auto& p : params) parts.push_back(p.detach().reshape(-1));
  return ::torch::cat(parts);
}

inline double max_abs_diff(const ::torch::Tensor& a, const ::torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace torch_test
