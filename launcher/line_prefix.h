#pragma once
// The prefix of each worker line the launcher relays to the console, as torchrun writes it:
// "[<role><local rank>]:" ("[default3]:"), or TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE with
// ${role_name}, ${rank} and ${local_rank} substituted ($name works too, $$ is a '$', anything
// else is kept as written, like Python's Template.safe_substitute). On a terminal the prefix is
// coloured by local rank, never when the console is a pipe or a file, nor with NO_COLOR set
// (https://no-color.org). Pure functions apart from colour_wanted.
#include <string>

namespace ddp::launcher {

struct LinePrefixOptions {
  std::string template_text;  // empty: torchrun's default
  std::string role = "default";
  int rank = 0;
  int local_rank = 0;
  bool colour = false;
};

std::string line_prefix(const LinePrefixOptions& options);

// Whether lines written to `fd` should be coloured: a terminal, and NO_COLOR unset or empty.
bool colour_wanted(int fd);

}  // namespace ddp::launcher
