// copy_bytes copies exactly what memcpy would, at every size and relative alignment, and takes
// the vector loop exactly for the short forward distances that are slow with `rep movsb`.
#include "comm/copy_kernel.h"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

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
