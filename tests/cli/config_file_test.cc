#include "cli/config_file.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

using namespace ddp;
using namespace ddp::cli;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_config(text, "job.json");
  } catch (const InvalidArgument& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("typed values become settings with file and line as source") {
  auto layer = parse_config(R"({
  "nproc_per_node": 4,
  "nnodes": "2",
  "standalone": false,
  "monitor_interval": 0.5,
  "env": {"A": "1", "B": "x=y"},
  "command": ["./train", "--epochs", "3"]
})",
                            "job.json");
  CHECK(layer.at("nproc_per_node").items == std::vector<std::string>{"4"});
  CHECK(layer.at("nproc_per_node").source == "job.json line 2 (key 'nproc_per_node')");
  CHECK(layer.at("nnodes").items[0] == "2");
  CHECK(layer.at("standalone").items[0] == "false");
  CHECK(layer.at("monitor_interval").items[0] == "0.5");
  CHECK(layer.at("env").items == std::vector<std::string>{"A=1", "B=x=y"});
  CHECK(layer.at("env").source.find("line 6") != std::string::npos);
  CHECK(layer.at("command").items.size() == 3);
}

TEST_CASE("unknown key: named with its line and a did-you-mean") {
  auto msg = error_of("{\n  \"nnodes\": 1,\n  \"nproc_per_nod\": 2\n}");
  CHECK(msg.find("job.json line 3") != std::string::npos);
  CHECK(msg.find("'nproc_per_nod'") != std::string::npos);
  CHECK(msg.find("did you mean 'nproc_per_node'?") != std::string::npos);
  // kebab-case keys get pointed at the snake_case spelling
  CHECK(error_of("{\"max-restarts\": 1}").find("did you mean 'max_restarts'?") != std::string::npos);
  // a flag-only setting is not a config key
  CHECK(error_of("{\"config\": \"x.json\"}").find("unknown key 'config'") != std::string::npos);
}

TEST_CASE("wrong types name the key, the line and both types") {
  auto msg = error_of("{\n\n  \"max_restarts\": \"three\"\n}");
  CHECK(msg.find("job.json line 3") != std::string::npos);
  CHECK(msg.find("'max_restarts' must be an integer, not a string") != std::string::npos);
  CHECK(error_of("{\"standalone\": 1}").find("must be true or false") != std::string::npos);
  CHECK(error_of("{\"nproc_per_node\": [1]}").find("not an array") != std::string::npos);
  CHECK(error_of("{\"nproc_per_node\": 1.5}").find("not a number") != std::string::npos);
  CHECK(error_of("{\"command\": []}").find("array of strings") != std::string::npos);
  auto env_msg = error_of("{\n \"env\": {\n  \"A\": \"1\",\n  \"B\": 2\n }\n}");
  CHECK(env_msg.find("line 4") != std::string::npos);
  CHECK(env_msg.find("'env.B' must be a string") != std::string::npos);
}

TEST_CASE("malformed JSON reports line and column") {
  auto msg = error_of("{\n  \"nnodes\": 2,\n  \"role\": }\n");
  CHECK(msg.find("job.json line 3, column") != std::string::npos);
  CHECK(msg.find("malformed JSON") != std::string::npos);
  CHECK(error_of("[1, 2]").find("must be a JSON object") != std::string::npos);
  CHECK(error_of("").find("malformed JSON") != std::string::npos);
}

TEST_CASE("duplicate keys and meta keys") {
  CHECK(error_of("{\"role\": \"a\",\n\"role\": \"b\"}").find("line 2: key 'role' appears twice") !=
        std::string::npos);
  auto layer = parse_config(R"({"$schema": "x", "description": "y", "role": "r"})", "j");
  CHECK(layer.size() == 1);
  CHECK(layer.at("role").items[0] == "r");
}

TEST_CASE("strings with braces, colons and escapes do not confuse line tracking") {
  auto layer = parse_config("{\"description\": \"a {\\\"b\\\": [1]} : c\",\n\"role\": \"x\\\\\"}", "j");
  CHECK(layer.at("role").items[0] == "x\\");
  CHECK(layer.at("role").source == "j line 2 (key 'role')");
}

TEST_CASE("a missing file is an error naming it") {
  CHECK_THROWS_WITH_AS(load_config_file("/nonexistent/x.json"), doctest::Contains("/nonexistent/x.json"),
                       InvalidArgument);
}

TEST_CASE("unusual but valid numbers: whole numbers are integers, the rest are clear errors") {
  // 1e400 overflows a double: nlohmann throws its own out_of_range, which used to abort.
  auto overflow = error_of("{\n  \"max_restarts\": 1e400\n}");
  CHECK(overflow.find("job.json line 2, column 19") != std::string::npos);
  CHECK(overflow.find("1e400") != std::string::npos);
  CHECK(parse_config(R"({"max_restarts": 3.0})", "j").at("max_restarts").items[0] == "3");
  CHECK(parse_config(R"({"node_rank": -0})", "j").at("node_rank").items[0] == "0");
  CHECK(parse_config(R"({"nproc_per_node": 2.0})", "j").at("nproc_per_node").items[0] == "2");
  CHECK(parse_config(R"({"monitor_interval": -0.0})", "j").at("monitor_interval").items[0] == "-0.0");
  for (const char* big :
       {"99999999999999999999", "18446744073709551615", "-9223372036854775809", "2147483648", "1e300"}) {
    CAPTURE(big);
    auto msg = error_of(std::string("{\"master_port\": ") + big + "}");
    CHECK(msg.find("'master_port' must be an integer in -2147483648..2147483647") != std::string::npos);
  }
  CHECK(error_of(R"({"max_restarts": 2.5})").find("must be an integer, not a number") != std::string::npos);
}

TEST_CASE("configs past the limits: deep nesting, invalid UTF-8, huge files") {
  auto deep = error_of("{\"env\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  CHECK(deep.find("nested deeper than") != std::string::npos);
  CHECK(error_of("{\"role\": \"\xc3\x28\"}").find("malformed JSON") != std::string::npos);
  CHECK(error_of(R"({"command": ["a", 1]})")
            .find("must be an array of strings, not an array holding an integer") != std::string::npos);
  char dir[] = "/tmp/ddp-config-test-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string big = std::string(dir) + "/big.json";
  {
    std::ofstream out(big);
    out << "{\"description\": \"" << std::string(2 << 20, 'x') << "\"}";
  }
  CHECK_THROWS_WITH_AS(load_config_file(big), doctest::Contains("is larger than 1048576 bytes"),
                       InvalidArgument);
  std::filesystem::remove_all(dir);
}
