// --sizes: the units, and every kind of bad item refused by name.
#include "bench/sizes.h"

#include <doctest/doctest.h>

#include "common/error.h"

using ddp::InvalidArgument;
using ddp::bench::parse_size;
using ddp::bench::parse_sizes;

TEST_CASE("parse_size: bytes and powers of 1024") {
  CHECK(parse_size("4") == 4);
  CHECK(parse_size("4B") == 4);
  CHECK(parse_size("1K") == 1024);
  CHECK(parse_size("1k") == 1024);
  CHECK(parse_size("64KiB") == 65536);
  CHECK(parse_size("16M") == 16u << 20);
  CHECK(parse_size("1G") == 1u << 30);
  CHECK(parse_size("1.5K") == 1536);
  CHECK(parse_size("1.1K") == 1126);  // a fraction of a byte is dropped
  CHECK(parse_size("0") == 0);
}

TEST_CASE("parse_size: hostile items are refused, naming them") {
  CHECK_THROWS_WITH_AS(parse_size("abc"), doctest::Contains("'abc' is not a size"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size(""), doctest::Contains("is not a size"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("3Q"), doctest::Contains("unknown unit in '3Q'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("4 K"), doctest::Contains("unknown unit"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("-4"), doctest::Contains("'-4' is not a size"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("nan"), doctest::Contains("'nan' is not a size"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("1e30G"), doctest::Contains("larger than 2^48"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("inf"), doctest::Contains("larger than 2^48"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("1e400"), doctest::Contains("'1e400' is not a size"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size(std::string(100000, '9')), doctest::Contains("is not a size"),
                       InvalidArgument);
}

TEST_CASE("parse_sizes: a comma-separated list; empty items skipped; a bad item fails the list") {
  CHECK(parse_sizes("4,1K,16M") == std::vector<size_t>{4, 1024, 16u << 20});
  CHECK(parse_sizes("4,,1K,") == std::vector<size_t>{4, 1024});
  CHECK(parse_sizes("").empty());
  CHECK_THROWS_AS(parse_sizes("4,x,1K"), InvalidArgument);
}

TEST_CASE("parse_size(s): errors name the flag given (--sizes unless told)") {
  CHECK_THROWS_WITH_AS(parse_size("3Q"), doctest::Contains("--sizes: unknown unit"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_size("1T", "--buffer"), doctest::Contains("--buffer: unknown unit in '1T'"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_sizes("4,x", "--calls"), doctest::Contains("--calls: 'x' is not a size"),
                       InvalidArgument);
}
