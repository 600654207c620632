#include "ddp/elastic/elastic.h"

#include <algorithm>
#include <vector>

#include "comm/init_store.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "rendezvous/job_records.h"
#include "rendezvous/round_outcome.h"

namespace ddp::elastic {
namespace {

int required_int(int given, const settings::Setting& s) {
  if (given >= 0) return given;
  auto v = settings::get_int(s);
  if (!v)
    DDP_THROW(InvalidArgument, "ddp::elastic: ", s.name, " is not set (run the program under ddp-launch)");
  return static_cast<int>(*v);
}

}  // namespace

Session::Session(SessionOptions options) : o_(std::move(options)) {
  store_ = o_.store;
  if (!store_) {
    if (!settings::get(settings::kStore)) {
      DDP_THROW(InvalidArgument, "ddp::elastic needs the launchers' store: ", settings::kStore.name,
                " is not set (run the program under ddp-launch --nnodes MIN:MAX)");
    }
    comm::StoreRequest req;
    req.backend = o_.backend;
    req.job_token = settings::get_or(settings::kJobToken, "");
    store_ = comm::open_init_store(req).store;
  }
  if (o_.run_id.empty()) o_.run_id = settings::get_or(settings::kRunId, "");
  if (o_.run_id.empty()) DDP_THROW(InvalidArgument, "ddp::elastic: ", settings::kRunId.name, " is not set");
  round_ = required_int(o_.round, settings::kElasticRound);
  const comm::EnvRanks env = (o_.rank >= 0 && o_.world_size >= 1) ? comm::EnvRanks{} : comm::env_ranks();
  rank_ = o_.rank >= 0 ? o_.rank : env.rank;
  world_size_ = o_.world_size >= 1 ? o_.world_size : env.world_size;
  DDP_CHECK(rank_ >= 0 && rank_ < world_size_, "ddp::elastic: rank ", rank_, " of ", world_size_);
  if (o_.timeout == kUseDefault)
    o_.timeout = Millis(settings::int_or(settings::kTimeoutMs, kDefaultCollectiveTimeout.count()));
  form();
}

Session::~Session() { watcher_.reset(); }

const comm::ProcessGroupPtr& Session::group() const { return factory_->world(); }

void Session::form() {
  comm::GroupFactoryOptions fo;
  fo.backend = o_.backend;
  fo.store = rdzv::RoundRecords::group_store(store_, o_.run_id, round_);
  fo.rank = rank_;
  fo.world_size = world_size_;
  fo.timeout = o_.timeout;
  fo.job_token = settings::get_or(settings::kJobToken, "");
  factory_ = std::make_unique<comm::GroupFactory>(fo);
  rdzv::RoundRecords(*store_, o_.run_id, round_).mark_in_place(rank_);
  watch();
}

void Session::watch() {
  RoundWatcher::Options wo;
  wo.store = store_;
  wo.run_id = o_.run_id;
  wo.round = round_;
  wo.on_change = [group = factory_->world(), round = round_](const rdzv::RoundOutcome& outcome) {
    const std::string reason = detail::str("round ", round, " ended: ", outcome.text());
    logger("elastic")->warn("{}; aborting the group's pending collectives", reason);
    group->abort(reason);
  };
  watcher_ = std::make_unique<RoundWatcher>(std::move(wo));
}

void Session::check() {
  const auto outcome = rdzv::RoundRecords(*store_, o_.run_id, round_).outcome();
  if (outcome && outcome->membership_change())
    DDP_THROW(MembershipChanged, "round ", round_, " ended: ", outcome->text());
}

bool Session::await_change() {
  try {
    return rdzv::RoundRecords(*store_, o_.run_id, round_)
        .wait_outcome({.timeout = o_.outcome_timeout})
        .membership_change();
  } catch (const TimeoutError&) {
    return false;
  }
}

void Session::rejoin() {
  watcher_.reset();  // stopped first: it aborts the old group, never the next one
  factory_.reset();  // the old group's peers are gone or moving on
  const rdzv::InPlaceAssignment a =
      rdzv::RoundRecords(*store_, o_.run_id, round_).wait_assignment(rank_, {.timeout = o_.rejoin_timeout});
  logger("elastic")->info("round {} -> {}: rank {} of {} -> rank {} of {}", round_, a.round, rank_,
                          world_size_, a.rank, a.world_size);
  round_ = a.round;
  rank_ = a.rank;
  world_size_ = a.world_size;
  ++rounds_;
  form();
}

void State::commit() {
  commit_ = save();
  has_commit_ = true;
  if (session_ != nullptr) session_->check();
}

void State::restore() {
  if (has_commit_) load(commit_);
}

void State::sync(comm::ProcessGroup& group, int root) {
  int64_t size = group.rank() == root ? static_cast<int64_t>(commit_.size()) : 0;
  group.broadcast(comm::view(&size, 1), {.root = root})->wait();
  std::string bytes = group.rank() == root ? commit_ : std::string(static_cast<size_t>(size), '\0');
  group.broadcast(comm::view(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size()), {.root = root})->wait();
  load(bytes);  // the root too: what changed since its commit (on_group's collectives) is undone
  if (group.rank() == root) return;
  commit_ = std::move(bytes);
  has_commit_ = true;
}

int sync_root(comm::ProcessGroup& group, int rounds) {
  int64_t mine = rounds;
  std::vector<int64_t> all(static_cast<size_t>(group.size()));
  group.all_gather(comm::view(&mine, 1), comm::view(all.data(), all.size()))->wait();
  return static_cast<int>(std::max_element(all.begin(), all.end()) - all.begin());
}

void run(Session& session, State& state, const std::function<void(const comm::ProcessGroupPtr&)>& train,
         const RunOptions& options) {
  state.attach(nullptr);
  if (!state.committed()) state.commit();
  state.attach(&session);
  struct Detach {
    explicit Detach(State& state) : s(state) {}
    Detach(const Detach&) = delete;
    Detach& operator=(const Detach&) = delete;
    ~Detach() { s.attach(nullptr); }
    State& s;
  } detach(state);
  for (int rejoins = 0;;) {
    try {
      if (options.on_group) options.on_group(session.group());
      state.sync(*session.group(), sync_root(*session.group(), session.rounds()));
      train(session.group());
      return;
    } catch (const Error& e) {
      // NetworkError covers a lost peer, MembershipChanged and Aborted (the watch's abort).
      const bool recoverable = dynamic_cast<const NetworkError*>(&e) || dynamic_cast<const TimeoutError*>(&e);
      if (!recoverable || ++rejoins > options.max_rejoins) throw;
      logger("elastic")->warn("round {}: {}; waiting for the round's outcome", session.round(), e.message());
      if (!session.await_change()) throw;
      state.restore();
      session.rejoin();
    }
  }
}

}  // namespace ddp::elastic
