// text: the first line of a file, outside input made fit to quote in a message, and trimming.
#include "common/text.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

using namespace ddp;

TEST_CASE("read_first_line: the first line without its newline; an unreadable file is empty") {
  const std::string path = "/tmp/ddp_text_test_" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << "0-3\nsecond\n";
  }
  CHECK(read_first_line(path) == "0-3");
  std::remove(path.c_str());
  CHECK(read_first_line(path) == "");
  CHECK(read_first_line("/nonexistent/dir/file") == "");
}

TEST_CASE("printable_excerpt: non-printing bytes become dots; a long text is cut with ...") {
  CHECK(printable_excerpt("", 8) == "");
  CHECK(printable_excerpt("key/a", 8) == "key/a");
  CHECK(printable_excerpt(std::string("a\x01\n\x7f\xff", 5), 8) == "a....");
  CHECK(printable_excerpt("12345678", 8) == "12345678");  // exactly max: not cut
  CHECK(printable_excerpt("123456789", 8) == "12345678...");
}

TEST_CASE("trim: white space off both ends, none inside touched") {
  CHECK(trim("") == "");
  CHECK(trim(" \t\r\n\v\f") == "");
  CHECK(trim("  Intel(R) Xeon(R)\n") == "Intel(R) Xeon(R)");
  CHECK(trim("a b") == "a b");
}
