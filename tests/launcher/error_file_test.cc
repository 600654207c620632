#include "launcher/error_file.h"

#include <doctest/doctest.h>

#include "launcher_test_util.h"

using namespace ddp::launcher;
using namespace ddp::launcher::test;

TEST_CASE("error file: PyTorch @record format") {
  TempDir dir;
  std::ofstream(dir / "e.json")
      << R"({"message": {"message": "RuntimeError: x", "extraInfo": )"
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

TEST_CASE("error file: anything a worker writes is shown, never crashes the launcher") {
  TempDir dir;
  // Nested 100,000 deep: nlohmann's dump recursed until the stack ran out (SIGSEGV).
  std::ofstream(dir / "deep") << "{\"message\": " << std::string(100000, '[') << std::string(100000, ']')
                              << "}";
  auto deep = read_error_file(dir / "deep");
  REQUIRE(deep.has_value());
  CHECK(deep->message.starts_with("{\"message\": [[["));  // shown as the raw text
  CHECK(error_head(*deep).size() < 9000);

  // Not an object, wrong types: shown as JSON text.
  std::ofstream(dir / "array") << "[1, 2, 3]";
  CHECK(error_head(*read_error_file(dir / "array")) == "[1, 2, 3]");
  std::ofstream(dir / "types")
      << R"({"message": {"message": 5, "extraInfo": {"py_callstack": [1, {"a": null}], "timestamp": 1e300}}})";
  auto types = read_error_file(dir / "types");
  REQUIRE(types.has_value());
  CHECK(types->message == "5");
  CHECK(types->traceback == R"([1,{"a":null}])");
  CHECK(types->timestamp == 0);  // 1e300 does not fit: no time rather than undefined behaviour
  std::ofstream(dir / "stamp") << R"({"message": "m", "timestamp": "99999999999999999999999"})";
  CHECK(read_error_file(dir / "stamp")->timestamp == 0);
  std::ofstream(dir / "extra") << R"({"message": {"message": "m", "extraInfo": "not an object"}})";
  CHECK(read_error_file(dir / "extra")->message == "m");

  // Invalid UTF-8 and control characters come out printable.
  std::ofstream(dir / "bytes") << "bad \xff\xfe utf \x1b[31mred\n";
  CHECK(error_head(*read_error_file(dir / "bytes")) == "bad \xef\xbf\xbd\xef\xbf\xbd utf ?[31mred");

  // A huge file: the first MiB, as text.
  {
    std::ofstream huge(dir / "huge");
    huge << "{\"message\": \"" << std::string(3 << 20, 'x') << "\"}";
  }
  auto huge = read_error_file(dir / "huge");
  REQUIRE(huge.has_value());
  CHECK(huge->message.size() == (1u << 20));
  CHECK(error_head(*huge).size() <= 8192 + 4);
}

TEST_CASE("error file: a FIFO or a symlink is not read (a FIFO would block the launcher)") {
  TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK_FALSE(read_error_file(dir / "fifo").has_value());
  std::ofstream(dir / "secret") << "{\"message\": \"not yours\"}";
  REQUIRE(::symlink((dir / "secret").c_str(), (dir / "link").c_str()) == 0);
  CHECK_FALSE(read_error_file(dir / "link").has_value());
}
