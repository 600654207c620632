#include "common/log.h"

#include <doctest/doctest.h>

TEST_CASE("one logger per module, level shared") {
  auto a = ddp::logger("store");
  auto b = ddp::logger("store");
  CHECK(a.get() == b.get());
  ddp::set_log_level(spdlog::level::debug);
  CHECK(ddp::logger("tcp")->level() == spdlog::level::debug);
  CHECK(a->level() == spdlog::level::debug);
  spdlog::level::level_enum l;
  CHECK(ddp::parse_log_level("WARNING", &l));
  CHECK(l == spdlog::level::warn);
  CHECK_FALSE(ddp::parse_log_level("loud", &l));
}
