#include "examples/checkpoint.h"

#include <doctest/doctest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "examples/cnn.h"

namespace {

namespace fs = std::filesystem;

// A fresh directory under the temporary directory, removed with everything in it.
struct TempDir {
  fs::path path;
  explicit TempDir(const char* name)
      : path(fs::temp_directory_path() / (std::string(name) + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

// A model and its optimizer, with momentum state after one step on fixed data.
struct Job {
  demo::Cnn cnn;
  ::torch::optim::SGD opt{cnn->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9)};

  void step(int64_t seed) {
    ::torch::manual_seed(seed);
    auto x = ::torch::randn({4, 1, 28, 28});
    auto y = ::torch::randint(0, 10, {4});
    opt.zero_grad();
    ::torch::nn::functional::nll_loss(cnn(x), y).backward();
    opt.step();
  }
  bool same_weights(Job& o) {
    auto a = cnn->parameters(), b = o.cnn->parameters();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!::torch::equal(a[i], b[i])) return false;
    }
    return true;
  }
};

demo::Progress progress(int64_t step) { return {step, 2, step - 100, (step - 100) * 64, 2}; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

size_t files_in(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("a checkpoint round-trips weights, optimizer state and progress, and leaves no temporary file") {
  TempDir dir("ckpt-");
  Job a, b;
  CHECK_FALSE(demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt));  // no directory: nothing loaded
  CHECK_FALSE(demo::load_newest_checkpoint("", *b.cnn, b.opt));
  a.step(1);
  const std::string path = demo::save_checkpoint(dir.str(), *a.cnn, a.opt, progress(137));
  CHECK(path == demo::checkpoint_path(dir.str(), 137));
  CHECK(files_in(dir.path) == 1);  // no .tmp left beside it
  auto loaded = demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt);
  REQUIRE(loaded);
  CHECK(loaded->path == path);
  CHECK(loaded->skipped.empty());
  const demo::Progress& p = loaded->progress;
  CHECK(p.step == 137);
  CHECK(p.epoch == 2);
  CHECK(p.epoch_step == 37);
  CHECK(p.epoch_samples == 37 * 64);
  CHECK(p.world_size == 2);
  CHECK(a.same_weights(b));
  // The momentum buffers came along: the same next step keeps both models equal.
  a.step(2);
  b.step(2);
  CHECK(a.same_weights(b));
}

TEST_CASE("save keeps the newest checkpoints only, and load takes the highest step") {
  TempDir dir("ckpt-keep-");
  Job a, b;
  for (int64_t s : {900, 1000, 1100}) {
    a.step(s);
    demo::save_checkpoint(dir.str(), *a.cnn, a.opt, progress(s), /*keep=*/2);
  }
  CHECK_FALSE(fs::exists(demo::checkpoint_path(dir.str(), 900)));
  CHECK(fs::exists(demo::checkpoint_path(dir.str(), 1000)));
  CHECK(fs::exists(demo::checkpoint_path(dir.str(), 1100)));
  CHECK(files_in(dir.path) == 2);
  auto loaded = demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt);
  REQUIRE(loaded);
  CHECK(loaded->progress.step == 1100);
  CHECK(a.same_weights(b));
}

TEST_CASE("a torn, truncated or garbage newest checkpoint is skipped in favour of the previous one") {
  TempDir dir("ckpt-torn-");
  Job a, b, reference;
  a.step(1);
  demo::save_checkpoint(dir.str(), *a.cnn, a.opt, progress(200));
  demo::save_checkpoint(dir.str(), *reference.cnn, reference.opt, progress(100));  // older, different
  const std::string whole = slurp(demo::checkpoint_path(dir.str(), 200));
  REQUIRE(whole.size() > 1000);
  // Newer files that are not whole: half a checkpoint, its last byte missing, garbage, nothing;
  // and a write that never reached its rename.
  write_file(demo::checkpoint_path(dir.str(), 300), whole.substr(0, whole.size() / 2));
  write_file(demo::checkpoint_path(dir.str(), 301), whole.substr(0, whole.size() - 1));
  write_file(demo::checkpoint_path(dir.str(), 302), std::string(4096, '\x5a'));
  write_file(demo::checkpoint_path(dir.str(), 303), "");
  write_file(demo::checkpoint_path(dir.str(), 400) + ".tmp", whole);
  // A whole checkpoint under the wrong name is not the step it claims either.
  write_file(demo::checkpoint_path(dir.str(), 304), whole);
  auto loaded = demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt);
  REQUIRE(loaded);
  CHECK(loaded->progress.step == 200);
  CHECK(a.same_weights(b));
  REQUIRE(loaded->skipped.size() == 5);
  CHECK(doctest::String(loaded->skipped[0].c_str()) ==
        doctest::Contains(demo::checkpoint_path(dir.str(), 304).c_str()));
  CHECK(doctest::String(loaded->skipped[0].c_str()) == doctest::Contains("holds step 200"));
  CHECK(doctest::String(loaded->skipped[4].c_str()) ==
        doctest::Contains(demo::checkpoint_path(dir.str(), 300).c_str()));
  for (const auto& s : loaded->skipped)
    CHECK(doctest::String(s.c_str()) == doctest::Contains("not a whole checkpoint"));
}

TEST_CASE("a directory of unreadable checkpoints only is an error naming each") {
  TempDir dir("ckpt-bad-");
  fs::create_directories(dir.path);
  write_file(demo::checkpoint_path(dir.str(), 5), "not a checkpoint");
  write_file(demo::checkpoint_path(dir.str(), 6), "");
  Job b;
  auto before = b.cnn->parameters()[0].clone();
  try {
    demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt);
    FAIL("no error");
  } catch (const ddp::InvalidArgument& e) {
    const std::string what = e.what();
    CHECK(what.find(demo::checkpoint_path(dir.str(), 5)) != std::string::npos);
    CHECK(what.find(demo::checkpoint_path(dir.str(), 6)) != std::string::npos);
    CHECK(what.find("no whole checkpoint in " + dir.str()) != std::string::npos);
  }
  CHECK(::torch::equal(before, b.cnn->parameters()[0]));  // the model untouched
}

TEST_CASE("a whole checkpoint of another model is an error naming it") {
  TempDir dir("ckpt-other-");
  ::torch::nn::Linear other(3, 2);
  ::torch::optim::SGD other_opt(other->parameters(), 0.1);
  demo::save_checkpoint(dir.str(), *other, other_opt, progress(150));
  Job b;
  CHECK_THROWS_WITH_AS(demo::load_newest_checkpoint(dir.str(), *b.cnn, b.opt),
                       doctest::Contains(demo::checkpoint_path(dir.str(), 150).c_str()),
                       ddp::InvalidArgument);
}

TEST_CASE("a checkpoint directory that cannot be created is an error naming it") {
  TempDir dir("ckpt-file-");
  write_file(dir.str(), "a file, not a directory");
  Job a;
  CHECK_THROWS_WITH_AS(demo::save_checkpoint(dir.str() + "/sub", *a.cnn, a.opt, progress(100)),
                       doctest::Contains((dir.str() + "/sub").c_str()), ddp::InvalidArgument);
  fs::remove(dir.path);
}
