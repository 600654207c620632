#include "cli/suggest.h"

#include <doctest/doctest.h>

using namespace ddp::cli;

TEST_CASE("edit distance") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "abc") == 0);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("closest: typos, hyphen/underscore, and nothing for far words") {
  std::vector<std::string> names = {"nproc_per_node", "nnodes", "node_rank", "master_addr"};
  CHECK(closest("nproc_per_nod", names) == "nproc_per_node");
  CHECK(closest("nproc-per-node", names) == "nproc_per_node");
  CHECK(closest("nodes", names) == "nnodes");
  CHECK_FALSE(closest("completely_different", names).has_value());
  CHECK(did_you_mean("master_adr", names) == " (did you mean 'master_addr'?)");
  CHECK(did_you_mean("zzz", names).empty());
}
