#include "cli/resolve.h"

#include <doctest/doctest.h>

#include <csignal>
#include <map>

#include "cli/command_line.h"
#include "cli/device_count.h"
#include "common/error.h"

using namespace ddp;
using namespace ddp::cli;

namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup env_of(Vars vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> names_of(const Vars& vars) {
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k);
  return out;
}

launcher::AgentOptions resolve(std::vector<std::string> args, Vars vars = {}) {
  auto cl = parse_command_line(args);
  auto env = env_of(vars);
  return resolve_options(merge_settings(cl.flags, env_layer(env, names_of(vars))), cl.command, env);
}

std::string error_of(std::vector<std::string> args, Vars vars = {}) {
  try {
    resolve(std::move(args), std::move(vars));
  } catch (const InvalidArgument& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults") {
  auto o = resolve({"./prog"});
  const auto& l = o.launch;
  CHECK(l.command == std::vector<std::string>{"./prog"});
  CHECK(l.nproc_per_node == 1);
  CHECK(l.nnodes_max == 1);
  CHECK(l.node_rank == -1);
  CHECK(l.master_addr == "127.0.0.1");
  CHECK(l.master_port == 29500);
  CHECK(l.rdzv_backend == launcher::RdzvBackend::kStatic);
  CHECK_FALSE(l.pick_master_port);  // torchrun's static default: 29500
  CHECK(l.max_restarts == 0);
  CHECK(l.run_id.size() == 16);  // a fresh id for a lone node
  CHECK(l.run_id != resolve({"./prog"}).launch.run_id);
}

TEST_CASE("flags with torchrun's spellings, values, and the program's own arguments") {
  auto o = resolve({"--nproc_per_node=3",
                    "--max-restarts",
                    "2",
                    "--monitor-interval",
                    "0.25",
                    "--shutdown-timeout",
                    "5",
                    "--signals-to-handle",
                    "INT,TERM",
                    "-r",
                    "0:3",
                    "--tee",
                    "2",
                    "--local-ranks-filter",
                    "0",
                    "--role",
                    "trainer",
                    "--cpu-bind",
                    "cores",
                    "--env",
                    "A=1",
                    "--env",
                    "B=2",
                    "--log-dir",
                    "/tmp/l",
                    "--standalone",
                    "./prog",
                    "--max-restarts",
                    "9"});
  const auto& l = o.launch;
  CHECK(l.nproc_per_node == 3);
  CHECK(l.max_restarts == 2);
  CHECK(l.monitor_interval == Millis(250));
  CHECK(l.shutdown_timeout == Millis(5000));
  CHECK(l.signals_to_handle == std::vector<int>{SIGINT, SIGTERM});
  CHECK(l.redirects.for_rank(0) == 3);
  CHECK(l.tee.all == 2);
  CHECK(l.local_ranks_filter == std::set<int>{0});
  CHECK(l.role == "trainer");
  CHECK(l.cpu_bind == launcher::CpuBind::kCores);
  CHECK(l.env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "2"}});
  CHECK(l.log_dir == "/tmp/l");
  CHECK(l.standalone);
  CHECK(l.command == std::vector<std::string>{"./prog", "--max-restarts", "9"});
}

TEST_CASE("python programs run with python3 unless --no-python; -m runs a module") {
  CHECK(resolve({"train.py", "--lr", "1"}).launch.command ==
        std::vector<std::string>{"python3", "-u", "train.py", "--lr", "1"});
  CHECK(resolve({"--no-python", "train.py"}).launch.command == std::vector<std::string>{"train.py"});
  CHECK(resolve({"-m", "pkg.train"}).launch.command ==
        std::vector<std::string>{"python3", "-u", "-m", "pkg.train"});
  CHECK(error_of({"-m", "--no-python", "x"}).find("exclude each other") != std::string::npos);
  CHECK(resolve({"train.py"}).launch.program_name() == "train.py");  // messages name the script
  CHECK(resolve({"./prog"}).launch.program_name() == "./prog");
}

TEST_CASE("PYTHON_EXEC is the interpreter, as in torchrun; --run-path runs any file with it") {
  const Vars venv = {{"PYTHON_EXEC", "/opt/venv/bin/python"}};
  CHECK(resolve({"train.py", "x"}, venv).launch.command ==
        std::vector<std::string>{"/opt/venv/bin/python", "-u", "train.py", "x"});
  CHECK(resolve({"-m", "pkg"}, venv).launch.command ==
        std::vector<std::string>{"/opt/venv/bin/python", "-u", "-m", "pkg"});
  auto rp = resolve({"--run-path", "train_script"}, venv);
  CHECK(rp.launch.command == std::vector<std::string>{"/opt/venv/bin/python", "-u", "train_script"});
  CHECK(rp.launch.program_name() == "train_script");
  CHECK(resolve({"--run-path", "t"}).launch.command.front() == "python3");
  CHECK(error_of({"--run-path", "--no-python", "t"}).find("exclude each other") != std::string::npos);
  CHECK(error_of({"--run-path", "-m", "t"}).find("exclude each other") != std::string::npos);
}

TEST_CASE("torchrun flags with no meaning here: --start-method accepted and checked, nothing else") {
  for (const char* m : {"spawn", "fork", "forkserver"})
    CHECK(resolve({"--start-method", m, "./p"}).launch.command.size() == 1);
  CHECK(error_of({"--start_method", "thread", "./p"}).find("is not spawn, fork or forkserver") !=
        std::string::npos);
}

TEST_CASE("--numa-binding maps onto --cpu-bind, with memory preferred on the node for node/socket") {
  auto node = resolve({"--numa-binding", "node", "./p"}).launch;
  CHECK(node.cpu_bind == launcher::CpuBind::kNuma);
  CHECK(node.numa_memory);
  CHECK(resolve({"--numa-binding", "socket", "./p"}).launch.cpu_bind == launcher::CpuBind::kNuma);
  for (const char* cores : {"exclusive", "core-complex"}) {
    auto c = resolve({"--numa-binding", cores, "./p"}).launch;
    CHECK(c.cpu_bind == launcher::CpuBind::kCores);
    CHECK_FALSE(c.numa_memory);
  }
  CHECK_FALSE(resolve({"--cpu-bind", "numa", "./p"}).launch.numa_memory);
  // Unset: auto (cores for 2 or more ranks with a CPU each); none is torchrun's placement.
  CHECK(resolve({"./p"}).launch.cpu_bind == launcher::CpuBind::kAuto);
  CHECK(resolve({"--cpu-bind", "none", "./p"}).launch.cpu_bind == launcher::CpuBind::kNone);
  CHECK(error_of({"--numa-binding", "nod", "./p"}).find("did you mean 'node'") != std::string::npos);
  CHECK(error_of({"--numa-binding", "node", "--cpu-bind", "cores", "./p"}).find("give one") !=
        std::string::npos);
}

TEST_CASE("PET_* variables as torchrun reads them: under DDP_LAUNCH_* and flags, over the config") {
  auto o =
      resolve({"./p"}, {{"PET_NPROC_PER_NODE", "3"}, {"PET_MAX_RESTARTS", "2"}, {"PET_STANDALONE", "1"}});
  CHECK(o.launch.nproc_per_node == 3);
  CHECK(o.launch.max_restarts == 2);
  CHECK(o.launch.standalone);
  CHECK(resolve({"./p"}, {{"PET_NPROC_PER_NODE", "3"}, {"DDP_LAUNCH_NPROC_PER_NODE", "5"}})
            .launch.nproc_per_node == 5);
  CHECK(resolve({"--nproc-per-node", "7", "./p"}, {{"PET_NPROC_PER_NODE", "3"}}).launch.nproc_per_node == 7);
  // Kubeflow's PyTorchJob: the layout comes from PET_ variables
  auto k = resolve({"./p"}, {{"PET_NNODES", "2"},
                             {"PET_NODE_RANK", "1"},
                             {"PET_MASTER_ADDR", "job-master-0"},
                             {"PET_MASTER_PORT", "23456"}});
  CHECK(k.launch.nnodes_max == 2);
  CHECK(k.launch.node_rank == 1);
  CHECK(k.launch.master_addr == "job-master-0");
  CHECK(k.launch.master_port == 23456);
  CHECK(error_of({"./p"}, {{"PET_MAX_RESTARTS", "x"}}).find("PET_MAX_RESTARTS: 'x' is not an integer") !=
        std::string::npos);
  CHECK(resolve({"./p"}, {{"PET_SOMETHING_TORCHRUN_ONLY", "1"}}).launch.command.size() ==
        1);  // not ours: ignored
}

TEST_CASE(
    "--standalone ignores --rdzv-backend, --rdzv-endpoint and --node-rank with a warning, as torchrun") {
  auto cl = parse_command_line(
      {"--standalone", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--node-rank", "0", "./p"});
  std::vector<std::string> warnings;
  auto o = resolve_options(merge_settings(cl.flags, {}), cl.command, env_of({}), &warnings);
  CHECK(o.launch.standalone);
  CHECK(o.launch.rdzv_backend == launcher::RdzvBackend::kStatic);
  CHECK(o.launch.rdzv_endpoint.empty());
  CHECK(o.launch.node_rank == -1);
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] ==
        "rdzv_backend (from --rdzv-backend) is ignored: standalone (from --standalone) picks its own "
        "rendezvous");
  CHECK(warnings[2].starts_with("node_rank (from --node-rank) is ignored"));
}

TEST_CASE(
    "one node with a rendezvous backend and no port: a free MASTER_PORT (torchrun's localhost:0 recipe)") {
  CHECK(resolve({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "./p"}).launch.pick_master_port);
  CHECK(resolve({"--standalone", "./p"}).launch.pick_master_port);
  CHECK_FALSE(
      resolve({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--master-port", "29700", "./p"})
          .launch.pick_master_port);
  CHECK_FALSE(resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400", "./p"})
                  .launch.pick_master_port);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "./p"})
            .find("port 0 (any free port) works for one node only") != std::string::npos);
}

TEST_CASE("run ids: --rdzv-id, else the scheduler's job id, else fresh; log dirs never shared by default") {
  CHECK(resolve({"--rdzv-id", "j9", "./p"}).launch.run_id == "j9");
  CHECK(resolve({"--rdzv-id", "j9", "./p"}).launch.log_run_dir == "j9");
  // multi-node: every node of the step gets the same id from Slurm
  auto m = resolve({"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h", "./p"},
                   {{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "3"}});
  CHECK(m.launch.run_id == "4242.3");
  CHECK(m.launch.log_run_dir == "4242.3");
  CHECK(resolve({"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h", "./p"},
                {{"PBS_JOBID", "77.pbs/x"}})
            .launch.run_id == "77.pbs_x");
  // no id anywhere: torchrun's "none" (shared by every node), but a log directory of our own
  auto none = resolve({"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h", "./p"});
  CHECK(none.launch.run_id == "none");
  CHECK(none.launch.log_run_dir.starts_with("none_"));
  CHECK(
      none.launch.log_run_dir !=
      resolve({"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h", "./p"}).launch.log_run_dir);
  // one node: fresh each time, the scheduler's id first when there is one
  auto one = resolve({"./p"}, {{"SLURM_JOB_ID", "4242"}});
  CHECK(one.launch.run_id.starts_with("4242-"));
  CHECK(one.launch.run_id != resolve({"./p"}, {{"SLURM_JOB_ID", "4242"}}).launch.run_id);
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE reaches the launcher") {
  CHECK(resolve({"./p"}).launch.log_line_prefix_template.empty());
  CHECK(resolve({"./p"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}})
            .launch.log_line_prefix_template == "[${rank}]");
}

TEST_CASE("--nproc-per-node auto without a GPU is one worker per CPU, as torchrun") {
  CHECK(resolve({"--nproc-per-node", "auto", "./p"}, {{"CUDA_VISIBLE_DEVICES", ""}}).launch.nproc_per_node ==
        count_cpus());
}

TEST_CASE("precedence: command line > DDP_LAUNCH_* > config file") {
  const std::string path = "/tmp/ddp_launch_resolve_test_" + std::to_string(::getpid()) + ".json";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(
        "{\n  \"nproc_per_node\": 2,\n  \"max_restarts\": 5,\n  \"role\": \"from-file\",\n  \"command\": "
        "[\"./from-file\"]\n}\n",
        f);
    std::fclose(f);
  }
  auto o = resolve({"--config", path, "--max-restarts", "1"},
                   {{"DDP_LAUNCH_NPROC_PER_NODE", "4"}, {"DDP_LAUNCH_ROLE", "from-env"}});
  CHECK(o.launch.max_restarts == 1);    // flag beats env and file
  CHECK(o.launch.nproc_per_node == 4);  // env beats file
  CHECK(o.launch.role == "from-env");
  CHECK(o.launch.command == std::vector<std::string>{"./from-file"});
  // DDP_LAUNCH_CONFIG names the file too; a PROGRAM on the command line replaces "command".
  auto p = resolve({"./mine"}, {{"DDP_LAUNCH_CONFIG", path}});
  CHECK(p.launch.nproc_per_node == 2);
  CHECK(p.launch.command == std::vector<std::string>{"./mine"});
  // a bad value in the file names the file, the line and the key
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\n  \"nnodes\": 2,\n  \"node_rank\": 2\n}\n", f);
  std::fclose(f);
  auto msg = error_of({"--config", path, "--master-addr", "h", "./x"});
  CHECK(msg.find("node_rank 2 (from " + path + " line 3 (key 'node_rank'))") != std::string::npos);
  CHECK(msg.find("must be below nnodes 2 (from " + path + " line 2") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("DDP_LAUNCH_ variables: booleans, env lists, unknown names") {
  auto o = resolve({"./p"}, {{"DDP_LAUNCH_STANDALONE", "yes"}, {"DDP_LAUNCH_ENV", "A=1;B=2"}});
  CHECK(o.launch.standalone);
  CHECK(o.launch.env.size() == 2);
  CHECK(error_of({"./p"}, {{"DDP_LAUNCH_NPROC_PER_NOD", "2"}})
            .find("did you mean 'DDP_LAUNCH_NPROC_PER_NODE'") != std::string::npos);
  CHECK(error_of({"./p"}, {{"DDP_LAUNCH_MAX_RESTARTS", "x"}})
            .find("DDP_LAUNCH_MAX_RESTARTS: 'x' is not an integer") != std::string::npos);
}

TEST_CASE("impossible combinations") {
  CHECK(error_of({"--standalone", "--nnodes", "2", "./p"}).find("runs one node") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "./p"}).find("must be below") !=
        std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--master-addr", "h", "./p"}).find("needs node_rank") !=
        std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--node-rank", "1", "./p"}).find("needs master_addr") !=
        std::string::npos);
  CHECK(error_of({"--rdzv-backend", "file", "./p"}).find("needs rdzv_endpoint") != std::string::npos);
  CHECK(error_of({"--rdzv-backend", "multicast", "./p"}).find("needs rdzv_endpoint GROUP:PORT") !=
        std::string::npos);
  CHECK(error_of({"--rdzv-backend", "tpc", "./p"}).find("did you mean 'tcp'") != std::string::npos);
  CHECK(error_of({"--nnodes", "1:4", "./p"}).find("elastic") != std::string::npos);
  CHECK(error_of({}).find("no PROGRAM") != std::string::npos);
  CHECK(error_of({"--rdzv-conf", "timeout=0", "./p"}).find("timeout: '0' is not a number of seconds") !=
        std::string::npos);
}

TEST_CASE("elastic node counts: tcp or file; rdzv-conf sets the round and heartbeat timeouts") {
  auto o = resolve({"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400", "--rdzv-conf",
                    "last_call_timeout=2,close_timeout=3,keep_alive_interval=0.5,keep_alive_max_attempt=4",
                    "./p"});
  CHECK(o.launch.elastic());
  CHECK(o.launch.nnodes_min == 2);
  CHECK(o.launch.nnodes_max == 3);
  CHECK(o.launch.last_call_timeout == Millis(2000));
  CHECK(o.launch.close_timeout == Millis(3000));
  CHECK(o.launch.heartbeat_bound() == Millis(2000));
  auto d = resolve({"--nnodes", "2", "--node-rank", "0", "--master-addr", "h", "./p"});
  CHECK(d.launch.heartbeat_bound() == Millis(5000));  // 1 s x 5: a lost node in seconds
  CHECK(
      error_of({"--nnodes", "1:2", "--rdzv-backend", "multicast", "--rdzv-endpoint", "239.1.2.3:5000", "./p"})
          .find("need rdzv_backend tcp (c10d), file or etcd") != std::string::npos);
  CHECK(error_of(
            {"--nnodes", "1:2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h:1", "--node-rank", "0", "./p"})
            .find("ranks the nodes of every round by arrival") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "h:1", "--rdzv-conf",
                  "keep_alive_max_attempt=0", "./p"})
            .find("keep_alive_max_attempt") != std::string::npos);
}

TEST_CASE("c10d is tcp; rdzv-conf sets the timeout and is_host") {
  auto o = resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400", "--rdzv-id",
                    "j1", "--rdzv-conf", "timeout=12,is_host=0", "./p"});
  CHECK(o.launch.rdzv_backend == launcher::RdzvBackend::kTcp);
  CHECK(o.launch.rdzv_timeout == Millis(12'000));
  CHECK(o.rdzv_is_host == false);
  CHECK(o.launch.run_id == "j1");  // multi-node: the shared id
}

TEST_CASE("Slurm and Open MPI fill node rank, node count and master address") {
  auto s = resolve({"./p"}, {{"SLURM_STEP_NUM_NODES", "4"},
                             {"SLURM_NODEID", "2"},
                             {"SLURM_JOB_NODELIST", "gpu[07-10]"},
                             {"SLURM_STEP_NUM_TASKS", "4"}});
  CHECK(s.launch.nnodes_max == 4);
  CHECK(s.launch.node_rank == 2);
  CHECK(s.launch.master_addr == "gpu07");
  // the batch script of `sbatch -N2` (as a real slurmd starts it): the allocation's node count and
  // node 0, but no step; it runs on the first node only, so nothing is inferred
  auto t = resolve({"./p"}, {{"SLURM_NNODES", "2"},
                             {"SLURM_JOB_NUM_NODES", "2"},
                             {"SLURM_NODEID", "0"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_JOB_ID", "7"},
                             {"SLURM_JOB_NODELIST", "n[1-2]"}});
  CHECK(t.launch.nnodes_max == 1);
  auto t2 = resolve({"./p"}, {{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "0"}, {"SLURM_NTASKS", "2"}});
  CHECK(t2.launch.nnodes_max == 1);
  // host lists with several bracket groups: the first host is node 0's
  auto g = resolve({"./p"}, {{"SLURM_STEP_NUM_NODES", "4"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_NODEID", "3"},
                             {"SLURM_STEP_NODELIST", "rack[1-2]-n[01-02]"}});
  CHECK(g.launch.master_addr == "rack1-n01");
  CHECK(g.launch.node_rank == 3);
  // flags win over Slurm
  auto u = resolve({"--master-addr", "10.1.1.1", "./p"},
                   {{"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_JOB_NODELIST", "a,b"}});
  CHECK(u.launch.master_addr == "10.1.1.1");
  CHECK(u.launch.node_rank == 1);
  auto m = resolve({"--master-addr", "10.0.0.9", "./p"},
                   {{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  CHECK(m.launch.nnodes_max == 3);
  CHECK(m.launch.node_rank == 1);
  CHECK(error_of({"./p"}, {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}})
            .find("needs master_addr") != std::string::npos);
  // mpirun -np 4 on one host: four processes on this node, not four nodes; nothing inferred
  auto local = resolve(
      {"./p"},
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  CHECK(local.launch.nnodes_max == 1);
  auto per_node = resolve(
      {"--master-addr", "10.0.0.9", "./p"},
      {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
  CHECK(per_node.launch.nnodes_max == 2);
  CHECK(per_node.launch.node_rank == 1);
  // srun with several tasks per node: every task would be a launcher; said, with the fix
  const Vars srun8 = {{"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NODEID", "1"}};
  CHECK(
      error_of({"./p"}, srun8).find("srun started 8 tasks on 2 node(s), but ddp-launch runs once per node") !=
      std::string::npos);
  CHECK(error_of({"./p"}, srun8).find("srun --ntasks-per-node=1 ddp-launch") != std::string::npos);
  {
    auto cl = parse_command_line({"--nnodes", "1", "./p"});
    std::vector<std::string> warnings;
    resolve_options(merge_settings(cl.flags, {}), cl.command, env_of(srun8), &warnings);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("not taken from Slurm") != std::string::npos);
  }
  // standalone ignores the scheduler
  CHECK(resolve({"--standalone", "./p"}, {{"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_NODEID", "1"}})
            .launch.nnodes_max == 1);
}

TEST_CASE("multicast: a group and port, ttl and interface from --rdzv-conf") {
  auto o = resolve({"--rdzv-backend", "multicast", "--rdzv-endpoint", "239.1.2.3:29400", "--nnodes", "3",
                    "--rdzv-id", "j", "--rdzv-conf", "ttl=2,interface=eth1,timeout=5", "./p"});
  CHECK(o.launch.rdzv_backend == launcher::RdzvBackend::kMulticast);
  CHECK(o.launch.rdzv_endpoint == "239.1.2.3:29400");
  CHECK(o.multicast_ttl == 2);
  CHECK(o.multicast_interface == "eth1");
  CHECK(o.launch.rdzv_timeout == Millis(5000));
  CHECK(o.launch.node_rank == -1);  // assigned on the group
  auto v6 = resolve(
      {"--rdzv-backend", "multicast", "--rdzv-endpoint", "[ff15::1:7]:29400", "--nnodes", "2", "./p"});
  CHECK(v6.multicast_ttl == 1);
  CHECK(error_of({"--rdzv-backend", "multicast", "--rdzv-endpoint", "10.0.0.1:29400", "--nnodes", "2", "./p"})
            .find("got '10.0.0.1:29400'") != std::string::npos);
  CHECK(error_of({"--rdzv-backend", "multicast", "--rdzv-endpoint", "239.1.2.3", "--nnodes", "2", "./p"})
            .find("needs rdzv_endpoint GROUP:PORT") != std::string::npos);
  CHECK(error_of({"--rdzv-backend", "tcp", "--rdzv-endpoint", "h:1", "--rdzv-conf", "ttl=2", "./p"})
            .find("multicast only") != std::string::npos);
  CHECK(error_of(
            {"--rdzv-backend", "multicast", "--rdzv-endpoint", "239.1.2.3:1", "--rdzv-conf", "ttl=0", "./p"})
            .find("not in 1..255") != std::string::npos);
}

TEST_CASE(
    "etcd: etcd-v2 and etcd-v3 are etcd; members, TLS and prefix from --rdzv-endpoint and --rdzv-conf") {
  for (const char* name : {"etcd", "etcd-v2", "ETCD-V3"}) {
    CAPTURE(name);
    auto o = resolve({"--nnodes", "2:4", "--rdzv-backend", name, "--rdzv-endpoint", "e1,e2:2380,e3", "./p"});
    CHECK(o.launch.rdzv_backend == launcher::RdzvBackend::kEtcd);
    CHECK(o.launch.etcd.endpoints == std::vector<std::string>{"e1:2379", "e2:2380", "e3:2379"});
    CHECK(o.launch.etcd.prefix == "/ddp/");
    CHECK(o.launch.etcd.protocol == "http");
  }
  auto t =
      resolve({"--nnodes", "3", "--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "--rdzv-conf",
               "protocol=https,cacert=/etc/hostname,cert=/etc/hostname,key=/etc/hostname,etcd_prefix=/team,"
               "keep_alive_interval=2,keep_alive_max_attempt=3,last_call_timeout=4,join_timeout=60",
               "./p"});
  CHECK(t.launch.etcd.protocol == "https");
  CHECK(t.launch.etcd.cacert == "/etc/hostname");
  CHECK(t.launch.etcd.key == "/etc/hostname");
  CHECK(t.launch.etcd.prefix == "/team/");
  CHECK(t.launch.heartbeat_bound() == Millis(6000));
  CHECK(t.launch.last_call_timeout == Millis(4000));
  CHECK(t.launch.rdzv_timeout == Millis(60'000));
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "etcd", "./p"})
            .find("needs rdzv_endpoint: the etcd members") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "e1,,e2", "./p"})
            .find("an empty etcd member") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--rdzv-conf",
                  "etcd_prefix=/x", "./p"})
            .find("apply to rdzv_backend etcd only") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "--rdzv-conf",
                  "cert=/etc/hostname", "./p"})
            .find("cert= and key= go together") != std::string::npos);
  CHECK(error_of({"--nnodes", "2", "--rdzv-backend", "etcd3", "--rdzv-endpoint", "e1", "./p"})
            .find("did you mean 'etcd'") != std::string::npos);
}
