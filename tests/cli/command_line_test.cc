#include "cli/command_line.h"

#include <doctest/doctest.h>

#include "cli/exit_codes.h"
#include "common/error.h"

using namespace ddp;
using namespace ddp::cli;

TEST_CASE("options before PROGRAM are ours; everything after belongs to PROGRAM") {
  auto cl = parse_command_line({"--nproc-per-node", "2", "./prog", "--nproc-per-node", "9", "-x"});
  CHECK(cl.flags.at("nproc_per_node").items[0] == "2");
  CHECK(cl.flags.at("nproc_per_node").source == "--nproc-per-node");
  CHECK(cl.command == std::vector<std::string>{"./prog", "--nproc-per-node", "9", "-x"});
  auto dd = parse_command_line({"--standalone", "--", "-weird-name", "a"});
  CHECK(dd.flags.at("standalone").items[0] == "true");
  CHECK(dd.command == std::vector<std::string>{"-weird-name", "a"});
}

TEST_CASE("torchrun spellings and repeatable --env") {
  auto cl =
      parse_command_line({"--nproc_per_node=4", "--max_restarts", "1", "--env", "A=1", "--env", "B=2", "p"});
  CHECK(cl.flags.at("nproc_per_node").items[0] == "4");
  CHECK(cl.flags.at("max_restarts").items[0] == "1");
  CHECK(cl.flags.at("env").items == std::vector<std::string>{"A=1", "B=2"});
  CHECK(cl.command == std::vector<std::string>{"p"});
}

TEST_CASE("unknown options get a did-you-mean") {
  CHECK_THROWS_WITH_AS(
      parse_command_line({"--nproc-per-mode", "2", "p"}),
      doctest::Contains("unknown option '--nproc-per-mode' (did you mean '--nproc-per-node'?)"),
      InvalidArgument);
  CHECK_THROWS_AS(parse_command_line({"--max-restarts"}), InvalidArgument);
}

TEST_CASE(
    "argparse abbreviations: an unambiguous prefix is the flag, an ambiguous one lists the candidates") {
  auto cl = parse_command_line({"--nproc", "4", "--max_r=2", "--stand", "p", "--nproc", "9"});
  CHECK(cl.flags.at("nproc_per_node").items[0] == "4");
  CHECK(cl.flags.at("max_restarts").items[0] == "2");
  CHECK(cl.flags.at("standalone").items[0] == "true");
  CHECK(cl.command == std::vector<std::string>{"p", "--nproc", "9"});
  CHECK_THROWS_WITH_AS(parse_command_line({"--no", "p"}),
                       doctest::Contains("ambiguous option '--no' could match --node-rank, --no-python"),
                       InvalidArgument);
  CHECK(parse_command_line({"--he"}).help);
  // the short flags and their values are skipped over
  CHECK(parse_command_line({"-r", "3", "--nproc", "2", "p"}).flags.at("nproc_per_node").items[0] == "2");
}

TEST_CASE("torchrun's --start-method, --run-path and --numa-binding are accepted") {
  auto cl = parse_command_line({"--start-method", "spawn", "--run-path", "--numa_binding", "node", "p"});
  CHECK(cl.flags.at("start_method").items[0] == "spawn");
  CHECK(cl.flags.at("run_path").items[0] == "true");
  CHECK(cl.flags.at("numa_binding").items[0] == "node");
  CHECK(cl.command == std::vector<std::string>{"p"});
  const std::string h = help_text();
  CHECK(h.find("--start-method") != std::string::npos);
  CHECK(h.find("ignored") != std::string::npos);
  CHECK(h.find("PET_") != std::string::npos);
}

TEST_CASE("help teaches: groups, examples, exit codes") {
  auto cl = parse_command_line({"--help"});
  CHECK(cl.help);
  std::string h = help_text();
  for (const char* part :
       {"Usage: ddp-launch [OPTIONS] [--] PROGRAM [ARGS...]", "Layout", "Rendezvous", "Supervision", "Logs",
        "Examples:", "Exit codes:", "121", "--nproc-per-node", "DDP_LAUNCH_", "DDP_JOB_TOKEN"}) {
    CAPTURE(part);
    CHECK(h.find(part) != std::string::npos);
  }
  CHECK(parse_command_line({"--version"}).version);
  CHECK(version_text().find("ddp-launch ") == 0);
}
