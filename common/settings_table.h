#pragma once
// The declarations of the one table of environment settings (common/settings.h reads them): each
// variable's name, type, default, allowed values, scope, section and meaning, as constexpr data
// that docs/environment.md is generated from. A choice list's order is fixed: the reader of an
// enum (settings::choice_as) pins it with settings::choices_are beside the enum.
#include <cstdint>
#include <string_view>

namespace ddp::settings {

// kAutoInt, kAutoBool: "auto" (the reader decides), or an integer in the range, or a boolean.
enum class Type { kText, kInt, kBool, kChoice, kAutoInt, kAutoBool };
enum class Scope { kProcess, kGroup };
// Where a variable belongs, for the docs: who reads it.
enum class Section { kLauncher, kWorker, kLibrary, kTcp, kMpi, kTools, kExternal };

struct Setting {
  std::string_view name = {};  // a family ends in "<...>" or "*": its members share a prefix
  Type type = Type::kText;
  Scope scope = Scope::kProcess;
  Section section = Section::kLibrary;
  // The value when unset, in the type's syntax; empty: none, or computed by the reader, which
  // passes it (`computed` says what it is, for the docs).
  std::string_view fallback = {};
  std::string_view computed = {};
  std::string_view choices = {};  // kChoice: "auto|shm|socket"; kText: the syntax, for the docs
  int64_t min = INT64_MIN;        // kInt, kAutoInt: the range allowed
  int64_t max = INT64_MAX;
  std::string_view meaning = {};  // one line
  bool secret = false;            // printed as "(set)", never its value
};

// ---- ddp-launch ---------------------------------------------------------------------------
inline constexpr Setting kLaunchOption{
    .name = "DDP_LAUNCH_<OPTION>",
    .section = Section::kLauncher,
    .choices = "as the flag",
    .meaning =
        "Any ddp-launch option (DDP_LAUNCH_NPROC_PER_NODE=4): under the flags, above PET_<OPTION> "
        "and --config; an unknown name is an error."};
inline constexpr Setting kPetOption{
    .name = "PET_<OPTION>",
    .section = Section::kLauncher,
    .choices = "as the flag",
    .meaning =
        "torchrun's spelling of an option (as Kubeflow's PyTorchJob sets them), under DDP_LAUNCH_<OPTION>."};
inline constexpr Setting kLogLevel{
    .name = "DDP_LOG_LEVEL",
    .type = Type::kChoice,
    .section = Section::kLauncher,
    .computed = "warn (libddp), info (ddp-launch)",
    .choices = "trace|debug|info|warn|warning|error|critical|fatal|off",
    .meaning = "Level of the log lines of libddp and of ddp-launch itself, on stderr."};

// ---- set by ddp-launch for each worker, read by libddp -------------------------------------
inline constexpr Setting kStore{
    .name = "DDP_STORE",
    .section = Section::kWorker,
    .choices = "host:port | etcd://host:port,.../prefix/ | etcd+https://...",
    .meaning =
        "The job's store (a launcher hosts it; with --rdzv-backend etcd, etcd itself); env:// init "
        "meets there (else rank 0 hosts one on MASTER_ADDR:MASTER_PORT)."};
inline constexpr Setting kJobToken{
    .name = "DDP_JOB_TOKEN",
    .section = Section::kWorker,
    .choices = "text",
    .meaning = "The job's secret: authenticates every store and backend connection; the same on every node.",
    .secret = true};
inline constexpr Setting kRunId{
    .name = "DDP_RUN_ID",
    .section = Section::kWorker,
    .choices = "text",
    .meaning = "The job's run id; names its store keys (else TORCHELASTIC_RUN_ID)."};
inline constexpr Setting kNodeRank{
    .name = "DDP_NODE_RANK",
    .type = Type::kInt,
    .section = Section::kWorker,
    .min = 0,
    .meaning = "This worker's node rank (as GROUP_RANK); set for workers, not read."};
inline constexpr Setting kElasticRound{
    .name = "DDP_ELASTIC_ROUND",
    .type = Type::kInt,
    .section = Section::kWorker,
    .min = 0,
    .meaning =
        "The launcher's round this worker was started in; ddp::elastic (recovery in place) names its "
        "store keys by it."};
inline constexpr Setting kTimeline{.name = "DDP_TIMELINE",
                                   .section = Section::kWorker,
                                   .choices = "file",
                                   .meaning =
                                       "The file where each rank's DDP engine writes a Chrome trace of its "
                                       "steps (ddp-launch --timeline sets it)."};
inline constexpr Setting kLocalCpus{
    .name = "DDP_LOCAL_CPUS",
    .type = Type::kInt,
    .section = Section::kWorker,
    .computed = "this process's affinity",
    .min = 1,
    .max = 1 << 20,
    .meaning = "The CPUs this node's workers share (the launcher's affinity): sizes threads and waits."};

// ---- libddp ---------------------------------------------------------------------------------
inline constexpr Setting kTimeoutMs{
    .name = "DDP_TIMEOUT_MS",
    .type = Type::kInt,
    .computed = "600000 (10 min)",
    .min = 1,
    .meaning =
        "Default timeout of init_process_group, its store and every collective, when the caller gives none."};
inline constexpr Setting kCopyKernel{
    .name = "DDP_COPY_KERNEL",
    .type = Type::kChoice,
    .fallback = "auto",
    .choices = "auto|memcpy|vector",
    .meaning = "Copy for buffers less than 64 bytes apart: measured once per process (auto), or fixed."};
inline constexpr Setting kF16c{
    .name = "DDP_F16C",
    .type = Type::kBool,
    .fallback = "1",
    .meaning = "Use the CPU's F16C instructions for float16 conversions where it has them."};
inline constexpr Setting kSocketIfname{
    .name = "DDP_SOCKET_IFNAME",
    .choices = "interface name",
    .meaning =
        "Network interface the gloo backend binds (else GLOO_SOCKET_IFNAME, else the route to MASTER_ADDR)."};
inline constexpr Setting kTorchBackend{
    .name = "DDP_TORCH_BACKEND",
    .fallback = "tcp",
    .choices = "tcp, gloo, mpi or nccl",
    .meaning = "The libddp backend under the torch.distributed plugin's groups, unless set_backend() chose."};

inline constexpr Setting kEtcdUser{
    .name = "DDP_ETCD_USER",
    .choices = "user name",
    .meaning = "The user an etcd client (EtcdStore, the etcd rendezvous) authenticates as; unset: none."};
inline constexpr Setting kEtcdPassword{.name = "DDP_ETCD_PASSWORD",
                                       .choices = "text",
                                       .meaning = "The password of DDP_ETCD_USER (never on a command line).",
                                       .secret = true};
inline constexpr Setting kEtcdCacert{
    .name = "DDP_ETCD_CACERT",
    .section = Section::kWorker,
    .choices = "file",
    .meaning =
        "PEM: the CA of the etcd members of an etcd+https:// DDP_STORE (ddp-launch sets it from cacert=)."};
inline constexpr Setting kEtcdCert{
    .name = "DDP_ETCD_CERT",
    .section = Section::kWorker,
    .choices = "file",
    .meaning = "PEM: the client certificate for an etcd+https:// DDP_STORE (ddp-launch sets it from cert=)."};
inline constexpr Setting kEtcdKey{.name = "DDP_ETCD_KEY",
                                  .section = Section::kWorker,
                                  .choices = "file",
                                  .meaning = "PEM: the key of DDP_ETCD_CERT (ddp-launch sets it from key=)."};

// ---- the tcp backend ------------------------------------------------------------------------
inline constexpr Setting kTcpTransport{
    .name = "DDP_TCP_TRANSPORT",
    .type = Type::kChoice,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .choices = "auto|shm|socket|hierarchical",
    .meaning =
        "Shared memory on one host, hierarchical across hosts with several ranks each, else sockets (auto)."};
inline constexpr Setting kTcpFingerprint{
    .name = "DDP_TCP_FINGERPRINT",
    .type = Type::kBool,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "1",
    .meaning = "Every op checks that all ranks called the same op (kind, size, dtype, root) before it runs."};
inline constexpr Setting kTcpSpinUs{
    .name = "DDP_TCP_SPIN_US",
    .type = Type::kInt,
    .section = Section::kTcp,
    .computed = "200 with a core per rank, else 0",
    .min = 0,
    .max = 1'000'000'000,
    .meaning = "Microseconds a waiting rank pause-spins before it polls with sched_yield."};
inline constexpr Setting kTcpYieldUs{
    .name = "DDP_TCP_YIELD_US",
    .type = Type::kInt,
    .section = Section::kTcp,
    .computed = "20000 with a core per rank, else 50",
    .min = 0,
    .max = 1'000'000'000,
    .meaning = "Microseconds a waiting rank then polls with sched_yield before it sleeps."};
inline constexpr Setting kTcpInlineSpinUs{.name = "DDP_TCP_INLINE_SPIN_US",
                                          .type = Type::kInt,
                                          .section = Section::kTcp,
                                          .computed = "DDP_TCP_SPIN_US with a core per rank, else 2000",
                                          .min = -1'000'000'000,
                                          .max = 1'000'000'000,
                                          .meaning =
                                              "Microseconds the caller's thread polls for its peers before "
                                              "the worker takes the op (negative: never inline)."};
inline constexpr Setting kTcpInlineMaxBytes{
    .name = "DDP_TCP_INLINE_MAX_BYTES",
    .type = Type::kInt,
    .section = Section::kTcp,
    .fallback = "4194304",
    .min = 0,
    .meaning = "Largest shared-memory all_reduce that starts on the caller's thread."};
inline constexpr Setting kTcpShmDepth{
    .name = "DDP_TCP_SHM_DEPTH",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "4",
    .min = 2,
    .max = 64,
    .meaning = "Slots per rank in the shared-memory segment (chunks in flight)."};
inline constexpr Setting kTcpShmSlotBytes{
    .name = "DDP_TCP_SHM_SLOT_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .computed = "sized from the L2 cache, at most 64 MiB in all",
    .min = 4096,
    .meaning = "Bytes of one shared-memory slot (a multiple of 64): the chunk of staged collectives."};
inline constexpr Setting kTcpShmOneshotBytes{
    .name = "DDP_TCP_SHM_ONESHOT_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "32768",
    .min = 0,
    .meaning = "Largest shared-memory all_reduce done in one step (every rank reduces every input)."};
inline constexpr Setting kTcpShmStores{
    .name = "DDP_TCP_SHM_STORES",
    .type = Type::kChoice,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .choices = "auto|cached|streaming",
    .meaning = "How staged collectives write what peers read: measured online (auto), or fixed."};
inline constexpr Setting kTcpCma{.name = "DDP_TCP_CMA",
                                 .type = Type::kChoice,
                                 .section = Section::kTcp,
                                 .fallback = "auto",
                                 .choices = "auto|on|off",
                                 .meaning =
                                     "Cross-memory attach (process_vm_readv) for private buffers: where "
                                     "measured faster, always, or never."};
inline constexpr Setting kTcpMaxUnexpectedBytes{.name = "DDP_TCP_MAX_UNEXPECTED_BYTES",
                                                .type = Type::kInt,
                                                .section = Section::kTcp,
                                                .fallback = "1073741824",
                                                .min = 1,
                                                .meaning =
                                                    "Bytes of messages no op waits for yet that one peer may "
                                                    "have buffered here; beyond it the group fails."};
inline constexpr Setting kTcpSocketChunkBytes{
    .name = "DDP_TCP_SOCKET_CHUNK_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "262144",
    .min = 1,
    .meaning = "Pipeline chunk of the socket collectives (part of the wire protocol)."};
inline constexpr Setting kTcpSocketLowat{
    .name = "DDP_TCP_SOCKET_LOWAT",
    .type = Type::kInt,
    .section = Section::kTcp,
    .computed = "DDP_TCP_SOCKET_CHUNK_BYTES",
    .min = 0,
    .meaning = "Unsent bytes a connection holds in the kernel (TCP_NOTSENT_LOWAT; 0: no limit)."};
inline constexpr Setting kTcpSocketOneshotBytes{
    .name = "DDP_TCP_SOCKET_ONESHOT_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "65536",
    .min = 0,
    .meaning = "Largest socket all_reduce sent whole to every peer in one step."};
inline constexpr Setting kTcpSocketAlgo{
    .name = "DDP_TCP_SOCKET_ALGO",
    .type = Type::kChoice,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .choices = "auto|direct|hd|ring",
    .meaning = "Socket all_reduce algorithm: by size and world (auto), direct, halving-doubling or ring."};
inline constexpr Setting kTcpSocketStreams{.name = "DDP_TCP_SOCKET_STREAMS",
                                           .type = Type::kAutoInt,
                                           .scope = Scope::kGroup,
                                           .section = Section::kTcp,
                                           .fallback = "auto",
                                           .min = 1,
                                           .max = 8,
                                           .meaning =
                                               "Connections to each peer, each with its own progress thread "
                                               "(auto: from the CPUs per rank, rank 0's)."};
inline constexpr Setting kTcpInter{.name = "DDP_TCP_INTER",
                                   .type = Type::kChoice,
                                   .scope = Scope::kGroup,
                                   .section = Section::kTcp,
                                   .fallback = "socket",
                                   .choices = "socket|gloo|mpi",
                                   .meaning = "Engine of a hierarchical group's step between hosts."};
inline constexpr Setting kTcpHierarchyLarge{
    .name = "DDP_TCP_HIERARCHY_LARGE",
    .type = Type::kChoice,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .choices = "auto|split|flat",
    .meaning =
        "Hierarchical all_reduces above the small path: measured online (auto), split by host, or flat."};
inline constexpr Setting kTcpHierarchyOverlap{
    .name = "DDP_TCP_HIERARCHY_OVERLAP",
    .type = Type::kAutoBool,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .meaning = "Whether split hierarchical all_reduces overlap the steps within and between hosts."};
inline constexpr Setting kTcpHierarchySmallBytes{
    .name = "DDP_TCP_HIERARCHY_SMALL_BYTES",
    .type = Type::kAutoInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "auto",
    .min = 0,
    .meaning =
        "Largest hierarchical all_reduce on the small path: measured at group creation (auto), or fixed."};
inline constexpr Setting kTcpHierarchySegmentBytes{
    .name = "DDP_TCP_HIERARCHY_SEGMENT_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kTcp,
    .fallback = "2097152",
    .min = 0,
    .meaning = "Segment of an overlapped hierarchical all_reduce (0: one segment)."};

// ---- the mpi backend ------------------------------------------------------------------------
inline constexpr Setting kMpiCollectives{
    .name = "DDP_MPI_COLLECTIVES",
    .type = Type::kChoice,
    .scope = Scope::kGroup,
    .section = Section::kMpi,
    .fallback = "blocking",
    .choices = "blocking|nonblocking",
    .meaning =
        "Whether the world group runs MPI's blocking collectives (other groups are always nonblocking)."};
inline constexpr Setting kMpiCallerBytes{
    .name = "DDP_MPI_CALLER_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kMpi,
    .fallback = "2048",
    .min = 0,
    .meaning = "Largest collective that starts on the caller's thread, not the MPI thread (0: none)."};
inline constexpr Setting kMpiP2pBytes{
    .name = "DDP_MPI_P2P_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kMpi,
    .computed = "2147483647 for a power-of-two world, else 65536",
    .min = 0,
    .max = 2147483647,
    .meaning = "Largest all_reduce run as our own point-to-point rounds instead of MPI's (0: none)."};
inline constexpr Setting kMpiHalvingBytes{
    .name = "DDP_MPI_HALVING_BYTES",
    .type = Type::kInt,
    .scope = Scope::kGroup,
    .section = Section::kMpi,
    .fallback = "131072",
    .min = 0,
    .meaning = "From this size our all_reduce rounds halve and double; below it they double."};
inline constexpr Setting kMpiPollUs{
    .name = "DDP_MPI_POLL_US",
    .type = Type::kInt,
    .section = Section::kMpi,
    .fallback = "50",
    .min = 0,
    .max = 1'000'000,
    .meaning = "Microseconds the MPI thread and a waiter poll for a finished op before they sleep."};
inline constexpr Setting kMpiThreadLevel{.name = "DDP_MPI_THREAD_LEVEL",
                                         .type = Type::kChoice,
                                         .section = Section::kMpi,
                                         .fallback = "multiple",
                                         .choices = "single|funneled|serialized|multiple",
                                         .meaning = "The thread level requested from MPI_Init_thread."};

// ---- tools ----------------------------------------------------------------------------------
inline constexpr Setting kBenchGlooHost{.name = "DDP_BENCH_GLOO_HOST",
                                        .section = Section::kTools,
                                        .fallback = "127.0.0.1",
                                        .choices = "address",
                                        .meaning = "Address ddp-bench's direct Gloo peer binds."};

// ---- read, not ours: torchrun's, schedulers', the system's ----------------------------------
inline constexpr Setting kRank{.name = "RANK",
                               .type = Type::kInt,
                               .section = Section::kExternal,
                               .min = 0,
                               .meaning = "torchrun's: this worker's global rank."};
inline constexpr Setting kWorldSize{.name = "WORLD_SIZE",
                                    .type = Type::kInt,
                                    .section = Section::kExternal,
                                    .min = 1,
                                    .meaning = "torchrun's: the number of workers."};
inline constexpr Setting kLocalRank{.name = "LOCAL_RANK",
                                    .type = Type::kInt,
                                    .section = Section::kExternal,
                                    .min = 0,
                                    .meaning = "torchrun's: this worker's rank on its node (picks its GPU)."};
inline constexpr Setting kLocalWorldSize{.name = "LOCAL_WORLD_SIZE",
                                         .type = Type::kInt,
                                         .section = Section::kExternal,
                                         .min = 1,
                                         .meaning = "torchrun's: the workers on this node."};
inline constexpr Setting kMasterAddr{
    .name = "MASTER_ADDR",
    .section = Section::kExternal,
    .choices = "host",
    .meaning = "torchrun's: where rank 0 hosts a store when DDP_STORE is unset."};
inline constexpr Setting kMasterPort{.name = "MASTER_PORT",
                                     .type = Type::kInt,
                                     .section = Section::kExternal,
                                     .min = 0,
                                     .max = 65535,
                                     .meaning = "torchrun's: the port of that store."};
inline constexpr Setting kTorchelasticRunId{.name = "TORCHELASTIC_RUN_ID",
                                            .section = Section::kExternal,
                                            .choices = "text",
                                            .meaning = "torchrun's run id, when DDP_RUN_ID is unset."};
inline constexpr Setting kTorchelasticRestartCount{
    .name = "TORCHELASTIC_RESTART_COUNT",
    .type = Type::kInt,
    .section = Section::kExternal,
    .fallback = "0",
    .min = 0,
    .meaning = "torchrun's: restarts so far; names the store keys of each restart."};
inline constexpr Setting kTorchelasticLinePrefix{
    .name = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
    .section = Section::kExternal,
    .choices = "${role_name} ${rank} ${local_rank}",
    .meaning = "torchrun's: the prefix of relayed output lines."};
inline constexpr Setting kOmpiWorld{.name = "OMPI_COMM_WORLD_*",
                                    .section = Section::kExternal,
                                    .choices = "Open MPI's",
                                    .meaning =
                                        "Open MPI's rank, size and local rank, size: ranks when "
                                        "RANK/WORLD_SIZE are unset; nodes under mpirun."};
inline constexpr Setting kPmi{.name = "PMI_*",
                              .section = Section::kExternal,
                              .choices = "PMI's",
                              .meaning = "PMI_RANK, PMI_SIZE: ranks when RANK/WORLD_SIZE are unset."};
inline constexpr Setting kSlurm{
    .name = "SLURM_*",
    .section = Section::kExternal,
    .choices = "Slurm's",
    .meaning =
        "Slurm's ranks, node count, node id, node list and job id: ranks and nodes under srun, the run id."};
inline constexpr Setting kPbsJobId{.name = "PBS_JOBID",
                                   .section = Section::kExternal,
                                   .choices = "text",
                                   .meaning = "PBS's job id: the run id when none is given."};
inline constexpr Setting kLsbJobId{.name = "LSB_JOBID",
                                   .section = Section::kExternal,
                                   .choices = "text",
                                   .meaning = "LSF's job id: the run id when none is given."};
inline constexpr Setting kFluxJobId{.name = "FLUX_JOB_ID",
                                    .section = Section::kExternal,
                                    .choices = "text",
                                    .meaning = "Flux's job id: the run id when none is given."};
inline constexpr Setting kCobaltJobId{.name = "COBALT_JOBID",
                                      .section = Section::kExternal,
                                      .choices = "text",
                                      .meaning = "Cobalt's job id: the run id when none is given."};
inline constexpr Setting kCudaVisibleDevices{.name = "CUDA_VISIBLE_DEVICES",
                                             .section = Section::kExternal,
                                             .choices = "CUDA's",
                                             .meaning = "The GPUs --nproc-per-node auto/gpu counts."};
inline constexpr Setting kGlooSocketIfname{
    .name = "GLOO_SOCKET_IFNAME",
    .section = Section::kExternal,
    .choices = "interface name",
    .meaning = "Gloo's: the interface, when DDP_SOCKET_IFNAME is unset."};
inline constexpr Setting kPythonExec{.name = "PYTHON_EXEC",
                                     .section = Section::kExternal,
                                     .fallback = "python3",
                                     .choices = "program",
                                     .meaning = "torchrun's: the interpreter of .py programs."};
inline constexpr Setting kNoColor{.name = "NO_COLOR",
                                  .section = Section::kExternal,
                                  .choices = "any",
                                  .meaning = "Set: relayed output is never coloured."};
inline constexpr Setting kTmpdir{.name = "TMPDIR",
                                 .section = Section::kExternal,
                                 .fallback = "/tmp",
                                 .choices = "directory",
                                 .meaning = "Where ddp-launch keeps its private files (error files)."};
inline constexpr Setting kPath{.name = "PATH",
                               .section = Section::kExternal,
                               .fallback = "/usr/local/bin:/usr/bin:/bin",
                               .choices = "directories",
                               .meaning = "Where ddp-launch looks for a PROGRAM named without a '/'."};
inline constexpr Setting kOmpNumThreads{
    .name = "OMP_NUM_THREADS",
    .section = Section::kExternal,
    .choices = "OpenMP's",
    .meaning = "Set to 1 for workers when unset and several run per node."};
inline constexpr Setting kTorchNcclAsyncErrorHandling{
    .name = "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    .section = Section::kExternal,
    .fallback = "1",
    .choices = "PyTorch's",
    .meaning = "Passed to workers, 1 unless set (a hung NCCL collective aborts the worker)."};

}  // namespace ddp::settings
