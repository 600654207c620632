#include "launcher/timeline_merge.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

using namespace ddp::launcher;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ddp-timeline-merge-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("merge_timelines: this job's rank files, in rank order, an unclosed one closed") {
  TempDir dir;
  const std::string target = dir.path + "/trace.json";
  write(dir.path + "/trace.rank7.json", "[\n{\"ph\":\"X\",\"pid\":7}\n]\n");  // before the job: stale
  const auto since = fs::file_time_type::clock::now();
  // The stale file is older than `since` (file times can be coarse: set it explicitly).
  fs::last_write_time(dir.path + "/trace.rank7.json", since - std::chrono::hours(1));
  write(dir.path + "/trace.rank10.json", "[\n{\"ph\":\"X\",\"pid\":10},\n{\"ph\":\"i\",\"pid\":10}\n]\n");
  write(dir.path + "/trace.rank2.json", "[\n{\"ph\":\"X\",\"pid\":2},\n{\"ph\":\"X\",\"pid\":2}");  // killed
  write(dir.path + "/trace.rankx.json", "[{\"pid\":99}]");
  write(dir.path + "/other.rank1.json", "[{\"pid\":98}]");
  for (const char* f : {"/trace.rank10.json", "/trace.rank2.json", "/trace.rankx.json", "/other.rank1.json"})
    fs::last_write_time(dir.path + f, since + std::chrono::seconds(1));  // file times are coarse
  const std::vector<int> ranks = merge_timelines(target, since);
  CHECK(ranks == std::vector<int>{2, 10});
  const auto merged = nlohmann::json::parse(read(target));
  REQUIRE(merged.size() == 4);
  CHECK(merged[0].at("pid") == 2);
  CHECK(merged[1].at("pid") == 2);
  CHECK(merged[2].at("pid") == 10);
  CHECK(merged[3].at("ph") == "i");
  CHECK_FALSE(fs::exists(target + ".merging"));
  // No rank file of this job: nothing merged, the target left alone.
  TempDir empty;
  CHECK(merge_timelines(empty.path + "/t.json", since).empty());
  CHECK_FALSE(fs::exists(empty.path + "/t.json"));
}
