// The option table, the JSON Schema in configs/ and the example configs must agree.
#include "cli/option_specs.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/config_file.h"

using namespace ddp::cli;

namespace {

std::string source_dir() {
  const char* d = std::getenv("DDP_SOURCE_DIR");
  return d ? d : ".";
}

nlohmann::json schema() {
  std::ifstream in(source_dir() + "/configs/ddp-launch.schema.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("names map to flags and variables") {
  CHECK(flag_name("nproc_per_node") == "--nproc-per-node");
  CHECK(env_name("nproc_per_node") == "DDP_LAUNCH_NPROC_PER_NODE");
  REQUIRE(find_option("max_restarts") != nullptr);
  CHECK(find_option("max_restarts")->kind == ValueKind::kInt);
  CHECK(find_option("nope") == nullptr);
}

TEST_CASE("every schema property is an accepted config key, and every config key is in the schema") {
  auto s = schema();
  std::set<std::string> in_schema;
  for (const auto& [k, v] : s.at("properties").items()) in_schema.insert(k);
  std::set<std::string> accepted = {"$schema", "description"};
  for (const auto& spec : option_specs()) {
    if (spec.in_config) accepted.insert(std::string(spec.name));
  }
  CHECK(in_schema == accepted);
  CHECK(s.at("additionalProperties") == false);
}

TEST_CASE("schema types agree with the option kinds") {
  auto props = schema().at("properties");
  for (const auto& spec : option_specs()) {
    if (!spec.in_config) continue;
    CAPTURE(spec.name);
    const auto& p = props.at(std::string(spec.name));
    std::set<std::string> types;
    if (p.contains("type")) types.insert(p.at("type").get<std::string>());
    if (p.contains("oneOf")) {
      for (const auto& alt : p.at("oneOf")) types.insert(alt.at("type").get<std::string>());
    }
    switch (spec.kind) {
      case ValueKind::kInt: CHECK(types == std::set<std::string>{"integer"}); break;
      case ValueKind::kSeconds: CHECK(types == std::set<std::string>{"number"}); break;
      case ValueKind::kString: CHECK(types == std::set<std::string>{"string"}); break;
      case ValueKind::kIntOrString: CHECK(types == std::set<std::string>{"integer", "string"}); break;
      case ValueKind::kBool: CHECK(types == std::set<std::string>{"boolean"}); break;
      case ValueKind::kKeyValues: CHECK(types == std::set<std::string>{"object"}); break;
      case ValueKind::kStringList: CHECK(types == std::set<std::string>{"array"}); break;
    }
  }
}

TEST_CASE("every example config in configs/ loads") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/configs")) {
    if (e.path().extension() != ".json" || e.path().filename() == "ddp-launch.schema.json") continue;
    CAPTURE(e.path().string());
    CHECK_NOTHROW(load_config_file(e.path().string()));
    ++n;
  }
  CHECK(n >= 4);
}
