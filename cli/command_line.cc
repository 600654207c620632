#include "cli/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>

#include "cli/exit_codes.h"
#include "cli/flag_prefix.h"
#include "cli/option_specs.h"
#include "cli/suggest.h"
#include "common/error.h"

#ifndef DDP_VERSION
#define DDP_VERSION "0.0.0"
#endif

namespace ddp::cli {
namespace {

constexpr const char* kDescription =
    "ddp-launch: start one worker per GPU (or slot) on this node, run the rendezvous that gives\n"
    "every worker its RANK, WORLD_SIZE, MASTER_ADDR..., supervise them (signals, failures,\n"
    "restarts, logs) and exit with a meaningful code. A drop-in for torchrun: same flags, same\n"
    "worker environment. Run one ddp-launch per node. Long options may be abbreviated to any\n"
    "unambiguous prefix (--nproc 4), as torchrun's argparse allows.\n";

constexpr const char* kFooter =
    "Settings come from, strongest first: the command line, DDP_LAUNCH_<NAME> variables\n"
    "(DDP_LAUNCH_NPROC_PER_NODE=4, DDP_LAUNCH_STANDALONE=1, DDP_LAUNCH_ENV='A=1;B=2'), torchrun's\n"
    "PET_<NAME> variables (PET_NNODES=2, as Kubeflow's PyTorchJob sets them), the JSON file of\n"
    "--config (keys are the option names in snake_case: {\"nproc_per_node\": 4}; see configs/ and\n"
    "configs/ddp-launch.schema.json), then the defaults. Under srun (one task per node: srun\n"
    "--ntasks-per-node=1) or mpirun (one process per node) the node count, node rank and master\n"
    "address come from SLURM_* / OMPI_COMM_WORLD_* when not given; the run id (log directory,\n"
    "store keys) from --rdzv-id, else the scheduler's job id (SLURM_JOB_ID, PBS_JOBID, ...).\n"
    "PYTHON_EXEC names the interpreter of .py programs (default python3).\n"
    "Relayed output (--log-dir, --tee, ...) is prefixed like torchrun's, [default0]: or\n"
    "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (${role_name} ${rank} ${local_rank}); coloured on a\n"
    "terminal unless NO_COLOR is set.\n"
    "\n"
    "Every worker gets torchrun's variables (RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE\n"
    "GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT\n"
    "TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID\n"
    "TORCHELASTIC_ERROR_FILE) plus DDP_STORE, DDP_JOB_TOKEN, DDP_RUN_ID, DDP_NODE_RANK and\n"
    "DDP_LOCAL_CPUS (the CPUs this launcher may run on, which its workers share).\n"
    "Multi-node jobs share one secret: set DDP_JOB_TOKEN to the same value on every node (else\n"
    "it is derived from --rdzv-id, which is only as secret as the id).\n"
    "\n"
    "Examples:\n"
    "  ddp-launch --standalone --nproc-per-node 4 ./train --epochs 3\n"
    "  ddp-launch --nproc-per-node auto train.py           # python3 -u train.py, one per GPU\n"
    "  # two nodes, static ranks (node 0 at 10.0.0.1 hosts the store on port 29501):\n"
    "  ddp-launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --nproc-per-node 8 ./train\n"
    "  ddp-launch --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --nproc-per-node 8 ./train\n"
    "  # two nodes, ranks assigned at the rendezvous (same command on both):\n"
    "  ddp-launch --nnodes 2 --rdzv-backend tcp --rdzv-endpoint 10.0.0.1:29400 --rdzv-id job7 ./train\n"
    "  # shared directory, restarts, per-rank logs:\n"
    "  ddp-launch --nnodes 2 --rdzv-backend file --rdzv-endpoint /shared/rdzv --rdzv-id job7 \\\n"
    "             --max-restarts 3 --log-dir /shared/logs --tee 3 ./train\n"
    "  ddp-launch --config configs/two_nodes_static.json --node-rank 1 ./train\n"
    "  ddp-launch --dry-run --nproc-per-node 2 ./train    # print what would run\n"
    "  # torchrun's recipe for several single-node jobs on one host (each gets a free MASTER_PORT):\n"
    "  ddp-launch --rdzv-backend c10d --rdzv-endpoint localhost:0 --nproc-per-node 2 ./train\n"
    "\n";

struct Bindings {
  std::map<std::string, std::string> scalar;
  std::map<std::string, std::vector<std::string>> list;
  std::map<std::string, bool> flag;
  std::map<std::string, CLI::Option*> option;
};

std::string names_for(const OptionSpec& spec) {
  std::string kebab = flag_name(spec.name);
  std::string names = kebab;
  std::string snake = "--" + std::string(spec.name);
  if (snake != kebab) names += "," + snake;
  if (!spec.short_flag.empty()) names = std::string(spec.short_flag) + "," + names;
  return names;
}

std::unique_ptr<CLI::App> build_app(Bindings& b, CommandLine& out) {
  auto app = std::make_unique<CLI::App>(kDescription, "ddp-launch");
  app->set_help_flag();
  app->prefix_command();
  app->footer(std::string(kFooter) + kExitCodeTable);
  app->get_formatter()->column_width(kHelpOptionColumn);
  app->add_flag("-h,--help", out.help, "Print this help and exit")->group("General");
  app->add_flag("--version", out.version, "Print the version and exit")->group("General");
  app->add_flag("--print-settings", out.print_settings,
                "Print every environment variable read, with the value in effect, and exit")
      ->group("General");
  app->add_flag("--markdown", out.markdown, "With --print-settings: as docs/environment.md")
      ->group("General");
  app->add_flag("--status", out.status,
                "Is my job stuck? Print the job's current round, its nodes (hosts, ranks) and whether "
                "each is alive, read from its rendezvous store (give the job's --nnodes, --rdzv-backend, "
                "--rdzv-endpoint, --rdzv-id, --rdzv-conf; nothing is written, nothing joins), and exit")
      ->group("General");
  app->add_option("--format", out.format, "With --status: text (a table) or json (one object)")
      ->type_name("text|json")
      ->group("General");
  for (const auto& spec : option_specs()) {
    if (!spec.in_cli) continue;
    std::string name(spec.name);
    std::string desc(spec.help);
    if (!spec.default_text.empty()) desc += " [default: " + std::string(spec.default_text) + "]";
    CLI::Option* opt = nullptr;
    if (spec.kind == ValueKind::kBool) {
      opt = app->add_flag(names_for(spec), b.flag[name], desc);
    } else if (spec.kind == ValueKind::kKeyValues) {
      opt = app->add_option(names_for(spec), b.list[name], desc)->allow_extra_args(false);
      opt->type_name("KEY=VALUE");
    } else {
      opt = app->add_option(names_for(spec), b.scalar[name], desc);
      opt->type_name(spec.kind == ValueKind::kInt       ? "INT"
                     : spec.kind == ValueKind::kSeconds ? "SECONDS"
                                                        : "TEXT");
    }
    opt->group(std::string(spec.group));
    b.option[name] = opt;
  }
  return app;
}

std::vector<std::string> all_flag_names() {
  std::vector<std::string> out = {"--help",     "--version", "--print-settings",
                                  "--markdown", "--status",  "--format"};
  for (const auto& spec : option_specs()) {
    if (spec.in_cli) out.push_back(flag_name(spec.name));
  }
  return out;
}

std::vector<FlagSpelling> flag_spellings() {
  std::vector<FlagSpelling> out = {
      {"--help", "help", false},         {"-h", "help", false},
      {"--version", "version", false},   {"--print-settings", "print_settings", false},
      {"--markdown", "markdown", false}, {"--status", "status", false},
      {"--format", "format", true}};
  for (const auto& spec : option_specs()) {
    if (!spec.in_cli) continue;
    const bool value = spec.kind != ValueKind::kBool;
    const std::string name(spec.name);
    out.push_back({flag_name(spec.name), name, value});
    if ("--" + name != flag_name(spec.name)) out.push_back({"--" + name, name, value});
    if (!spec.short_flag.empty()) out.push_back({std::string(spec.short_flag), name, value});
  }
  return out;
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  Bindings b;
  CommandLine out;
  auto app = build_app(b, out);
  const std::vector<std::string> expanded = expand_flag_prefixes(args, flag_spellings());
  std::vector<std::string> reversed(expanded.rbegin(), expanded.rend());  // CLI11 takes them reversed
  try {
    app->parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    DDP_THROW(InvalidArgument, msg, " (see ddp-launch --help)");
  }
  std::vector<std::string> rest = app->remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    std::string word = rest.front().substr(0, rest.front().find('='));
    std::string hint = did_you_mean(word, all_flag_names());
    DDP_THROW(InvalidArgument, "unknown option '", word, "'",
              hint.empty() ? " (see ddp-launch --help; put '--' before a PROGRAM whose name starts with '-')"
                           : hint);
  }
  out.command = std::move(rest);
  if (out.format != "text" && out.format != "json")
    DDP_THROW(InvalidArgument, "--format: '", out.format, "' is not text or json");
  for (const auto& spec : option_specs()) {
    if (!spec.in_cli) continue;
    std::string name(spec.name);
    CLI::Option* opt = b.option.at(name);
    if (opt->count() == 0) continue;
    SettingValue v;
    v.source = flag_name(spec.name);
    if (spec.kind == ValueKind::kBool)
      v.items = {b.flag[name] ? "true" : "false"};
    else if (spec.kind == ValueKind::kKeyValues)
      v.items = b.list[name];
    else
      v.items = {b.scalar[name]};
    out.flags[name] = std::move(v);
  }
  return out;
}

std::vector<std::string> accepted_flags() {
  std::vector<std::string> out;
  for (const auto& f : flag_spellings()) out.push_back(f.flag);
  std::sort(out.begin(), out.end());
  return out;
}

std::string help_text() {
  Bindings b;
  CommandLine ignored;
  auto app = build_app(b, ignored);
  std::string text = app->help();
  // CLI11 prints "[OPTIONS]"; say where the program goes.
  auto pos = text.find("Usage: ");
  if (pos != std::string::npos) {
    auto eol = text.find('\n', pos);
    text.replace(pos, eol - pos, "Usage: ddp-launch [OPTIONS] [--] PROGRAM [ARGS...]");
  }
  return text;
}

std::string version_text() { return std::string("ddp-launch ") + DDP_VERSION + "\n"; }

}  // namespace ddp::cli
