#include "examples/checkpoint.h"

#include <fcntl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/error.h"
#include "common/fd.h"

namespace demo {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
constexpr int64_t kProgressFields = 5;

// The step a checkpoint's file name carries, or -1 when the name is not a checkpoint's.
int64_t step_of(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// The checkpoints in `dir`, newest first.
std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) out.emplace_back(step, e.path());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

void write_all(int fd, const std::string& bytes, const fs::path& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) DDP_THROW_ERRNO("write(", path.string(), ")");
    done += static_cast<size_t>(n);
  }
}

// `bytes` in `path`, on disk when it returns.
void write_durably(const fs::path& path, const std::string& bytes) {
  ddp::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) DDP_THROW_ERRNO("open(", path.string(), ")");
  write_all(fd.get(), bytes, path);
  if (::fsync(fd.get()) != 0) DDP_THROW_ERRNO("fsync(", path.string(), ")");
  if (::close(fd.release()) != 0) DDP_THROW_ERRNO("close(", path.string(), ")");
}

// The directory's entries (a rename) on disk when it returns.
void sync_directory(const fs::path& dir) {
  ddp::Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) DDP_THROW_ERRNO("open(", dir.string(), ")");
  if (::fsync(fd.get()) != 0) DDP_THROW_ERRNO("fsync(", dir.string(), ")");
}

// A checkpoint read whole from its file, not yet applied to any model.
struct Archive {
  ::torch::serialize::InputArchive model, optimizer;
  Progress progress;
};

// Throws (c10::Error, std::exception) when `path` is not a whole checkpoint of `step`.
Archive read_archive(const fs::path& path, int64_t step) {
  ::torch::serialize::InputArchive archive;
  archive.load_from(path.string());
  Archive a;
  archive.read("model", a.model);
  archive.read("optimizer", a.optimizer);
  at::Tensor p;
  archive.read("progress", p);
  if (p.scalar_type() != at::kLong || p.dim() != 1 || p.numel() != kProgressFields)
    throw std::runtime_error("its progress record is malformed");
  const auto v = p.accessor<int64_t, 1>();
  a.progress = {v[0], v[1], v[2], v[3], v[4]};
  const Progress& g = a.progress;
  if (g.step != step)
    throw std::runtime_error("it holds step " + std::to_string(g.step) + ", not its name's");
  if (g.epoch < 1 || g.epoch_step < 0 || g.epoch_samples < 0 || g.world_size < 1)
    throw std::runtime_error("its progress record is out of range");
  return a;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%012lld.ckpt", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::string save_checkpoint(const std::string& dir, ::torch::nn::Module& model,
                            ::torch::optim::Optimizer& optimizer, const Progress& progress, int keep) {
  DDP_CHECK_GE(keep, 1, "checkpoints to keep");
  DDP_CHECK_GE(progress.step, 0, "checkpoint step");
  ::torch::serialize::OutputArchive archive, model_part, optim_part;
  model.save(model_part);
  optimizer.save(optim_part);
  archive.write("model", model_part);
  archive.write("optimizer", optim_part);
  archive.write("progress",
                at::tensor(std::vector<int64_t>{progress.step, progress.epoch, progress.epoch_step,
                                                progress.epoch_samples, progress.world_size}));
  std::ostringstream bytes;
  archive.save_to(bytes);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) DDP_THROW(InvalidArgument, "checkpoint directory ", dir, ": ", ec.message());
  const std::string path = checkpoint_path(dir, progress.step), tmp = path + ".tmp";
  write_durably(tmp, bytes.str());
  if (::rename(tmp.c_str(), path.c_str()) != 0) DDP_THROW_ERRNO("rename(", tmp, ", ", path, ")");
  sync_directory(dir);

  auto all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) fs::remove(all[i].second, ec);
  return path;
}

std::optional<Loaded> load_newest_checkpoint(const std::string& dir, ::torch::nn::Module& model,
                                             ::torch::optim::Optimizer& optimizer) {
  if (dir.empty()) return std::nullopt;
  const auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  Loaded loaded;
  for (const auto& [step, path] : all) {
    Archive a;
    try {
      a = read_archive(path, step);
    } catch (const c10::Error& e) {
      loaded.skipped.push_back(path.string() + ": not a whole checkpoint (" + e.what_without_backtrace() +
                               ")");
      continue;
    } catch (const std::exception& e) {
      loaded.skipped.push_back(path.string() + ": not a whole checkpoint (" + e.what() + ")");
      continue;
    }
    try {
      model.load(a.model);
      optimizer.load(a.optimizer);
    } catch (const c10::Error& e) {
      DDP_THROW(InvalidArgument, "checkpoint ", path.string(),
                " does not hold this job's model: ", e.what_without_backtrace());
    }
    loaded.path = path.string();
    loaded.progress = a.progress;
    return loaded;
  }
  std::string why;
  for (const auto& s : loaded.skipped) why += "\n  " + s;
  DDP_THROW(InvalidArgument, "no whole checkpoint in ", dir, ":", why);
}

}  // namespace demo
