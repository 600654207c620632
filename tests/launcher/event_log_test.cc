#include "launcher/event_log.h"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddp-event-log-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    install_event_log({});
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

}  // namespace

TEST_CASE("event log: one JSON object a line, with the common fields, the context and the event's own") {
  TempDir dir;
  const std::string path = dir.path + "/events.jsonl";
  emit_event("before_install");  // no log: nothing, no error
  CHECK_FALSE(event_log_enabled());
  install_event_log({EventLogTarget::Kind::kFile, path});
  CHECK(event_log_enabled());
  set_event_context("run_id", "job7");
  emit_event("first", {{"n", 1}});
  set_event_context("round", 2);
  emit_event("second", {{"text", std::string("bad \xff utf-8")}, {"round", 9}});
  set_event_context("round", nullptr);
  emit_event("third");
  install_event_log({});  // null: later events go nowhere
  emit_event("dropped");
  const auto lines = read_lines(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].at("event") == "first");
  CHECK(lines[0].at("n") == 1);
  CHECK(lines[0].at("run_id") == "job7");
  CHECK(lines[0].at("launcher_pid") == ::getpid());
  CHECK(lines[0].at("time").get<double>() > 1.5e9);
  CHECK(!lines[0].at("host").get<std::string>().empty());
  CHECK(lines[0].count("round") == 0);
  CHECK(lines[1].at("round") == 9);  // the event's own field wins over the context
  CHECK(lines[1].at("text") == "bad \xef\xbf\xbd utf-8");
  CHECK(lines[2].count("round") == 0);
  CHECK(lines[2].at("time").get<double>() >= lines[0].at("time").get<double>());
  CHECK(event_log_failures() == 0);
  set_event_context("run_id", nullptr);
}

TEST_CASE("event log: a file is appended to, never followed through a symlink; a bad path throws") {
  TempDir dir;
  const std::string path = dir.path + "/events.jsonl";
  std::ofstream(path) << "{\"event\":\"earlier\"}\n";
  install_event_log({EventLogTarget::Kind::kFile, path});
  emit_event("later");
  install_event_log({});
  const auto lines = read_lines(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].at("event") == "later");
  REQUIRE(::symlink(path.c_str(), (dir.path + "/link").c_str()) == 0);
  CHECK_THROWS_AS(install_event_log({EventLogTarget::Kind::kFile, dir.path + "/link"}), SystemError);
  CHECK_THROWS_WITH_AS(install_event_log({EventLogTarget::Kind::kFile, dir.path + "/no/such/dir/e.jsonl"}),
                       doctest::Contains("event log"), SystemError);
}
