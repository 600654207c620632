#include "launcher/error_file.h"

#include <doctest/doctest.h>

#include "launcher_test_util.h"

using namespace ddp::launcher;
using namespace ddp::launcher::test;

TEST_CASE("error file: PyTorch @record format") {
  TempDir dir;
  std::ofstream(dir / "e.json") << R"({"message": {"message": "RuntimeError: x", "extraInfo": )"
                                 << R"({"py_callstack": "Traceback:\n  line\nRuntimeError: x", "timestamp": "1700000001"}}})";
  auto c = read_error_file(dir / "e.json");
  REQUIRE(c.has_value());
  CHECK(c->message == "RuntimeError: x");
  CHECK(c->traceback == "Traceback:\n  line\nRuntimeError: x");
  CHECK(c->timestamp == 1700000001);
  CHECK(error_head(*c) == "Traceback:\n  line\nRuntimeError: x");
}

TEST_CASE("error file: plain message, raw text, missing, empty") {
  TempDir dir;
  std::ofstream(dir / "plain.json") << R"({"message": "oops", "timestamp": 12})";
  auto plain = read_error_file(dir / "plain.json");
  REQUIRE(plain.has_value());
  CHECK(plain->message == "oops");
  CHECK(plain->timestamp == 12);
  CHECK(error_head(*plain) == "oops");

  std::ofstream(dir / "raw") << "not json at all\n";
  auto raw = read_error_file(dir / "raw");
  REQUIRE(raw.has_value());
  CHECK(error_head(*raw) == "not json at all");

  CHECK_FALSE(read_error_file(dir / "missing").has_value());
  std::ofstream(dir / "empty").close();
  CHECK_FALSE(read_error_file(dir / "empty").has_value());
}

TEST_CASE("error head: only the first lines") {
  ErrorFileContent c;
  for (int i = 0; i < 100; ++i) c.message += "line" + std::to_string(i) + "\n";
  std::string head = error_head(c, 3);
  CHECK(head == "line0\nline1\nline2\n...");
}
