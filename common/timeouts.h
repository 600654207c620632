#pragma once
// Every default timeout of the project, in one place, so modules never disagree.
// Environment overrides are read where the value is used (see each comment).
#include <chrono>

namespace ddp {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Store operations (get, wait) when the caller gives no timeout.
inline constexpr Millis kDefaultStoreTimeout{300'000};
// Connecting to a store: retried with backoff and jitter until this deadline.
inline constexpr Millis kDefaultConnectTimeout{60'000};
// Collectives when neither the op nor the group sets one (c10d's default is 30 min; ours is
// 10 min: a hang is worse than a restart). DDP_TIMEOUT_MS overrides at init_process_group.
inline constexpr Millis kDefaultCollectiveTimeout{600'000};
// A dead peer must become an error within this bound (heartbeats).
inline constexpr Millis kPeerLossDetection{2'000};
// A peer across a network that went silent (its host or link died): an error within this bound
// (TCP keepalive probes each second while a connection is idle, TCP_USER_TIMEOUT for data not
// acknowledged). Longer than kPeerLossDetection because a congested link drops packets: 8 s rides
// out 7 lost probes in a row, or 5 losses of one segment (retransmitted after 0.2, 0.6, 1.4, 3.0,
// 6.2 s), near NCCL's InfiniBand retry budget (7 retries of about 1 s at NCCL_IB_TIMEOUT's default).
inline constexpr Millis kLinkLossDetection{8'000};
// A store client that cancelled a wait gives the server this long to answer before calling it lost.
inline constexpr Millis kStoreCancelGrace{10'000};
// A connection to the store server must finish its handshake within this (strangers that
// stay silent are dropped; a real client needs two round trips).
inline constexpr Millis kDefaultStoreHandshakeTimeout{10'000};
// The tcp backend's set-up: an accepted connection must finish its handshake within this.
// Handshakes are served concurrently, so a silent stranger delays nobody; this only bounds
// what it holds.
inline constexpr Millis kTcpHandshakeTimeout{5'000};
// Node-level rendezvous: all launchers must arrive within this.
inline constexpr Millis kDefaultRendezvousTimeout{900'000};
// Elastic rounds (torchrun's --rdzv-conf last_call_timeout / close_timeout, same defaults): how
// long a round stays open for more nodes once MIN are in; how long the store host waits for the
// other launchers to leave at the end.
inline constexpr Millis kDefaultLastCallTimeout{30'000};
inline constexpr Millis kDefaultCloseTimeout{30'000};
// Heartbeats between launchers (--rdzv-conf keep_alive_interval / keep_alive_max_attempt): a
// launcher silent for interval x attempts is lost. torchrun's 5 s x 3 notices a lost node in
// 15 s; ours is 1 s x 5, so a lost node is noticed in seconds and one late beat is no loss.
inline constexpr Millis kDefaultKeepAliveInterval{1'000};
inline constexpr int kDefaultKeepAliveMaxAttempt = 5;
// The launcher's own store requests without a timeout of their own (torchrun's read_timeout).
inline constexpr Millis kDefaultRendezvousReadTimeout{60'000};
// Launcher: grace between SIGTERM and SIGKILL when stopping workers.
inline constexpr Millis kDefaultShutdownGrace{30'000};
// Launcher hosting the store: how long, beyond the shutdown grace, it waits for the other
// nodes' launchers to report their outcome before it takes the store down.
inline constexpr Millis kStoreHostLeaveGrace{10'000};
// Launcher: at the end of an attempt, how long relayed output waits for a console that takes
// nothing (a reader that stopped) before the rest is dropped and counted.
inline constexpr Millis kConsoleDrainStall{2'000};
// Launcher: how often workers are checked when nothing else wakes the loop.
inline constexpr Millis kDefaultMonitorInterval{100};

// "Use the default of whoever owns this" (the store's, the group's).
inline constexpr Millis kUseDefault{-1};

}  // namespace ddp
