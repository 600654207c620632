#include "launcher/agent_loop.h"

#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "launcher/event_log.h"
#include "launcher/stderr_sink.h"
#include "rendezvous/elastic_rendezvous.h"
#include "rendezvous/job_records.h"
#include "rendezvous/node_registration.h"

namespace ddp::launcher {
namespace {

std::string describe(const AttemptResult& r) {
  if (r.failures.empty()) return "workers stopped";
  const auto& f = r.failures.front();
  std::string how =
      f.signal ? "died of " + signal_name(f.signal) : "exited with code " + std::to_string(f.exit_code);
  return "rank " + std::to_string(f.rank) + " (local rank " + std::to_string(f.local_rank) + ", pid " +
         std::to_string(f.pid) + ") " + how;
}

void emit_round_start(const rdzv::NodeAssignment& a) {
  set_event_context("node_rank", a.node_rank);
  set_event_context("round", a.round);
  emit_event("round_start", {{"nnodes", a.nnodes},
                             {"world_size", a.world_size},
                             {"rank_offset", a.rank_offset},
                             {"local_world_size", a.local_world_size},
                             {"master_addr", a.master_addr},
                             {"master_port", a.master_port}});
}

std::string names_of(const std::vector<LivenessPeer>& peers) {
  std::string out;
  for (const auto& p : peers) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace

const char* to_string(RoundState s) {
  switch (s) {
    case RoundState::kRendezvous: return "Rendezvous";
    case RoundState::kRunning: return "Running";
    case RoundState::kMovingInPlace: return "MovingInPlace";
    case RoundState::kStopping: return "Stopping";
    case RoundState::kExitBarrier: return "ExitBarrier";
    case RoundState::kDeciding: return "Deciding";
    case RoundState::kDone: return "Done";
  }
  return "?";
}

NodeRound RoundLoop::round_of() {
  NodeRoundOptions ro;
  ro.run_id = l().run_id;
  ro.round = a_->round;
  ro.nnodes = a_->nnodes;
  ro.timeout = std::nullopt;  // heartbeats end the exit barrier when a node is lost
  // The exit barrier's waits look at the membership too: a node lost while this one waits.
  ro.check_interrupt = [this] {
    if (c_.check_interrupt) c_.check_interrupt();
    if (shared_) monitor(*shared_, *a_);
  };
  ro.watch = outcome_watch_.get();
  return NodeRound(*c_.store, std::move(ro));
}

void RoundLoop::watch_peers(const rdzv::NodeAssignment& a) {
  if (c_.liveness == nullptr) return;
  LivenessRound r;
  r.round = a.round;
  r.node_rank = a.node_rank;
  for (int i = 0; i < a.nnodes; ++i) {
    const bool known =
        i < static_cast<int>(a.id_by_node.size()) && i < static_cast<int>(a.host_by_node.size());
    r.nodes.push_back(
        {known ? a.id_by_node[i] : "", rdzv::describe_node(i, known ? a.host_by_node[i] : "?")});
  }
  c_.liveness->watch(std::move(r));
}

std::optional<RoundOutcome> RoundLoop::membership_outcome(const rdzv::NodeAssignment& a) {
  const std::vector<LivenessPeer> lost = c_.liveness ? c_.liveness->lost() : std::vector<LivenessPeer>{};
  const bool elastic = l().elastic();
  const int64_t waiting = elastic ? rdzv::waiting_in_round(*c_.store, l().run_id, a.round + 1) : 0;
  if (!lost.empty()) {
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (const auto& p : lost) names.push_back(p.name);
    emit_event("node_lost", {{"nodes", names}, {"heartbeat_ms", c_.liveness->bound().count()}});
    const int64_t left = a.nnodes - static_cast<int64_t>(lost.size());
    const std::string what = names_of(lost) + " lost: no heartbeat for " +
                             std::to_string(c_.liveness->bound().count()) +
                             " ms (keep_alive_interval x keep_alive_max_attempt; its launcher or host died)";
    if (elastic && left + waiting >= l().nnodes_min) {
      return RoundOutcome::changed(detail::str(what, "; a new round with the ", left, " node(s) left",
                                               waiting > 0 ? " and those waiting" : ""));
    }
    if (elastic) {
      return RoundOutcome::lost(detail::str(what, "; ", left, " node(s) left, ", waiting,
                                            " waiting: fewer than the minimum of ", l().nnodes_min));
    }
    return RoundOutcome::lost(what + "; a job of a fixed node count cannot go on without it");
  }
  if (elastic && waiting > 0 && a.nnodes < l().nnodes_max &&
      rdzv::RoundRecords(*c_.store, l().run_id, a.round).finished() == 0) {
    return RoundOutcome::changed(detail::str(waiting, " node(s) waiting to join; a new round with them"));
  }
  return std::nullopt;
}

bool RoundLoop::monitor(NodeRound& round, const rdzv::NodeAssignment& a) {
  // The heartbeat's view first: it needs no request to a store that may have gone silent.
  if (c_.liveness != nullptr && c_.liveness->store_lost()) return true;  // announced by no one
  if (round.decided()) return true;
  try {
    if (auto o = membership_outcome(a)) {
      round.announce(*o);
      return true;
    }
  } catch (const std::exception& e) {
    if (!c_.transient_store_errors) return true;  // the store is gone: the round cannot go on
    logger("agent")->debug("round {}: looking at the round: {}; again at the next check", a.round, e.what());
  }
  return false;
}

std::optional<RoundOutcome> RoundLoop::settle(NodeRound& round, const rdzv::NodeAssignment& a) {
  if (c_.liveness == nullptr) return std::nullopt;
  const auto since = Clock::now();
  // A peer that died before the failure is found lost within about the bound plus one interval
  // of its last beat (launcher/liveness.h); a second interval of slack for a loaded host.
  const auto deadline = since + c_.liveness->bound() + 2 * l().keep_alive_interval;
  while (Clock::now() < deadline) {
    if (c_.check_interrupt) c_.check_interrupt();
    if (c_.liveness->store_lost() || round.decided()) return std::nullopt;
    if (!c_.liveness->lost().empty()) return membership_outcome(a);
    if (c_.liveness->all_beat_since(since)) return std::nullopt;
    std::this_thread::sleep_for(std::max(Millis(1), l().keep_alive_interval / 4));
  }
  return std::nullopt;
}

RoundOutcome RoundLoop::outcome_after(const AttemptResult& r, NodeRound* shared,
                                      const rdzv::NodeAssignment& a) {
  if (r.interrupted_by != 0) {
    RoundOutcome mine = RoundOutcome::interrupted(who_ + " got " + signal_name(r.interrupted_by));
    if (shared) shared->announce(mine);
    return mine;
  }
  if (r.success) return RoundOutcome::done();  // one node: no exit barrier
  // The store gone silent: no request to it (each would wait for the link's timeout).
  if (shared && c_.liveness != nullptr) {
    if (auto why = c_.liveness->store_lost()) DDP_THROW(NetworkError, *why);
  }
  if (shared && !r.failures.empty()) {
    if (auto lost = settle(*shared, a)) return shared->announce(*lost);
  }
  const RoundOutcome mine = RoundOutcome::failed(who_ + ": " + describe(r));
  return shared ? shared->announce(mine) : mine;
}

std::optional<RoundOutcome> RoundLoop::change_in_place() {
  const rdzv::NodeAssignment& a = *a_;
  if (!l().elastic() || !multi() || (c_.liveness != nullptr && c_.liveness->store_lost()))
    return std::nullopt;
  try {
    rdzv::RoundRecords records(*c_.store, l().run_id, a.round);
    if (!records.in_place(a.rank_offset, a.local_world_size)) return std::nullopt;
    RoundOutcome outcome = records.wait_outcome({.timeout = Millis(1000)});
    if (outcome.membership_change()) return outcome;
  } catch (const std::exception&) {
    // the store is gone or says nothing: stop the workers as without recovery in place
  }
  return std::nullopt;
}

bool RoundLoop::move_in_place(const RoundOutcome& outcome) {
  rdzv::NodeAssignment& a = *a_;
  emit_event("membership_change",
             {{"reason", outcome.text()}, {"next_round", round_ + 1}, {"in_place", true}});
  logger("agent")->warn("round {}: membership changed ({}); joining round {} with the workers in place",
                        round_, outcome.detail, round_ + 1);
  std::optional<rdzv::NodeAssignment> next = c_.join(round_ + 1);
  if (!next) return false;
  for (int lr = 0; lr < a.local_world_size; ++lr) {
    rdzv::InPlaceAssignment ip;
    ip.round = next->round;
    ip.rank = next->rank_offset + lr;
    ip.world_size = next->world_size;
    ip.local_rank = lr;
    ip.local_world_size = next->local_world_size;
    ip.node_rank = next->node_rank;
    ip.nnodes = next->nnodes;
    ip.master_addr = next->master_addr;
    ip.master_port = next->master_port;
    rdzv::RoundRecords(*c_.store, l().run_id, a.round).assign(a.rank_offset + lr, ip);
  }
  const int from = a.round;
  a = std::move(*next);
  begin_round(a);
  shared_.emplace(round_of());
  rejoin_deadline_ = Clock::now() + l().rdzv_timeout;
  logger("agent")->info("round {}: {} worker(s) moved in place from round {} (ranks {}-{} of {})", round_,
                        a.local_world_size, from, a.rank_offset, a.rank_offset + a.local_world_size - 1,
                        a.world_size);
  return true;
}

bool RoundLoop::rejoin_overdue(NodeRound& round, const rdzv::NodeAssignment& a) {
  try {
    if (rdzv::RoundRecords(*c_.store, l().run_id, a.round).in_place(a.rank_offset, a.local_world_size)) {
      rejoin_deadline_.reset();
      return false;
    }
    if (Clock::now() < *rejoin_deadline_) return false;
    rejoin_deadline_.reset();
    round.announce(RoundOutcome::failed(
        detail::str(who_, ": the worker(s) moved in place did not re-join round ", a.round, " within ",
                    l().rdzv_timeout.count(), " ms (join_timeout)")));
  } catch (const std::exception&) {
  }
  return true;
}

void RoundLoop::begin_round(const rdzv::NodeAssignment& a) {
  round_ = a.round;
  nodes_ = a.nnodes;
  restarts_ = a.restart_count;
  who_ = rdzv::describe_node(a.node_rank, c_.self ? c_.self->host : "this host");
  watch_peers(a);
  if (outcome_watch_) outcome_watch_->watch(a.round);
  emit_round_start(a);
}

std::string RoundLoop::store_lost_detail(const std::string& why) const {
  return "lost the job's rendezvous store at " + c_.store_name + " (" + why + "): " + c_.store_lost_hint +
         "; the job cannot go on without it";
}

bool RoundLoop::decide(const RoundOutcome& outcome, const AttemptResult& r, AgentOutcome& out) {
  const bool own_failure = !r.success && r.interrupted_by == 0 && !r.failures.empty() &&
                           outcome.kind == RoundOutcomeKind::kFailed &&
                           outcome.detail.starts_with(who_ + ":");
  switch (outcome.kind) {
    case RoundOutcomeKind::kDone: out.status = AgentStatus::kSucceeded; return false;
    case RoundOutcomeKind::kChanged:
      emit_event("membership_change", {{"reason", outcome.text()}, {"next_round", round_ + 1}});
      logger("agent")->warn("round {}: membership changed ({}); joining round {}", round_, outcome.detail,
                            round_ + 1);
      return true;
    case RoundOutcomeKind::kFailed:
      if (restarts_ < l().max_restarts) {
        if (own_failure) write_stderr(format_failure_summary(r, l().program_name()));
        ++restarts_;
        logger("agent")->warn("restarting the workers ({} of {}) after: {}", restarts_, l().max_restarts,
                              outcome.text());
        emit_event("restart",
                   {{"restart", restarts_}, {"max_restarts", l().max_restarts}, {"reason", outcome.text()}});
        return true;
      }
      out.status = own_failure ? AgentStatus::kWorkersFailed : AgentStatus::kPeerFailed;
      break;
    case RoundOutcomeKind::kInterrupted:
      out.status = r.interrupted_by != 0 ? AgentStatus::kInterrupted : AgentStatus::kPeerFailed;
      break;
    case RoundOutcomeKind::kLost:
      lost_nodes_ = true;
      out.status = AgentStatus::kPeerFailed;
      break;
  }
  if (out.status == AgentStatus::kPeerFailed) out.detail = outcome.text();
  // This node's own announcement without a worker's exit (moved workers that did not re-join).
  if (outcome.kind == RoundOutcomeKind::kFailed && !own_failure && outcome.detail.starts_with(who_ + ":"))
    out.detail = detail::str(outcome.detail, "; no restart left (--max-restarts ", l().max_restarts, ")");
  return false;
}

void RoundLoop::start_outcome_watch() {
  if (!multi() || !c_.open_watch_store) return;
  OutcomeWatchOptions w;
  w.run_id = l().run_id;
  w.open_store = c_.open_watch_store;
  w.on_decided = [s = c_.supervisor] { s->wake_monitor(); };  // the tick then reads the flag
  // A round ends with an outcome, which ends the wait, and a lost connection ends it as an
  // error (a dead member's host: TCP keep-alive probes): the slice is only a safety net.
  w.slice = Millis(30'000);
  outcome_watch_ = std::make_unique<OutcomeWatch>(std::move(w));
}

AgentOutcome RoundLoop::run() {
  start_outcome_watch();
  state_ = RoundState::kRendezvous;
  try {
    while (state_ != RoundState::kDone) {
      const RoundState next = transition();
      if (next != state_) logger("agent")->debug("round loop: {} -> {}", to_string(state_), to_string(next));
      state_ = next;
    }
  } catch (...) {
    c_.supervisor->kill();  // nothing of an unfinished attempt outlives the loop
    throw;
  }
  return out_;
}

RoundState RoundLoop::transition() {
  switch (state_) {
    case RoundState::kRendezvous: return rendezvous();          // kRunning, kDone
    case RoundState::kRunning: return running();                // kRunning, kMovingInPlace, kStopping, ...
    case RoundState::kMovingInPlace: return moving_in_place();  // kRunning, kStopping
    case RoundState::kStopping: return stopping();              // kStopping, then as an attempt ends
    case RoundState::kExitBarrier: return exit_barrier();       // kDeciding, kDone
    case RoundState::kDeciding: return deciding();              // kRendezvous, kDone
    case RoundState::kDone: break;
  }
  return RoundState::kDone;
}

RoundState RoundLoop::rendezvous() {
  if (c_.self) c_.self->restarts = known_restarts_;
  shared_.reset();
  a_ = c_.join(next_round_);
  if (!a_) {
    logger("agent")->info("the job ended before this node could join a round; nothing to do");
    out_.status = AgentStatus::kSucceeded;
    return RoundState::kDone;
  }
  begin_round(*a_);
  rejoin_deadline_.reset();
  AttemptOptions ao;
  ao.restart_count = restarts_;
  ao.round = round_;
  if (multi()) {
    shared_.emplace(round_of());
    // A static round's monitor is woken by the outcome watch and the liveness: its tick is a
    // safety net, once a bound (each wake-up of an idle launcher costs CPU: 512 of them on a
    // host). An elastic one polls the store for nodes waiting to join.
    ao.monitor_interval = l().monitor_interval;
    if (outcome_watch_ && !l().elastic()) {
      const Millis bound = c_.liveness ? c_.liveness->bound() : l().keep_alive_interval;
      ao.monitor_interval = std::max(l().monitor_interval, bound);
    }
  }
  c_.supervisor->start(*a_, ao);
  return RoundState::kRunning;
}

RoundState RoundLoop::running() {
  if (c_.supervisor->next() == SupervisorEvent::kExited) return attempt_ended();
  if (!shared_ || c_.supervisor->stopping()) return RoundState::kRunning;
  if (rejoin_deadline_ && rejoin_overdue(*shared_, *a_)) return stop_workers();
  if (!monitor(*shared_, *a_)) return RoundState::kRunning;
  change_ = change_in_place();
  return change_ ? RoundState::kMovingInPlace : stop_workers();
}

RoundState RoundLoop::moving_in_place() {
  if (!move_in_place(*change_)) return stop_workers();
  c_.supervisor->moved(*a_);
  return RoundState::kRunning;
}

RoundState RoundLoop::stop_workers() {
  c_.supervisor->stop();
  return RoundState::kStopping;
}

RoundState RoundLoop::stopping() {
  if (c_.supervisor->next() == SupervisorEvent::kExited) return attempt_ended();
  return RoundState::kStopping;
}

RoundState RoundLoop::attempt_ended() {
  result_ = c_.supervisor->result();
  emit_event("round_end", attempt_json(result_));
  out_.last = result_;
  out_.restarts = restarts_;
  outcome_.reset();
  return result_.success && shared_ ? RoundState::kExitBarrier : RoundState::kDeciding;
}

RoundState RoundLoop::exit_barrier() {
  try {
    outcome_ = shared_->wait_outcome(a_->node_rank);
  } catch (const NetworkError& e) {
    if (c_.hosting) throw;
    return store_lost(e.message());
  }
  return RoundState::kDeciding;
}

RoundState RoundLoop::deciding() {
  try {
    if (!outcome_) outcome_ = outcome_after(result_, shared_ ? &*shared_ : nullptr, *a_);
  } catch (const NetworkError& e) {
    if (c_.hosting) throw;
    return store_lost(e.message());
  }
  if (!decide(*outcome_, result_, out_)) return RoundState::kDone;
  known_restarts_ = restarts_;
  next_round_ = round_ + 1;
  return RoundState::kRendezvous;
}

RoundState RoundLoop::store_lost(const std::string& why) {
  out_.status = AgentStatus::kPeerFailed;
  out_.detail = store_lost_detail(why);
  return RoundState::kDone;
}

}  // namespace ddp::launcher
