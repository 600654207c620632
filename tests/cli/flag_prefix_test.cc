#include "cli/flag_prefix.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::cli;
using Args = std::vector<std::string>;

namespace {

const std::vector<FlagSpelling> kFlags = {
    {"--nproc-per-node", "nproc_per_node", true},
    {"--nproc_per_node", "nproc_per_node", true},
    {"--nnodes", "nnodes", true},
    {"--node-rank", "node_rank", true},
    {"--node_rank", "node_rank", true},
    {"--no-python", "no_python", false},
    {"--no_python", "no_python", false},
    {"--max-restarts", "max_restarts", true},
    {"--max_restarts", "max_restarts", true},
    {"--tee", "tee", true},
    {"-t", "tee", true},
    {"--standalone", "standalone", false},
};

}  // namespace

TEST_CASE("an unambiguous prefix stands for its flag, in either spelling, with = or a separate value") {
  CHECK(expand_flag_prefixes({"--nproc", "4", "./train"}, kFlags) ==
        Args{"--nproc-per-node", "4", "./train"});
  CHECK(expand_flag_prefixes({"--nproc_per=4", "x"}, kFlags) == Args{"--nproc-per-node=4", "x"});
  CHECK(expand_flag_prefixes({"--max_r", "2", "--stand", "p"}, kFlags) ==
        Args{"--max-restarts", "2", "--standalone", "p"});
  CHECK(expand_flag_prefixes({"--nn", "2", "p"}, kFlags) == Args{"--nnodes", "2", "p"});
}

TEST_CASE("exact names win; values, PROGRAM and what follows it are left alone") {
  CHECK(expand_flag_prefixes({"--tee", "3", "p"}, kFlags) == Args{"--tee", "3", "p"});
  // A value that looks like a prefix is a value.
  CHECK(expand_flag_prefixes({"--tee", "--nproc", "p"}, kFlags) == Args{"--tee", "--nproc", "p"});
  CHECK(expand_flag_prefixes({"-t", "3", "p", "--nproc", "9"}, kFlags) ==
        Args{"-t", "3", "p", "--nproc", "9"});
  CHECK(expand_flag_prefixes({"--", "--nproc"}, kFlags) == Args{"--", "--nproc"});
  CHECK(expand_flag_prefixes({"--bogus", "p"}, kFlags) == Args{"--bogus", "p"});  // the parser reports it
}

TEST_CASE("an ambiguous prefix is an error listing the candidates") {
  CHECK_THROWS_WITH_AS(expand_flag_prefixes({"--no", "p"}, kFlags),
                       doctest::Contains("ambiguous option '--no' could match --node-rank, --no-python"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(expand_flag_prefixes({"--n=1", "p"}, kFlags),
                       doctest::Contains("--nproc-per-node, --nnodes, --node-rank, --no-python"),
                       InvalidArgument);
}
