// GroupMemory and host_memory: aligned, zeroed, views checked against its size.
#include "comm/group_memory.h"

#include <doctest/doctest.h>

#include <cstdint>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;

TEST_CASE("host_memory: 64-byte aligned, zeroed, not shared") {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{1} << 20}) {
    auto m = host_memory(bytes);
    CHECK(m->bytes() == bytes);
    CHECK(reinterpret_cast<uintptr_t>(m->data()) % 64 == 0);
    CHECK_FALSE(m->shared());
    const auto* p = static_cast<const unsigned char*>(m->data());
    bool zero = true;
    for (size_t i = 0; i < bytes; ++i) zero = zero && p[i] == 0;
    CHECK(zero);
  }
  CHECK(host_memory(0)->data() != nullptr);
}

TEST_CASE("view: what fits is a host Buffer at the offset; what does not is an InvalidArgument") {
  auto m = host_memory(1000);
  const Buffer b = m->view(10, DType::kFloat64, 200);
  CHECK(b.data == static_cast<char*>(m->data()) + 200);
  CHECK(b.count == 10);
  CHECK(b.dtype == DType::kFloat64);
  CHECK_FALSE(b.device.is_cuda());
  CHECK(m->view(250, DType::kFloat32).bytes() == 1000);  // exactly all of it
  CHECK_THROWS_WITH_AS(m->view(251, DType::kFloat32), doctest::Contains("does not fit in its 1000 bytes"),
                       InvalidArgument);
  CHECK_THROWS_AS(m->view(1, DType::kInt8, 1000), InvalidArgument);
  CHECK_THROWS_AS(m->view(1, DType::kInt8, SIZE_MAX), InvalidArgument);
}
