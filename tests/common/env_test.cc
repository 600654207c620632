#include "common/env.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include "common/error.h"

using namespace ddp;

TEST_CASE("typed environment reads") {
  setenv("DDP_T_INT", "42", 1);
  setenv("DDP_T_BAD", "4x2", 1);
  setenv("DDP_T_BOOL", "Yes", 1);
  unsetenv("DDP_T_UNSET");
  CHECK(env::get_int("DDP_T_INT") == 42);
  CHECK(env::get_int_or("DDP_T_UNSET", 7) == 7);
  CHECK(env::get_bool_or("DDP_T_BOOL", false));
  CHECK_FALSE(env::get("DDP_T_UNSET").has_value());
  CHECK_THROWS_AS(env::get_int("DDP_T_BAD"), InvalidArgument);
  try {
    env::get_int("DDP_T_BAD");
  } catch (const InvalidArgument& e) {
    CHECK(e.message().find("DDP_T_BAD='4x2'") != std::string::npos);
  }
  setenv("DDP_T_BOOL", "maybe", 1);
  CHECK_THROWS_AS(env::get_bool_or("DDP_T_BOOL", false), InvalidArgument);
}
