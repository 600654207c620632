#include "cli/text_wrap.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace ddp::cli {
namespace {

constexpr size_t kDefaultWidth = 80;
constexpr size_t kMinWidth = 40;
constexpr size_t kNone = std::string_view::npos;

size_t indent_of(std::string_view line) { return std::min(line.find_first_not_of(' '), line.size()); }

// The hanging column of `line` (see the header); kNone when it has none.
size_t hanging_column(std::string_view line, size_t width, size_t option_column) {
  const size_t lead = indent_of(line);
  const size_t gap = line.find("  ", lead);
  if (gap != kNone) {
    const size_t word = line.find_first_not_of(' ', gap);
    if (word != kNone && word < width / 2) return word;
  }
  if (option_column > lead && lead < line.size() && line[lead] == '-' && line.size() > option_column &&
      line[option_column - 1] == ' ' && option_column + 20 <= width)
    return option_column;
  return kNone;
}

// Whether `next` continues the paragraph that `first` opened (hanging: first's column).
bool continues(std::string_view first, size_t hanging, std::string_view next) {
  if (first.find_first_not_of(' ') == kNone || next.find_first_not_of(' ') == kNone) return false;
  if (indent_of(first) == 0 && hanging == kNone) return indent_of(next) == 0;
  return hanging != kNone && indent_of(next) == hanging;
}

// Refills a paragraph: its first line's first `keep` characters as they are (indentation, an
// option's names), then its words, each line filled up to `width`, continuations at `indent`.
void refill(const std::vector<std::string_view>& lines, size_t width, size_t keep, size_t indent,
            std::string& out) {
  out.append(lines.front().substr(0, keep));
  size_t column = keep;
  bool line_empty = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view rest = lines[i];
    for (size_t pos = i == 0 ? keep : 0; pos < rest.size();) {
      const size_t begin = rest.find_first_not_of(' ', pos);
      if (begin == kNone) break;
      const size_t end = std::min(rest.find(' ', begin), rest.size());
      const std::string_view word = rest.substr(begin, end - begin);
      pos = end;
      if (!line_empty && column + 1 + word.size() > width) {
        out.append("\n").append(indent, ' ');
        column = indent;
        line_empty = true;
      }
      if (!line_empty) {
        out.push_back(' ');
        ++column;
      }
      out.append(word);
      column += word.size();
      line_empty = false;
    }
  }
}

}  // namespace

std::string wrap_text(std::string_view text, size_t width, size_t option_column) {
  width = std::max(width, kMinWidth);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos <= text.size();) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  const bool final_newline = !text.empty() && text.back() == '\n';
  if (final_newline) lines.pop_back();
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < lines.size();) {
    const size_t hanging = hanging_column(lines[i], width, option_column);
    size_t end = i + 1;
    while (end < lines.size() && continues(lines[i], hanging, lines[end])) ++end;
    std::vector<std::string_view> paragraph(lines.begin() + static_cast<std::ptrdiff_t>(i),
                                            lines.begin() + static_cast<std::ptrdiff_t>(end));
    const bool fits = std::all_of(paragraph.begin(), paragraph.end(),
                                  [width](std::string_view l) { return l.size() <= width; });
    if (fits) {
      for (size_t k = 0; k < paragraph.size(); ++k)
        out.append(paragraph[k]).append(k + 1 < paragraph.size() ? "\n" : "");
    } else {
      const size_t lead = indent_of(paragraph.front());
      // No hanging column: prose continues at 0, an indented line (an example) 2 further in.
      if (hanging != kNone)
        refill(paragraph, width, hanging, hanging, out);
      else
        refill(paragraph, width, lead, lead == 0 ? 0 : lead + 2, out);
    }
    i = end;
    if (i < lines.size() || final_newline) out.push_back('\n');
  }
  return out;
}

size_t terminal_width(int fd) {
  struct winsize ws {};
  if (::isatty(fd) == 1 && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return kDefaultWidth;
}

}  // namespace ddp::cli
