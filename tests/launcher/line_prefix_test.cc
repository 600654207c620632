#include "launcher/line_prefix.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

using namespace ddp::launcher;

namespace {

LinePrefixOptions worker(int rank, int local_rank, const std::string& tmpl = "") {
  LinePrefixOptions o;
  o.template_text = tmpl;
  o.rank = rank;
  o.local_rank = local_rank;
  return o;
}

}  // namespace

TEST_CASE("torchrun's default prefix: [<role><local rank>]:") {
  CHECK(line_prefix(worker(3, 3)) == "[default3]:");
  CHECK(line_prefix(worker(11, 3)) == "[default3]:");
  auto o = worker(0, 1);
  o.role = "trainer";
  CHECK(line_prefix(o) == "[trainer1]:");
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: ${role_name} ${rank} ${local_rank}, like safe_substitute") {
  CHECK(line_prefix(worker(11, 3, "[${role_name}${rank}]:")) == "[default11]:");
  CHECK(line_prefix(worker(11, 3, "$rank/$local_rank| ")) == "11/3| ");
  CHECK(line_prefix(worker(11, 3, "$$${rank}")) == "$11");
  CHECK(line_prefix(worker(11, 3, "${nope} ${rank")) == "${nope} ${rank");  // kept as written
  CHECK(line_prefix(worker(11, 3, "cost $5")) == "cost $5");
  CHECK(line_prefix(worker(11, 3, "end$")) == "end$");
}

TEST_CASE("colour wraps the prefix only, chosen by local rank") {
  auto o = worker(0, 0);
  o.colour = true;
  const std::string c0 = line_prefix(o);
  CHECK(c0.starts_with("\x1b["));
  CHECK(c0.find("[default0]:") != std::string::npos);
  CHECK(c0.ends_with("\x1b[0m"));
  o.local_rank = 1;
  CHECK(line_prefix(o).substr(0, 5) != c0.substr(0, 5));
}

TEST_CASE("colour only on a terminal, and never with NO_COLOR") {
  int fd = ::open("/dev/null", O_WRONLY);
  REQUIRE(fd >= 0);
  CHECK_FALSE(colour_wanted(fd));  // not a terminal
  ::close(fd);
  int pty = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (pty < 0 || ::grantpt(pty) != 0 || ::unlockpt(pty) != 0) return;  // no ptys here
  int tty = ::open(::ptsname(pty), O_RDWR | O_NOCTTY);
  REQUIRE(tty >= 0);
  ::unsetenv("NO_COLOR");
  CHECK(colour_wanted(tty));
  ::setenv("NO_COLOR", "1", 1);
  CHECK_FALSE(colour_wanted(tty));
  ::setenv("NO_COLOR", "", 1);  // empty: not set, says no-color.org
  CHECK(colour_wanted(tty));
  ::unsetenv("NO_COLOR");
  ::close(tty);
  ::close(pty);
}
