#include "examples/checkpoint.h"

#include <doctest/doctest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "examples/cnn.h"

namespace {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()))).string();
}

}  // namespace

TEST_CASE("a checkpoint round-trips weights, optimizer state and the epoch, and leaves no temporary file") {
  const std::string path = temp_path("ckpt-");
  demo::Cnn a, b;
  ::torch::optim::SGD opt_a(a->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ::torch::optim::SGD opt_b(b->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  CHECK(demo::load_checkpoint(path, *b, opt_b) == 0);  // no file: nothing loaded
  demo::save_checkpoint(path, *a, opt_a, 3);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK(demo::load_checkpoint(path, *b, opt_b) == 3);
  auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(::torch::equal(pa[i], pb[i]));
  std::filesystem::remove(path);
}

TEST_CASE("a file that is not a checkpoint of this model is an error naming it") {
  const std::string path = temp_path("ckpt-bad-");
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fputs("not a checkpoint", f);
  std::fclose(f);
  demo::Cnn model;
  ::torch::optim::SGD opt(model->parameters(), 0.1);
  CHECK_THROWS_WITH_AS(demo::load_checkpoint(path, *model, opt), doctest::Contains(path.c_str()),
                       ddp::InvalidArgument);
  std::filesystem::remove(path);
}
