#include "comm/multi_buffer.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace ddp::comm;
using namespace ddp::comm::multi;

TEST_CASE("find_mismatch: names the first rank and field that differ from rank 0, with both values") {
  std::vector<float> a(6);
  std::vector<Buffer> two{view(a.data(), 3), view(a.data() + 3, 3)};
  const ListShape base = shape_of(two, 1, static_cast<int>(ReduceOp::kSum));
  CHECK(base.length == 2);
  CHECK(base.count == 3);
  std::vector<ListShape> rows(4, base);
  CHECK(find_mismatch(rows) == "");
  rows[3].length = 5;
  rows[2].dtype = static_cast<int64_t>(DType::kInt64);
  CHECK(find_mismatch(rows) ==
        "rank 2 has dtype int64 where rank 0 has float32 (every rank must pass the same "
        "list shape)");
  rows[2] = base;
  CHECK(find_mismatch(rows).starts_with("rank 3 has list length 5 where rank 0 has 2"));
  rows[3] = base;
  rows[1].root_index = 0;
  CHECK(find_mismatch(rows).starts_with("rank 1 has root index 0 where rank 0 has 1"));
  rows[1] = base;
  rows[1].op = static_cast<int64_t>(ReduceOp::kMax);
  CHECK(find_mismatch(rows).starts_with("rank 1 has reduce op max where rank 0 has sum"));
}

TEST_CASE("reduce_into: into a separate buffer, or in place into one of the sources, every op") {
  std::vector<int32_t> x{1, 5, -3}, y{4, 2, 7}, z{-2, 9, 0}, out(3, 99);
  std::vector<Buffer> srcs{view(x.data(), 3), view(y.data(), 3), view(z.data(), 3)};
  reduce_into(view(out.data(), 3), srcs, ReduceOp::kSum);
  CHECK(out == std::vector<int32_t>{3, 16, 4});
  reduce_into(view(out.data(), 3), srcs, ReduceOp::kMax);
  CHECK(out == std::vector<int32_t>{4, 9, 7});
  reduce_into(view(out.data(), 3), std::vector<Buffer>{srcs[1]}, ReduceOp::kMin);  // one source: a copy
  CHECK(out == y);
  reduce_into(srcs[1], srcs, ReduceOp::kMin);  // in place: y holds the result, x and z untouched
  CHECK(y == std::vector<int32_t>{-2, 2, -3});
  CHECK(x == std::vector<int32_t>{1, 5, -3});
  CHECK(z == std::vector<int32_t>{-2, 9, 0});
}

TEST_CASE("fan_out copies to every other buffer; pack lays buffers end to end") {
  std::vector<float> a{1, 2}, b{0, 0}, c{0, 0}, packed(6, 0);
  std::vector<Buffer> all{view(a.data(), 2), view(b.data(), 2), view(c.data(), 2)};
  fan_out(all[0], all);
  CHECK(b == a);
  CHECK(c == a);
  b = {3, 4};
  c = {5, 6};
  pack(all, view(packed.data(), 6));
  CHECK(packed == std::vector<float>{1, 2, 3, 4, 5, 6});
}
