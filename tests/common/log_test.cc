#include "common/log.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <string>

namespace {

std::ostringstream& out_stream() {
  static std::ostringstream out;
  return out;
}

}  // namespace

TEST_CASE("one logger per module, level shared") {
  auto a = ddp::logger("store");
  auto b = ddp::logger("store");
  CHECK(a.get() == b.get());
  ddp::set_log_level(spdlog::level::debug);
  CHECK(ddp::logger("tcp")->level() == spdlog::level::debug);
  CHECK(a->level() == spdlog::level::debug);
  spdlog::level::level_enum l;
  CHECK(ddp::parse_log_level("WARNING", &l));
  CHECK(l == spdlog::level::warn);
  CHECK_FALSE(ddp::parse_log_level("loud", &l));
}

TEST_CASE("a program's style: its prefix, the level where it means something, for loggers old and new") {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_stream());
  auto old_logger = ddp::logger("style_old");
  ddp::set_log_sink(sink);
  ddp::set_log_level(spdlog::level::debug);
  ddp::set_log_program("ddp-launch");
  auto new_logger = ddp::logger("style_new");
  old_logger->info("forwarding {}", "SIGTERM");
  new_logger->warn("second SIGINT");
  old_logger->error("a bug");
  new_logger->debug("handshake");
  CHECK(out_stream().str() ==
        "ddp-launch: forwarding SIGTERM\n"
        "ddp-launch: warning: second SIGINT\n"
        "ddp-launch: error: a bug\n"
        "ddp-launch: debug: handshake\n");
  // Back to the library's style: date, module and level in brackets.
  ddp::set_log_program("");
  out_stream().str("");
  new_logger->warn("plain");
  const std::string line = out_stream().str();
  CHECK(line.find("] [ddp.style_new] [warning] plain\n") != std::string::npos);
  CHECK(line.front() == '[');
}
