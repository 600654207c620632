#pragma once
// argparse-style abbreviations of long flags, as torchrun accepts them: an unambiguous prefix of
// a long flag stands for the flag (`--nproc 4` is `--nproc-per-node 4`, `--max_r=2` is
// `--max_restarts=2`). Only the options before PROGRAM are looked at; `--` and the first word
// that is not an option end them. An exact flag name always wins over a prefix of a longer one.
// A prefix that matches several options is an InvalidArgument listing them; a word that matches
// none is left alone (the parser then reports it with a "did you mean").
#include <string>
#include <vector>

namespace ddp::cli {

struct FlagSpelling {
  std::string flag;    // "--nproc-per-node", "--nproc_per_node", "-r"
  std::string option;  // the option it sets: "nproc_per_node"
  bool takes_value = false;
};

// `args` without argv[0]; returns them with every abbreviation replaced by the option's first
// spelling in `flags`.
std::vector<std::string> expand_flag_prefixes(const std::vector<std::string>& args,
                                              const std::vector<FlagSpelling>& flags);

}  // namespace ddp::cli
