#include "cli/config_file.h"

#include <doctest/doctest.h>

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
})", "job.json");
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
  CHECK(error_of("{\"role\": \"a\",\n\"role\": \"b\"}").find("line 2: key 'role' appears twice") != std::string::npos);
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
  CHECK_THROWS_WITH_AS(load_config_file("/nonexistent/x.json"), doctest::Contains("/nonexistent/x.json"), InvalidArgument);
}
