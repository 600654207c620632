#include "common/settings.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/error.h"

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
