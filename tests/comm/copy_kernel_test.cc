// copy_bytes copies exactly what memcpy would, at every size and relative alignment, and takes
// the vector loop for the short forward distances that are slow with `rep movsb` where the
// calibration (or DDP_COPY_KERNEL) says so.
#include "comm/copy_kernel.h"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "tests/common/settings_test_util.h"

using namespace ddp::comm;

TEST_CASE("short_copy_distance: a destination 1..63 bytes after the source, modulo 4 KiB") {
  alignas(4096) static char buf[3 * 4096];
  CHECK_FALSE(short_copy_distance(buf, buf + 4096));
  CHECK(short_copy_distance(buf + 16, buf));
  CHECK(short_copy_distance(buf + 4096 + 8, buf));
  CHECK(short_copy_distance(buf + 63, buf));
  CHECK_FALSE(short_copy_distance(buf + 64, buf));
  CHECK_FALSE(short_copy_distance(buf, buf + 16));  // destination before the source
}

TEST_CASE("copy_bytes and copy_bytes_vector equal memcpy at every size and offset") {
  std::vector<unsigned char> src(70000), want(70000), got(70000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t n : {0u, 1u, 63u, 127u, 128u, 129u, 1023u, 1024u, 4097u, 65536u}) {
    for (size_t so : {0u, 1u, 16u, 40u}) {
      for (size_t dof : {0u, 8u, 16u, 33u}) {
        std::fill(want.begin(), want.end(), 0);
        std::fill(got.begin(), got.end(), 0);
        std::memcpy(want.data() + dof, src.data() + so, n);
        copy_bytes(got.data() + dof, src.data() + so, n);
        CHECK(got == want);
        std::fill(got.begin(), got.end(), 0);
        copy_bytes_vector(got.data() + dof, src.data() + so, n);
        CHECK(got == want);
      }
    }
  }
}

TEST_CASE("copy_bytes_streaming equals memcpy at every size and offset, and writes nothing else") {
  std::vector<unsigned char> src(140000), want(140000), got(140000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  // Under 4 KiB (memcpy), the first streamed size, a ragged tail, several pages.
  for (size_t n : {0u, 1u, 64u, 4095u, 4096u, 4097u, 4096u + 63u, 65536u, 131072u + 5u}) {
    for (size_t so : {0u, 1u, 16u, 40u}) {
      for (size_t dof : {0u, 8u, 33u, 63u, 64u}) {
        std::fill(want.begin(), want.end(), 0xEE);
        std::fill(got.begin(), got.end(), 0xEE);
        std::memcpy(want.data() + dof, src.data() + so, n);
        copy_bytes_streaming(got.data() + dof, src.data() + so, n);
        CHECK_MESSAGE(got == want, "n=", n, " src+", so, " dst+", dof);
      }
    }
  }
}

TEST_CASE(
    "DDP_COPY_KERNEL reads as CopyKernelSetting: auto, memcpy or vector; anything else is refused by name") {
  ddp::settings::testing::check_choice_as<CopyKernelSetting>(ddp::settings::kCopyKernel,
                                                             {{"auto", CopyKernelSetting::kAuto},
                                                              {"memcpy", CopyKernelSetting::kMemcpy},
                                                              {"vector", CopyKernelSetting::kVector}});
}

TEST_CASE("the short-distance copy is calibrated once: one of the two, the same on every call") {
  const ShortCopy measured = calibrate_short_copy();
  CHECK((measured == ShortCopy::kMemcpy || measured == ShortCopy::kVector));
  const ShortCopy first = short_copy();
  CHECK(short_copy() == first);
  // Whichever was chosen, a short-distance copy is still exact.
  std::vector<unsigned char> src(8192 + 64), got(8192 + 64, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  copy_bytes(got.data() + 16, src.data(), 8192);
  CHECK(std::memcmp(got.data() + 16, src.data(), 8192) == 0);
}
