#pragma once
// One named spdlog logger per module ("store", "tcp", "launcher", ...), all sharing the level
// from DDP_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn for the
// library, the launcher sets info for itself). Synchronous sinks only: async loggers do not
// survive fork(). Thread-safe.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace ddp {

// The logger of a module, created on first use with the stderr sink and the current level.
std::shared_ptr<spdlog::logger> logger(const std::string& module);

// Makes `sink` the one sink of every module's logger, now and for loggers created later (the
// launcher's never-blocking stderr). Call before other threads log.
void set_log_sink(spdlog::sink_ptr sink);

// A program's own style for every module's logger, now and for loggers created later (the
// launcher's, on its terminal): "<program>: ", then the level where it means something
// ("warning: ", "error: ", "critical: ", "debug: ", "trace: "; nothing for info), then the
// message; no date, no module. Empty: the library's "[date] [ddp.module] [level] message".
void set_log_program(const std::string& program);

// Sets the level of every module's logger, now and for loggers created later.
void set_log_level(spdlog::level::level_enum level);

// Parses "debug", "INFO", "warning"...; returns false for an unknown name.
bool parse_log_level(const std::string& name, spdlog::level::level_enum* out);

}  // namespace ddp
