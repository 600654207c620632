#pragma once
// The command line of ddp-launch: `ddp-launch [options] [--] PROGRAM [ARGS...]`. Options are
// generated from the option table (option_specs.h), with torchrun's spellings: --nproc-per-node
// and --nproc_per_node both work. Everything after PROGRAM belongs to PROGRAM.
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/settings.h"

namespace ddp::cli {

struct CommandLine {
  SettingLayer flags;                // the options given, sourced "--flag-name"
  std::vector<std::string> command;  // PROGRAM [ARGS...]
  bool help = false;                 // --help / -h: print help_text() and exit 0
  bool version = false;              // --version: print version_text() and exit 0
  // --print-settings: print the environment settings with the values in effect and exit 0;
  // with --markdown, as docs/environment.md.
  bool print_settings = false;
  bool markdown = false;
  // --status: print the job's round, nodes and their liveness from its store (read-only) and
  // exit; the rendezvous flags say which job; a PROGRAM, if given, is ignored.
  bool status = false;
  std::string format = "text";  // --format: text | json (--status)
};

// Throws InvalidArgument for an unknown option (with "did you mean"), a missing value, or a
// malformed one CLI11 can detect.
CommandLine parse_command_line(const std::vector<std::string>& args);  // args without argv[0]

// The column where help_text()'s option descriptions start (continuation lines included).
constexpr size_t kHelpOptionColumn = 34;

// Every spelling the command line accepts ("--nproc-per-node", "--nproc_per_node", "-r", "--help"...),
// sorted: the set tests compare with torchrun's (tests/cli/torchrun_flags.txt).
std::vector<std::string> accepted_flags();

std::string help_text();
std::string version_text();

}  // namespace ddp::cli
