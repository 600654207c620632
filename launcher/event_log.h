#pragma once
// The launcher's event log (torchrun's --event-log-handler): what the launcher does, as one JSON
// object per line — rounds, workers' starts and exits, restarts, the failure summary, membership
// changes — for tools to read instead of parsing messages. The schema is in docs/launcher.md.
//
// Every line is {"event": NAME, "time": seconds since the epoch (microseconds), "host",
// "launcher_pid", then the context (set_event_context: "run_id", "node_rank", "round", ...),
// then the event's own fields}. Destinations: nowhere (null, the default), the launcher's stderr
// (console: through its never-blocking sink, launcher/stderr_sink.h), or a file opened for
// appending (several launchers may share it: each line is one write(2) with O_APPEND).
//
// One process-wide log: cli/ installs it once; any module emits. Thread-safe. Emitting never
// throws (a full disk must not stop supervision): failed writes are counted, said once at exit.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "launcher/launch_options.h"

namespace ddp::launcher {

// Opens the destination (a file: created 0640, appended to, never through a symlink) and makes
// it the process's event log. Throws SystemError naming the file. A null target uninstalls.
void install_event_log(const EventLogTarget& target);

// Whether events go anywhere: callers may skip building fields when not.
bool event_log_enabled();

// Fields added to every later event (a null value removes the key).
void set_event_context(const std::string& key, nlohmann::ordered_json value);

// One line: the event's name and its own fields (a JSON object). No-op without a log.
void emit_event(std::string_view event, nlohmann::ordered_json fields = nlohmann::ordered_json::object());

// Writes that failed (disk full, ...), for the launcher's final message.
uint64_t event_log_failures();

}  // namespace ddp::launcher
