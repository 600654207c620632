#pragma once
// Wrapping of --help to a width: the terminal's when standard output is one, else 80 (pipes,
// files, help2man). Text is read as paragraphs: a line and the lines that continue it, which
// are unindented lines after an unindented line (prose), or lines indented to the line's
// hanging column. The hanging column is the column of the first word after a gap of two or more
// spaces (an option's description, the meaning in a table) when that column is left of the
// middle, or `option_column` for a line that starts with '-' and runs past it (an option whose
// names fill the names' column); else there is none (examples, headings: each line its own).
// A paragraph whose lines all fit is kept as written; another is refilled: its first line's
// start kept, the rest of its words at the hanging column, or, with none, at column 0 (prose)
// or 2 right of the line's indentation (an example: a continuation never looks like an option
// line, which the bash completion reads). A word longer than the room stays whole.
#include <cstddef>
#include <string>
#include <string_view>

namespace ddp::cli {

std::string wrap_text(std::string_view text, size_t width, size_t option_column = 0);

// The width of the terminal on `fd`; 80 when `fd` is not a terminal or says no width.
size_t terminal_width(int fd);

}  // namespace ddp::cli
