#pragma once
// ddp-launch's exit codes (also printed by --help). The workers' own codes pass through, as tini
// and mpirun do (torchrun flattens every failure to 1, which loses the cause); the launcher's
// own failures use codes from 120-123, which programs rarely use, so a script can tell "my
// program failed" from "the launcher could not run it".
namespace ddp::cli {

inline constexpr int kExitOk = 0;            // every worker of every node exited 0
inline constexpr int kExitUsage = 2;         // bad flag, DDP_LAUNCH_ variable or config: nothing ran
inline constexpr int kExitRendezvous = 121;  // rendezvous failed: timeout, store unreachable, nodes disagree
inline constexpr int kExitPeerFailed =
    122;  // another node failed, was interrupted or was lost; no restart left
inline constexpr int kExitInternal = 123;  // the launcher itself failed (a system call, a bug)

// The table --help prints.
inline constexpr const char* kExitCodeTable =
    "Exit codes:\n"
    "  0        every worker of every node exited 0\n"
    "  1-125    the root-cause worker's exit code (the earliest failure; see the summary)\n"
    "  126/127  the worker program is not executable / not found\n"
    "  128+N    a worker died of signal N (e.g. 137 = SIGKILL), or the job was stopped by\n"
    "           handled signal N: 130 = SIGINT (Ctrl-C), 143 = SIGTERM\n"
    "  2        usage: bad flag, DDP_LAUNCH_* variable or config file; nothing was started\n"
    "  121      rendezvous failed: a node did not arrive in time, the store was unreachable,\n"
    "           or the nodes disagree (duplicate --node-rank, different --nnodes)\n"
    "  122      another node failed or was interrupted and no restart was left, or a node\n"
    "           was lost (no heartbeat; the store host's node) and the job cannot go on\n"
    "  123      the launcher itself failed (a system call; see the message)\n"
    "With --status: 0 the job was read; 121 its store is unreachable or holds no job\n"
    "with that --rdzv-id; 2 the flags name no store (a single node, multicast).\n";

}  // namespace ddp::cli
