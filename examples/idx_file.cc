#include "examples/idx_file.h"

#include <zlib.h>

#include <ATen/Functions.h>

#include <array>
#include <memory>
#include <vector>

#include "common/error.h"

namespace demo {
namespace {

constexpr int kMaxDims = 4;
constexpr int64_t kMaxElements = int64_t{1} << 31;

struct GzCloser {
  void operator()(gzFile f) const noexcept { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

void read_exact(gzFile f, void* out, size_t n, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    int got = gzread(f, p, chunk);
    if (got <= 0) DDP_THROW(InvalidArgument, "read_idx: ", path, ": truncated file");
    p += got;
    n -= static_cast<size_t>(got);
  }
}

uint32_t big_endian(const std::array<unsigned char, 4>& b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

at::Tensor read_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));  // reads uncompressed files as they are
  if (!f) DDP_THROW(InvalidArgument, "read_idx: cannot open ", path);
  std::array<unsigned char, 4> magic{};
  read_exact(f.get(), magic.data(), magic.size(), path);
  if (magic[0] != 0 || magic[1] != 0 || magic[3] < 1 || magic[3] > kMaxDims) {
    DDP_THROW(InvalidArgument, "read_idx: ", path, ": not an IDX file");
  }
  if (magic[2] != 0x08)
    DDP_THROW(InvalidArgument, "read_idx: ", path, ": only unsigned-byte IDX files are supported");
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int d = 0; d < magic[3]; ++d) {
    std::array<unsigned char, 4> b{};
    read_exact(f.get(), b.data(), b.size(), path);
    dims.push_back(big_endian(b));
    count *= dims.back();
    if (count > kMaxElements) DDP_THROW(InvalidArgument, "read_idx: ", path, ": implausibly large");
  }
  at::Tensor out = at::empty(dims, at::TensorOptions().dtype(at::kByte));
  read_exact(f.get(), out.data_ptr(), static_cast<size_t>(count), path);
  return out;
}

}  // namespace demo
