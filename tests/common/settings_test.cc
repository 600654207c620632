#include "common/settings.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/error.h"
#include "tests/common/settings_test_util.h"

using namespace ddp;
using namespace ddp::settings;

namespace {

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InvalidArgument& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("the table: names unique, every default valid for its type and range") {
  std::set<std::string_view> names;
  for (const Setting* s : all()) {
    CAPTURE(s->name);
    CHECK(names.insert(s->name).second);
    CHECK_FALSE(s->meaning.empty());
    CHECK(find(s->name) == s);
    if (s->fallback.empty() || s->name.find_first_of("<*") != std::string_view::npos) continue;
    ::unsetenv(std::string(s->name).c_str());
    CHECK_NOTHROW(effective(*s));
    if (s->type == Type::kInt) CHECK_NOTHROW(int_value(*s));
    if (s->type == Type::kBool) CHECK_NOTHROW(bool_value(*s));
    if (s->type == Type::kChoice) CHECK(choice(*s) == s->fallback);
    if (s->type == Type::kAutoInt) CHECK_NOTHROW(auto_int(*s));
    if (s->type == Type::kAutoBool) CHECK_NOTHROW(auto_bool(*s));
  }
}

TEST_CASE("typed reads: the table's default, a set value, and a bad one named with what is allowed") {
  ::unsetenv("DDP_TCP_SHM_DEPTH");
  CHECK(int_value(kTcpShmDepth) == 4);
  CHECK_FALSE(get_int(kTcpShmDepth).has_value());
  ::setenv("DDP_TCP_SHM_DEPTH", "8", 1);
  CHECK(int_value(kTcpShmDepth) == 8);
  for (const char* bad : {"4x2", "1", "65", "", " 8"}) {
    CAPTURE(bad);
    ::setenv("DDP_TCP_SHM_DEPTH", bad, 1);
    if (*bad == '\0') {
      CHECK(int_value(kTcpShmDepth) == 4);  // empty is unset
      continue;
    }
    CHECK(error_of([] { int_value(kTcpShmDepth); }) ==
          std::string("environment variable DDP_TCP_SHM_DEPTH='") + bad + "': an integer from 2 to 64");
  }
  ::unsetenv("DDP_TCP_SHM_DEPTH");

  ::setenv("DDP_TCP_TRANSPORT", "SHM", 1);
  CHECK(choice(kTcpTransport) == "shm");
  ::setenv("DDP_TCP_TRANSPORT", "shared", 1);
  CHECK(error_of([] { choice(kTcpTransport); }) ==
        "environment variable DDP_TCP_TRANSPORT='shared': one of auto, shm, socket, hierarchical");
  ::unsetenv("DDP_TCP_TRANSPORT");
  CHECK(choice(kTcpTransport) == "auto");

  ::setenv("DDP_TCP_FINGERPRINT", "maybe", 1);
  CHECK(error_of([] { bool_value(kTcpFingerprint); }).find("DDP_TCP_FINGERPRINT='maybe': a boolean") !=
        std::string::npos);
  ::setenv("DDP_TCP_FINGERPRINT", "off", 1);
  CHECK_FALSE(bool_value(kTcpFingerprint));
  CHECK(effective(kTcpFingerprint) == "0");
  ::unsetenv("DDP_TCP_FINGERPRINT");
  CHECK(effective(kTcpFingerprint) == "1");

  ::unsetenv("DDP_TCP_SPIN_US");
  CHECK(int_or(kTcpSpinUs, 123) == 123);  // a default the reader computes
  CHECK_THROWS_AS(int_value(kTcpSpinUs), std::logic_error);
  CHECK(effective(kTcpSpinUs).empty());
}

TEST_CASE("reads by name: declared names and families only; wrong-type reads are caught") {
  ::setenv("DDP_LAUNCH_NNODES", "2", 1);
  CHECK(get("DDP_LAUNCH_NNODES") == "2");
  CHECK(find("DDP_LAUNCH_NNODES") == &kLaunchOption);
  CHECK(find("SLURM_JOB_ID") == &kSlurm);
  CHECK(find("DDP_NOT_A_SETTING") == nullptr);
  CHECK(find("DDP_LAUNCH_") == nullptr);
  CHECK_THROWS_AS(get("DDP_NOT_A_SETTING"), std::logic_error);
  CHECK_THROWS_AS(get(kLaunchOption), std::logic_error);
  CHECK_THROWS_AS(get_int(kTcpTransport), std::logic_error);
  ::unsetenv("DDP_LAUNCH_NNODES");
}

enum class Transport { kAuto, kShm, kSocket, kHierarchical };  // DDP_TCP_TRANSPORT's, in order
static_assert(choices_are(kTcpTransport, "auto|shm|socket|hierarchical"));
static_assert(!choices_are(kTcpTransport, "auto|socket|shm|hierarchical"));
static_assert(!choices_are(kTcpSocketStreams, ""));  // not a choice

TEST_CASE(
    "choice_index and choice_as: the table's order, in any case; the default when unset; a bad value named") {
  testing::check_choice_as<Transport>(kTcpTransport, {{"auto", Transport::kAuto},
                                                      {"shm", Transport::kShm},
                                                      {"socket", Transport::kSocket},
                                                      {"hierarchical", Transport::kHierarchical}});
  testing::SetEnv env(kMpiThreadLevel, "Serialized");
  CHECK(choice_index(kMpiThreadLevel) == 2);
  testing::SetEnv bad(kTcpTransport, "shared");
  CHECK(error_of([] { choice_as<Transport>(kTcpTransport); }) ==
        "environment variable DDP_TCP_TRANSPORT='shared': one of auto, shm, socket, hierarchical");
}

TEST_CASE(
    "auto_int and auto_bool: nullopt for auto or unset, else the value, validated; effective is canonical") {
  testing::SetEnv streams(kTcpSocketStreams, std::nullopt);
  CHECK(auto_int(kTcpSocketStreams) == std::nullopt);
  CHECK(effective(kTcpSocketStreams) == "auto");
  testing::SetEnv three(kTcpSocketStreams, "03");
  CHECK(auto_int(kTcpSocketStreams) == 3);
  CHECK(effective(kTcpSocketStreams) == "3");
  testing::SetEnv nine(kTcpSocketStreams, "9");
  CHECK(error_of([] { auto_int(kTcpSocketStreams); }) ==
        "environment variable DDP_TCP_SOCKET_STREAMS='9': auto, or an integer from 1 to 8");
  CHECK_THROWS_AS(effective(kTcpSocketStreams), InvalidArgument);

  testing::SetEnv overlap(kTcpHierarchyOverlap, "AUTO");
  CHECK(auto_bool(kTcpHierarchyOverlap) == std::nullopt);
  CHECK(effective(kTcpHierarchyOverlap) == "auto");
  testing::SetEnv yes(kTcpHierarchyOverlap, "Yes");
  CHECK(auto_bool(kTcpHierarchyOverlap) == true);
  CHECK(effective(kTcpHierarchyOverlap) == "1");
  testing::SetEnv off(kTcpHierarchyOverlap, "off");
  CHECK(auto_bool(kTcpHierarchyOverlap) == false);
  testing::SetEnv maybe(kTcpHierarchyOverlap, "maybe");
  CHECK(
      error_of([] { auto_bool(kTcpHierarchyOverlap); }) ==
      "environment variable DDP_TCP_HIERARCHY_OVERLAP='maybe': auto, or a boolean: 1/0, true/false, yes/no, "
      "on/off");
}

TEST_CASE("typed reads of the wrong type are caught") {
  CHECK_THROWS_AS(choice_index(kTcpSpinUs), std::logic_error);
  CHECK_THROWS_AS(choice_as<Transport>(kTcpSocketStreams), std::logic_error);
  CHECK_THROWS_AS(auto_int(kTcpShmDepth), std::logic_error);
  CHECK_THROWS_AS(auto_int(kTcpHierarchyOverlap), std::logic_error);
  CHECK_THROWS_AS(auto_bool(kTcpFingerprint), std::logic_error);
}

TEST_CASE("check(section): one call validates every variable of the section, and only those") {
  CHECK_NOTHROW(check(Section::kTcp));
  {
    testing::SetEnv bad(kTcpInlineMaxBytes, "lots");  // process-scoped, read only by some groups
    CHECK(error_of([] { check(Section::kTcp); }) ==
          "environment variable DDP_TCP_INLINE_MAX_BYTES='lots': an integer of at least 0");
    CHECK_NOTHROW(check(Section::kMpi));
  }
  {
    testing::SetEnv bad(kTcpHierarchySmallBytes, "64K");
    CHECK_THROWS_WITH_AS(check(Section::kTcp), doctest::Contains("DDP_TCP_HIERARCHY_SMALL_BYTES='64K'"),
                         InvalidArgument);
  }
  {
    testing::SetEnv bad(kMpiThreadLevel, "many");
    CHECK_THROWS_WITH_AS(check(Section::kMpi), doctest::Contains("DDP_MPI_THREAD_LEVEL='many'"),
                         InvalidArgument);
    CHECK_NOTHROW(check(Section::kTcp));
  }
  ::setenv("DDP_LAUNCH_NNODES", "x", 1);  // a family's members are not read
  CHECK_NOTHROW(check(Section::kLauncher));
  ::unsetenv("DDP_LAUNCH_NNODES");
}

TEST_CASE("parse_bool: the four spellings each way in any case, nothing else") {
  for (const char* on : {"1", "true", "YES", "On"}) CHECK(parse_bool(on) == true);
  for (const char* off : {"0", "False", "no", "OFF"}) CHECK(parse_bool(off) == false);
  for (const char* bad : {"", " 1", "2", "maybe", "truee", "-1", "yes\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_bool(bad).has_value());
  }
}

TEST_CASE("the printed table shows the values in effect and hides the job token") {
  ::setenv("DDP_TCP_SOCKET_ALGO", "ring", 1);
  ::setenv("DDP_JOB_TOKEN", "s3cret", 1);
  const std::string table = format_table();
  CHECK(table.find("DDP_TCP_SOCKET_ALGO") != std::string::npos);
  CHECK(table.find("= ring") != std::string::npos);
  CHECK(table.find("s3cret") == std::string::npos);
  ::setenv("DDP_TCP_SOCKET_ALGO", "best", 1);
  CHECK(format_table().find("best (INVALID: one of auto, direct, hd, ring)") != std::string::npos);
  ::unsetenv("DDP_TCP_SOCKET_ALGO");
  ::unsetenv("DDP_JOB_TOKEN");
  const std::string md = format_markdown();
  for (const Setting* s : all()) CHECK(md.find("| `" + std::string(s->name) + "` |") != std::string::npos);
  // Each section once: the table lists a section's settings together.
  std::set<std::string> headings;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("## ")) CHECK_MESSAGE(headings.insert(line).second, "twice: " << line);
  }
}
