// safe_json: limits before parsing, every failure an InvalidArgument naming source and place,
// whole-number conversion, typed getters, and bounded, non-blocking file reads.
#include "common/safe_json.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

using namespace ddp;
using namespace ddp::safe_json;

namespace {

std::string error_of(const std::string& text, Limits limits = {}) {
  try {
    parse(text, "x.json", limits);
  } catch (const InvalidArgument& e) {
    return e.message();
  }
  return "";
}

struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddp-safe-json-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

}  // namespace

TEST_CASE("numbers nlohmann cannot hold are errors with a place, not exceptions of its own") {
  auto msg = error_of("{\n  \"a\": 1e400\n}");
  CHECK(msg.find("x.json line 2, column 8") != std::string::npos);
  CHECK(msg.find("1e400") != std::string::npos);
  CHECK(error_of("-1e400").find("malformed JSON") != std::string::npos);
  CHECK(error_of("{\"a\": \"\xff\"}").find("malformed JSON") != std::string::npos);  // invalid UTF-8
  CHECK(error_of("{\"a\": }").find("line 1, column 7") != std::string::npos);
  CHECK(error_of("").find("malformed JSON") != std::string::npos);
}

TEST_CASE("depth and size are checked before parsing") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(error_of(deep).find("nested deeper than 64 levels") != std::string::npos);
  CHECK(error_of("[[[1]]]", {.max_depth = 2}).find("line 1, column 3") != std::string::npos);
  CHECK(error_of("[[1]]", {.max_depth = 2}).empty());
  // brackets inside strings are text, not nesting
  CHECK(error_of("[\"[[[[\\\"[[[\"]", {.max_depth = 1}).empty());
  CHECK(error_of("[1, 2, 3]", {.max_bytes = 4}).find("more than the limit of 4") != std::string::npos);
  CHECK_FALSE(try_parse(deep).has_value());
  std::string why;
  CHECK_FALSE(try_parse("{", {}, &why).has_value());
  CHECK(why.find("malformed JSON") != std::string::npos);
}

TEST_CASE("as_int: whole numbers only, in range") {
  CHECK(as_int(Json::parse("3")) == 3);
  CHECK(as_int(Json::parse("3.0")) == 3);
  CHECK(as_int(Json::parse("-0")) == 0);
  CHECK(as_int(Json::parse("-0.0")) == 0);
  CHECK_FALSE(as_int(Json::parse("3.5")).has_value());
  CHECK_FALSE(as_int(Json::parse("1e300")).has_value());
  CHECK_FALSE(as_int(Json::parse("9223372036854775808.0")).has_value());
  CHECK(as_int(Json::parse("9223372036854775807")) == INT64_MAX);
  CHECK_FALSE(as_int(Json::parse("18446744073709551615")).has_value());  // uint64 beyond int64
  CHECK_FALSE(as_int(Json::parse("99999999999999999999")).has_value());  // parsed as a double
  CHECK_FALSE(as_int(Json::parse("\"3\"")).has_value());
  CHECK_FALSE(as_int(Json::parse("true")).has_value());
  CHECK_FALSE(as_int(Json::parse("70000"), 0, 65535).has_value());
}

TEST_CASE("typed getters name the key and the source") {
  const Json j = Json::parse(R"({"s": "x", "n": 5, "f": 2.5, "l": ["a", "b"], "bad": ["a", 1]})");
  CHECK(get_string(j, "s", "reg") == "x");
  CHECK(get_int(j, "n", "reg", 1, 10) == 5);
  CHECK(get_strings(j, "l", "reg") == std::vector<std::string>{"a", "b"});
  CHECK_THROWS_WITH_AS(get_string(j, "n", "reg"),
                       doctest::Contains("reg: key 'n' must be a string, not an integer"), InvalidArgument);
  CHECK_THROWS_WITH_AS(get_string(j, "zz", "reg"), doctest::Contains("reg: key 'zz' is missing"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(get_int(j, "f", "reg", 0, 9),
                       doctest::Contains("reg: key 'f' must be an integer in 0..9, not 2.5"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(get_int(j, "n", "reg", 0, 4),
                       doctest::Contains("reg: key 'n' must be an integer in 0..4, not 5"), InvalidArgument);
  CHECK_THROWS_WITH_AS(get_strings(j, "bad", "reg"), doctest::Contains("array of strings"), InvalidArgument);
  CHECK_THROWS_AS(get_string(Json::parse("[1]"), "s", "reg"), InvalidArgument);
}

TEST_CASE("to_text and type_name describe any value") {
  CHECK(to_text(Json("abc")) == "abc");
  CHECK(to_text(Json::parse(R"({"a":[1,null]})")) == R"({"a":[1,null]})");
  CHECK(to_text(Json(std::string("bad \xff"))) == "bad \xff");  // a string is given back as is
  CHECK(to_text(Json::array({std::string("bad \xff")})) == "[\"bad \xef\xbf\xbd\"]");  // dumped: replaced
  CHECK(to_text(Json("abcdef"), 3) == "abc");
  CHECK(type_name(Json::parse("1")) == "an integer");
  CHECK(type_name(Json::parse("1.5")) == "a number");
  CHECK(type_name(Json::parse("[]")) == "an array");
  CHECK(type_name(Json::parse("{}")) == "an object");
  CHECK(type_name(Json::parse("null")) == "null");
}

TEST_CASE("read_file_head: bounded, and FIFOs and symlinks refused when asked") {
  TempDir dir;
  std::ofstream(dir / "small") << "hello";
  auto small = read_file_head(dir / "small", {.max_bytes = 5});
  REQUIRE(small.has_value());
  CHECK(small->bytes == "hello");
  CHECK_FALSE(small->truncated);
  auto cut = read_file_head(dir / "small", {.max_bytes = 3});
  REQUIRE(cut.has_value());
  CHECK(cut->bytes == "hel");
  CHECK(cut->truncated);

  std::string why;
  CHECK_FALSE(read_file_head(dir / "missing", {}, &why).has_value());
  CHECK(why == "No such file or directory");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  // A FIFO nobody writes would block a plain open and read forever.
  CHECK_FALSE(read_file_head(dir / "fifo", {.regular_only = true}, &why).has_value());
  CHECK(why == "it is not a regular file");
  REQUIRE(::symlink((dir / "small").c_str(), (dir / "link").c_str()) == 0);
  CHECK(read_file_head(dir / "link", {}).has_value());
  CHECK_FALSE(read_file_head(dir / "link", {.follow_symlinks = false}, &why).has_value());
  CHECK(why == "it is a symbolic link");
  CHECK_FALSE(read_file_head(dir.path, {}, &why).has_value());
}
