#include "examples/idx_file.h"

#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()))).string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

void write_plain(const std::string& path, const std::vector<unsigned char>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// A 2 x 3 unsigned-byte IDX file holding 0..5.
std::vector<unsigned char> small_idx() { return {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 5}; }

}  // namespace

TEST_CASE("plain and gzipped IDX files read to the same tensor") {
  TempFile plain("idx-plain-"), gz("idx-gz-");
  write_plain(plain.path, small_idx());
  write_gz(gz.path, small_idx());
  for (const auto& path : {plain.path, gz.path}) {
    at::Tensor t = demo::read_idx(path);
    REQUIRE(t.dim() == 2);
    CHECK(t.size(0) == 2);
    CHECK(t.size(1) == 3);
    CHECK(t[1][2].item<uint8_t>() == 5);
  }
}

TEST_CASE("hostile IDX files are errors naming the file, never a crash or a huge allocation") {
  TempFile f("idx-bad-");
  auto refused = [&](std::vector<unsigned char> bytes, const char* why) {
    CAPTURE(why);
    write_plain(f.path, bytes);
    CHECK_THROWS_WITH_AS(demo::read_idx(f.path), doctest::Contains(f.path.c_str()), ddp::InvalidArgument);
  };
  auto truncated = small_idx();
  truncated.pop_back();
  refused(truncated, "data shorter than the dimensions say");
  refused({0, 0, 8}, "header cut short");
  refused({1, 2, 8, 1, 0, 0, 0, 1, 0}, "bad magic");
  refused({0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0}, "float data");
  refused({0, 0, 8, 9}, "too many dimensions");
  refused({0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "2^64 elements announced");
  CHECK_THROWS_WITH_AS(demo::read_idx(f.path + ".missing"), doctest::Contains("cannot open"),
                       ddp::InvalidArgument);
}
