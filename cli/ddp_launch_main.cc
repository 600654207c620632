// ddp-launch: parse → resolve → (dry run | agent) → exit code. Only this file maps errors and
// outcomes to exit codes (cli/exit_codes.h, printed by --help).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/dry_run.h"
#include "cli/exit_codes.h"
#include "cli/resolve.h"
#include "cli/text_wrap.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "launcher/agent.h"
#include "launcher/stderr_sink.h"

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

int run_job(const launcher::AgentOptions& options) {
  launcher::Agent agent(options);
  launcher::AgentOutcome out = agent.run();
  switch (out.status) {
    case launcher::AgentStatus::kSucceeded: return cli::kExitOk;
    case launcher::AgentStatus::kWorkersFailed:
      launcher::write_stderr(launcher::format_failure_summary(out.last, options.launch.program_name()));
      return out.last.exit_code();
    case launcher::AgentStatus::kInterrupted:
      say("stopped by " + launcher::signal_name(out.last.interrupted_by));
      return out.last.exit_code();
    case launcher::AgentStatus::kPeerFailed:
      say_error("the job stopped because another node did: " + out.detail);
      return cli::kExitPeerFailed;
  }
  return cli::kExitInternal;
}

// The job, with every error it may end with mapped to an exit code (only cli/ does this).
int run_supervised(const launcher::AgentOptions& options) {
  try {
    return run_job(options);
  } catch (const TimeoutError& e) {
    say_error(e.message());
    return cli::kExitRendezvous;
  } catch (const NetworkError& e) {
    say_error(e.message());
    return cli::kExitRendezvous;
  } catch (const StoreError& e) {
    say_error(e.message());
    return cli::kExitRendezvous;
  } catch (const InvalidArgument& e) {
    say_error(e.message());
    return cli::kExitRendezvous;
  } catch (const SystemError& e) {
    say_error(e.message());  // a system call failed: its message names the call and the file
    return cli::kExitInternal;
  } catch (const std::exception& e) {
    say_error(std::string("internal error: ") + e.what());
    return cli::kExitInternal;
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
    const cli::EnvLookup env = cli::process_env();
    cli::SettingLayer merged = cli::merge_settings(cl.flags, cli::env_layer(env, environment_names()));
    std::vector<std::string> warnings;
    options = cli::resolve_options(merged, cl.command, env, &warnings);
    for (const auto& w : warnings) say("warning: " + w);
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
  if (auto name = env::get("DDP_LOG_LEVEL"); !name || !parse_log_level(*name, &level))
    level = spdlog::level::info;
  set_log_level(level);
  // From here on the launcher supervises: its own lines must never block it.
  auto stderr_sink = launcher::install_stderr_sink();
  const int code = run_supervised(options);
  stderr_sink->drain(kConsoleDrainStall);
  return code;
}
