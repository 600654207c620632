#include "cli/settings.h"

#include <doctest/doctest.h>

using namespace ddp::cli;

TEST_CASE("later layers win; KEY=VALUE lists merge by key") {
  SettingLayer config = {{"nnodes", {{"2"}, "job.json line 2"}},
                         {"env", {{"A=1", "B=2"}, "job.json line 3"}}};
  SettingLayer env = {{"nnodes", {{"3"}, "DDP_LAUNCH_NNODES"}}, {"env", {{"B=env"}, "DDP_LAUNCH_ENV"}}};
  SettingLayer flags = {{"role", {{"trainer"}, "--role"}}, {"env", {{"C=3"}, "--env"}}};
  auto m = merge_layers({config, env, flags});
  CHECK(m.at("nnodes").items[0] == "3");
  CHECK(m.at("nnodes").source == "DDP_LAUNCH_NNODES");
  CHECK(m.at("role").items[0] == "trainer");
  CHECK(m.at("env").items == std::vector<std::string>{"A=1", "B=env", "C=3"});
}
