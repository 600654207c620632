#include "cli/text_wrap.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/command_line.h"

using namespace ddp::cli;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every word of `text`, in order, whatever the spacing.
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("lines that fit are kept as they are, spacing and blank lines included") {
  const std::string text = "Usage: x\n\n  -a,--all     Everything   [default: no]\ntrailing";
  CHECK(wrap_text(text, 80) == text);
}

TEST_CASE("an option's description continues under its own column") {
  const std::string line =
      "  --max-restarts INT   Restart the whole worker group this many times after a failure";
  const auto out = lines_of(wrap_text(line, 50));
  REQUIRE(out.size() == 3);
  CHECK(out[0] == "  --max-restarts INT   Restart the whole worker");
  CHECK(out[1] == std::string(23, ' ') + "group this many times after");
  CHECK(out[2] == std::string(23, ' ') + "a failure");
}

TEST_CASE("an indented line continues 2 further in; a word longer than the room stays whole") {
  const auto out = lines_of(wrap_text("  one two three " + std::string(50, 'x') + " four", 40));
  REQUIRE(out.size() == 3);
  CHECK(out[0] == "  one two three");
  CHECK(out[1] == "    " + std::string(50, 'x'));
  CHECK(out[2] == "    four");
}

TEST_CASE("a gap right of the middle is not a hanging column") {
  const std::string line = "  ddp-launch --nproc-per-node auto train.py        # one per GPU, python3 -u";
  const auto out = lines_of(wrap_text(line, 50));
  REQUIRE(out.size() == 2);
  CHECK(out[0] == "  ddp-launch --nproc-per-node auto train.py # one");
  CHECK(out[1] == "    per GPU, python3 -u");
}

TEST_CASE("prose is refilled as a paragraph; a heading and its indented lines are not joined") {
  const std::string text =
      "Settings come from, strongest first: the command line, the variables\n"
      "and the config file.\n"
      "\n"
      "Examples:\n"
      "  run a\n"
      "  run b\n";
  CHECK(wrap_text(text, 40) ==
        "Settings come from, strongest first: the\n"
        "command line, the variables and the\n"
        "config file.\n"
        "\n"
        "Examples:\n"
        "  run a\n"
        "  run b\n");
  // Every line fits: kept as written.
  CHECK(wrap_text(text, 80) == text);
}

TEST_CASE("a table row and its continuation line are refilled together under the meaning") {
  const std::string text =
      "  128+N    a worker died of signal N (e.g. 137 = SIGKILL), or the job was stopped by\n"
      "           handled signal N\n"
      "  2        usage\n";
  CHECK(wrap_text(text, 50) ==
        "  128+N    a worker died of signal N (e.g. 137 =\n"
        "           SIGKILL), or the job was stopped by\n"
        "           handled signal N\n"
        "  2        usage\n");
}

TEST_CASE("an option whose names fill their column continues at the option column") {
  const std::string line =
      "  --master-port,--master_port INT MASTER_PORT for the workers, left free for them";
  const auto out = lines_of(wrap_text(line, 60, 34));
  REQUIRE(out.size() == 3);
  CHECK(out[0] == "  --master-port,--master_port INT MASTER_PORT for the");
  CHECK(out[1] == std::string(34, ' ') + "workers, left free for");
  CHECK(out[2] == std::string(34, ' ') + "them");
}

TEST_CASE("ddp-launch --help at 80 columns: no line over 80, every word kept") {
  const std::string help = help_text();
  for (size_t width : {80, 100, 60}) {
    const std::string wrapped = wrap_text(help, width, kHelpOptionColumn);
    for (const auto& line : lines_of(wrapped)) {
      // Only a single word longer than the room may overflow.
      if (line.size() > width) CHECK_MESSAGE(words_of(line).size() == 1, line);
    }
    CHECK(words_of(wrapped) == words_of(help));
  }
}

TEST_CASE("terminal width: 80 when not a terminal") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  CHECK(terminal_width(fds[1]) == 80);
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK(terminal_width(-1) == 80);
}
