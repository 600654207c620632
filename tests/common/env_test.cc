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

TEST_CASE("parse_bool: the four spellings each way in any case, nothing else") {
  for (const char* on : {"1", "true", "YES", "On"}) CHECK(env::parse_bool(on) == true);
  for (const char* off : {"0", "False", "no", "OFF"}) CHECK(env::parse_bool(off) == false);
  for (const char* bad : {"", " 1", "2", "maybe", "truee", "-1", "yes\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(env::parse_bool(bad).has_value());
  }
}
