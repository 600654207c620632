// ddp-launch: parse → resolve → (dry run | agent) → exit code. Only this file maps errors and
// outcomes to exit codes (cli/exit_codes.h, printed by --help).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/dry_run.h"
#include "cli/exit_codes.h"
#include "cli/resolve.h"
#include "cli/status_format.h"
#include "cli/text_wrap.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "launcher/agent.h"
#include "launcher/event_log.h"
#include "launcher/job_query.h"
#include "launcher/stderr_sink.h"
#include "launcher/timeline_merge.h"

extern char** environ;

namespace {

using namespace ddp;

std::vector<std::string> environment_names() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    names.push_back(kv.substr(0, kv.find('=')));
  }
  return names;
}

// The launcher's own lines, in its loggers' style (set_log_program): "ddp-launch: [level: ]text".
// Through the launcher's stderr sink once installed: never blocks (launcher/stderr_sink.h).
void say(const std::string& text) { launcher::write_stderr("ddp-launch: " + text + "\n"); }
void say_error(const std::string& text) { say("error: " + text); }

// The event log's last line (launcher/event_log.h): how the launcher ends, and why.
int finish(int code, const char* status, const std::string& detail = "") {
  launcher::emit_event("launcher_exit", {{"exit_code", code}, {"status", status}, {"detail", detail}});
  return code;
}

int run_job(const launcher::AgentOptions& options) {
  launcher::install_event_log(options.launch.event_log);
  launcher::set_event_context("run_id", options.launch.run_id);
  launcher::emit_event("launcher_start",
                       {{"command", options.launch.command},
                        {"nproc_per_node", options.launch.nproc_per_node},
                        {"nnodes", options.launch.nnodes_max},
                        {"max_restarts", options.launch.max_restarts},
                        {"rdzv_backend", launcher::to_string(options.launch.rdzv_backend)}});
  launcher::Agent agent(options);
  launcher::AgentOutcome out = agent.run();
  switch (out.status) {
    case launcher::AgentStatus::kSucceeded: return finish(cli::kExitOk, "succeeded");
    case launcher::AgentStatus::kWorkersFailed:
      launcher::write_stderr(launcher::format_failure_summary(out.last, options.launch.program_name()));
      return finish(out.last.exit_code(), "workers_failed");
    case launcher::AgentStatus::kInterrupted:
      say("stopped by " + launcher::signal_name(out.last.interrupted_by));
      return finish(out.last.exit_code(), "interrupted", launcher::signal_name(out.last.interrupted_by));
    case launcher::AgentStatus::kPeerFailed:
      // A node lost (no heartbeat) or the store lost: the detail says so; else a node's outcome.
      say_error(out.detail.starts_with("failed: ") || out.detail.starts_with("interrupted: ")
                    ? "the job stopped because another node did: " + out.detail
                    : "the job stopped: " + out.detail);
      return finish(cli::kExitPeerFailed, "peer_failed", out.detail);
  }
  return finish(cli::kExitInternal, "error");
}

// The job, with every error it may end with mapped to an exit code (only cli/ does this).
int run_supervised(const launcher::AgentOptions& options) {
  auto fail = [](int code, const std::string& message) {
    say_error(message);
    return finish(code, code == cli::kExitRendezvous ? "rendezvous_failed" : "error", message);
  };
  try {
    return run_job(options);
  } catch (const TimeoutError& e) {
    return fail(cli::kExitRendezvous, e.message());
  } catch (const NetworkError& e) {
    return fail(cli::kExitRendezvous, e.message());
  } catch (const StoreError& e) {
    return fail(cli::kExitRendezvous, e.message());
  } catch (const InvalidArgument& e) {
    return fail(cli::kExitRendezvous, e.message());
  } catch (const SystemError& e) {
    return fail(cli::kExitInternal, e.message());  // names the call and the file
  } catch (const std::exception& e) {
    return fail(cli::kExitInternal, std::string("internal error: ") + e.what());
  }
}

// --status: the job as its store has it, printed; 0 when the job was read, kExitRendezvous when
// its store cannot be reached or holds no such job (the message names the store).
int print_status(const launcher::AgentOptions& options, const std::string& format) {
  const auto& l = options.launch;
  try {
    const launcher::JobQuery q = launcher::query_job(options);
    if (!q.status) {
      say_error("no job with --rdzv-id " + l.run_id + " at " + q.where);
      return cli::kExitRendezvous;
    }
    const cli::StatusSource src{launcher::to_string(l.rdzv_backend), q.where};
    const std::string text =
        format == "json" ? cli::format_status_json(*q.status, src) : cli::format_status_text(*q.status, src);
    std::fputs(text.c_str(), stdout);
    return cli::kExitOk;
  } catch (const InvalidArgument& e) {
    say_error(e.message());
    return cli::kExitUsage;
  } catch (const Error& e) {
    say_error("cannot read job '" + l.run_id + "': " + e.message());
    return cli::kExitRendezvous;
  }
}

// --timeline: the ranks' files into one, whatever the job's outcome (a failed job's trace is
// the one most worth reading).
void merge_timeline(const std::string& path, std::filesystem::file_time_type since) {
  try {
    const std::vector<int> ranks = launcher::merge_timelines(path, since);
    if (ranks.empty()) {
      say("warning: timeline: no rank wrote one (" + path +
          ": the workers must use libddp's DDP engine, which reads " + std::string(settings::kTimeline.name) +
          ")");
    } else {
      say("timeline: " + std::to_string(ranks.size()) + " rank(s) merged into " + path);
    }
  } catch (const Error& e) {
    say("warning: timeline: " + e.message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  launcher::AgentOptions options;
  try {
    cli::CommandLine cl = cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    if (cl.help) {
      std::fputs(cli::wrap_text(cli::help_text(), cli::terminal_width(STDOUT_FILENO), cli::kHelpOptionColumn)
                     .c_str(),
                 stdout);
      return cli::kExitOk;
    }
    if (cl.version) {
      std::fputs(cli::version_text().c_str(), stdout);
      return cli::kExitOk;
    }
    if (cl.print_settings) {
      const std::string table = cl.markdown ? settings::format_markdown() : settings::format_table();
      std::fputs(table.c_str(), stdout);
      return cli::kExitOk;
    }
    const cli::EnvLookup env = cli::process_env();
    cli::SettingLayer merged = cli::merge_settings(cl.flags, cli::env_layer(env, environment_names()));
    std::vector<std::string> warnings;
    // --status starts nothing and is no node: a placeholder PROGRAM and node rank satisfy the
    // resolver, which checks the flags (a static job's store is where node 0 hosts it, whoever asks).
    if (cl.status && cl.command.empty()) cl.command = {"true"};
    const bool is_static =
        !merged.contains("rdzv_backend") || merged.at("rdzv_backend").items.front() == "static";
    if (cl.status && is_static && !merged.contains("node_rank")) merged["node_rank"] = {{"0"}, "--status"};
    options = cli::resolve_options(merged, cl.command, env, &warnings);
    for (const auto& w : warnings) say("warning: " + w);
    if (cl.status) return print_status(options, cl.format);
    if (options.launch.dry_run) {
      std::fputs(cli::format_dry_run(options).c_str(), stdout);
      return cli::kExitOk;
    }
  } catch (const Error& e) {
    say_error(e.message());
    return cli::kExitUsage;
  }
  set_log_program("ddp-launch");
  spdlog::level::level_enum level = spdlog::level::info;
  if (auto name = settings::get(settings::kLogLevel); !name || !parse_log_level(*name, &level))
    level = spdlog::level::info;
  set_log_level(level);
  // From here on the launcher supervises: its own lines must never block it.
  auto stderr_sink = launcher::install_stderr_sink();
  // File times are coarser than this clock: a second's margin, so no rank file is missed.
  const auto started = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1);
  const int code = run_supervised(options);
  if (!options.launch.timeline.empty()) merge_timeline(options.launch.timeline, started);
  if (const uint64_t lost = launcher::event_log_failures(); lost > 0)
    say("warning: the event log missed " + std::to_string(lost) + " line(s): writing it failed");
  stderr_sink->drain(kConsoleDrainStall);
  return code;
}
