#include "ddp/device_ops.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "ddp/cuda_ops.h"

using namespace ddp;

TEST_CASE("DeviceMemory is zero-filled, aligned and movable") {
  DeviceMemory m(100, {});
  REQUIRE(m.data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(m.data()) % 64 == 0);
  auto v = m.view(25, comm::DType::kFloat32);
  for (size_t i = 0; i < 25; ++i) CHECK(static_cast<float*>(v.data)[i] == 0.0f);
  DeviceMemory moved = std::move(m);
  CHECK(moved.data() == v.data);
  CHECK(m.data() == nullptr);
  CHECK_THROWS_AS(moved.view(26, comm::DType::kFloat32), InvalidArgument);
}

TEST_CASE("copy, zero and scale on the host") {
  std::vector<float> a{1, 2, 3}, b(3);
  copy_buffer(comm::view(b.data(), 3), comm::view(a.data(), 3));
  CHECK(b == a);
  scale_buffer(comm::view(b.data(), 3), 0.5);
  CHECK(b == std::vector<float>{0.5f, 1.0f, 1.5f});
  zero_buffer(comm::view(b.data(), 3));
  CHECK(b == std::vector<float>{0, 0, 0});
  std::vector<int32_t> ints{7, -7};
  scale_buffer(comm::view(ints.data(), 2), 0.5);
  CHECK(ints == std::vector<int32_t>{3, -3});
  std::vector<double> d{1};
  CHECK_THROWS_AS(copy_buffer(comm::view(d.data(), 1), comm::view(a.data(), 1)), InvalidArgument);
}

TEST_CASE("convert to and from half precision, with a factor") {
  std::vector<float> src{1.0f, -2.5f, 1000.0f}, back(3);
  std::vector<uint16_t> half(3), bf(3);
  comm::Buffer h{half.data(), 3, comm::DType::kFloat16, {}};
  comm::Buffer b{bf.data(), 3, comm::DType::kBFloat16, {}};
  convert_buffer(h, comm::view(src.data(), 3), 0.5);
  convert_buffer(comm::view(back.data(), 3), h);
  CHECK(back == std::vector<float>{0.5f, -1.25f, 500.0f});
  convert_buffer(b, comm::view(src.data(), 3));
  convert_buffer(comm::view(back.data(), 3), b);
  CHECK(back[0] == 1.0f);
  CHECK(back[2] == doctest::Approx(1000.0f).epsilon(0.01));
}

TEST_CASE("convert: float32 to and from both 16-bit floats, element by element, every length") {
  // The bucket-sized casts go a block at a time (F16C for float16 where the CPU has it): each
  // element must still be the scalar cast of (float) x * factor, and back exactly, at lengths
  // across the blocks' edges; nothing past the end is written.
  for (size_t n : {size_t{1}, size_t{7}, size_t{1023}, size_t{1024}, size_t{1025}, size_t{5000}}) {
    CAPTURE(n);
    std::vector<float> src(n);
    for (size_t i = 0; i < n; ++i) src[i] = (static_cast<float>(i % 1997) - 998.5f) * 0.37f;
    for (comm::DType wire : {comm::DType::kFloat16, comm::DType::kBFloat16}) {
      CAPTURE(comm::to_string(wire));
      const bool half = wire == comm::DType::kFloat16;
      std::vector<uint16_t> narrow(n + 1, 0xabcd);
      convert_buffer(comm::Buffer{narrow.data(), n, wire, {}}, comm::view(src.data(), n), 0.25);
      std::vector<float> back(n + 1, -7.0f);
      convert_buffer(comm::view(back.data(), n), comm::Buffer{narrow.data(), n, wire, {}});
      bool same = true;
      for (size_t i = 0; i < n && same; ++i) {
        const float scaled = src[i] * 0.25f;
        const uint16_t want = half ? comm::float_to_half(scaled) : comm::float_to_bfloat16(scaled);
        const float want_back = half ? comm::half_to_float(want) : comm::bfloat16_to_float(want);
        same = narrow[i] == want && back[i] == want_back;
        if (!same) FAIL_CHECK("element " << i << ": " << narrow[i] << " want " << want);
      }
      CHECK(narrow[n] == 0xabcd);
      CHECK(back[n] == -7.0f);
    }
  }
}

TEST_CASE("CUDA memory: a clear error without a GPU, a working round trip with one") {
  comm::Device gpu{comm::DeviceType::kCuda, 0};
  if (cuda::device_count() == 0) {
    // Built with CUDA but no GPU: BackendError from the runtime; built without: InvalidArgument.
    CHECK_THROWS_AS(DeviceMemory(64, gpu), Error);
    return;
  }
  DeviceMemory m(3 * sizeof(float), gpu);
  comm::Buffer d = m.view(3, comm::DType::kFloat32);
  std::vector<float> a{1, 2, 3}, b(3);
  copy_buffer(d, comm::view(a.data(), 3));
  scale_buffer(d, 2.0);
  copy_buffer(comm::view(b.data(), 3), d);
  CHECK(b == std::vector<float>{2, 4, 6});
  zero_buffer(d);
  copy_buffer(comm::view(b.data(), 3), d);
  CHECK(b == std::vector<float>{0, 0, 0});
}
