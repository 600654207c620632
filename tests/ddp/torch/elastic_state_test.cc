// ddp::torch::ElasticState: a LibTorch model's parameters, buffers, optimizer state and counters
// as the bytes ddp::elastic commits and broadcasts; loaded in place (the tensors keep their
// storage, which a DDP wrapper registered).
#include "ddp/torch/elastic_state.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/powersgd.h"
#include "ddp/rank_threads.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "rendezvous/hash_store.h"
#include "torch_models.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

struct Net : ::torch::nn::Module {
  Net() {
    fc = register_module("fc", ::torch::nn::Linear(4, 3));
    bn = register_module("bn", ::torch::nn::BatchNorm1d(3));
  }
  ::torch::Tensor forward(const ::torch::Tensor& x) { return bn->forward(fc->forward(x)); }
  ::torch::nn::Linear fc{nullptr};
  ::torch::nn::BatchNorm1d bn{nullptr};
};

void train_step(Net& net, ::torch::optim::Optimizer& opt) {
  opt.zero_grad();
  net.forward(::torch::randn({8, 4})).sum().backward();
  opt.step();
}

}  // namespace

TEST_CASE("restore() brings back the committed parameters, buffers, momentum and counters, in place") {
  ::torch::manual_seed(7);
  auto net = std::make_shared<Net>();
  ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  int64_t epoch = 2, step = 17;
  ddp::torch::ElasticState state(*net, opt, {&epoch, &step});
  train_step(*net, opt);  // momentum exists now
  state.commit();
  const auto weight = net->fc->weight.clone();
  const auto mean = net->bn->running_mean.clone();
  const void* storage = net->fc->weight.data_ptr();
  // A reference: one more step from the commit.
  train_step(*net, opt);
  epoch = 3;
  step = 99;
  CHECK_FALSE(net->fc->weight.equal(weight));
  state.restore();
  CHECK(net->fc->weight.equal(weight));
  CHECK(net->bn->running_mean.equal(mean));
  CHECK(net->fc->weight.data_ptr() == storage);
  CHECK(epoch == 2);
  CHECK(step == 17);
  // The momentum came back too: the same step from the same commit gives the same weights.
  ::torch::manual_seed(11);
  train_step(*net, opt);
  const auto once = net->fc->weight.clone();
  state.restore();
  ::torch::manual_seed(11);
  train_step(*net, opt);
  CHECK(net->fc->weight.equal(once));
}

TEST_CASE("sync() over a group of one keeps the state; a state of another model does not load") {
  auto net = std::make_shared<Net>();
  ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(0.1));
  int64_t step = 5;
  ddp::torch::ElasticState state(*net, opt, {&step});
  elastic::SessionOptions so;
  so.store = std::make_shared<rdzv::HashStore>();
  so.run_id = "elastic_state_test";
  so.round = 0;
  so.rank = 0;
  so.world_size = 1;
  elastic::Session session(so);
  state.commit();
  state.sync(*session.group(), 0);
  CHECK(step == 5);

  auto other = std::make_shared<::torch::nn::LinearImpl>(4, 5);
  ::torch::optim::SGD other_opt(other->parameters(), ::torch::optim::SGDOptions(0.1));
  int64_t other_step = 0;
  // The bytes of one model offered to a state of another: load refuses them.
  CHECK_THROWS_AS(([&] {
                    struct Peek : ddp::torch::ElasticState {
                      using ddp::torch::ElasticState::ElasticState;
                      using ddp::torch::ElasticState::load;
                      using ddp::torch::ElasticState::save;
                    };
                    Peek from(*net, opt, {&step});
                    Peek to(*other, other_opt, {&other_step});
                    to.load(from.save());
                  }()),
                  InvalidArgument);
}

namespace {

at::Tensor flat(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> parts;
  for (const auto& p : params) parts.push_back(p.detach().reshape(-1));
  return at::cat(parts);
}

// One worker process of a recovery in place: its model, optimizer, PowerSGD state and the
// ElasticState over them, kept across its groups.
struct Worker {
  explicit Worker(uint64_t seed, const ddp::PowerSGDOptions& o)
      : net(torch_test::seeded_net(seed)),
        opt(net->parameters(), ::torch::optim::SGDOptions(0.1)),
        powersgd(std::make_shared<ddp::PowerSGDState>(o)),
        state(*net.ptr(), opt, {&step}) {
    state.keep(powersgd);
  }
  torch_test::TinyNet net;
  ::torch::optim::SGD opt;
  std::shared_ptr<ddp::PowerSGDState> powersgd;
  int64_t step = 0;
  ddp::torch::ElasticState state;
};

// `steps` of the worker at `rank` of `group` from its step on, under a DDP wrapper built over
// the group (as run()'s on_group does) with the PowerSGD hook.
void train(Worker& w, int rank, const ddp::comm::ProcessGroupPtr& group, const torch_test::Batches& data,
           int steps, int64_t per_rank) {
  ddp::torch::DistributedDataParallel<torch_test::TinyNet> model(w.net, group);
  model->register_comm_hook(ddp::powersgd_hook(w.powersgd));
  for (int s = 0; s < steps; ++s, ++w.step) {
    w.opt.zero_grad();
    const auto x = torch_test::shard(data.x[static_cast<size_t>(w.step)], rank, per_rank);
    const auto y = torch_test::shard(data.y[static_cast<size_t>(w.step)], rank, per_rank);
    ::torch::nn::functional::cross_entropy(model(x), y).backward();
    w.opt.step();
  }
}

}  // namespace

// Workers A, B, C commit after a compressed step, take one more, then C is lost and D joins: B
// (the root), A and D form the next group, as ddp::elastic::run does (restore, the new group's
// wrapper, sync from the root). PowerSGD must come back as committed on A and B, error feedback
// included, and D must take the shared part (the iteration, seed stream and Qs) with no error;
// the next steps must then be those of workers built from the commits directly.
TEST_CASE("ElasticState with PowerSGD: rolled back, the shared part synced, each survivor's error its own") {
  at::set_num_threads(1);
  constexpr int kWorld = 3, kCommitted = 3, kAfter = 2;
  constexpr int64_t kPerRank = 4;
  ddp::PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  const auto data = torch_test::make_batches(kCommitted + 1 + kAfter, kWorld * kPerRank);
  std::vector<std::unique_ptr<Worker>> w;
  for (uint64_t seed : {1, 1, 1, 9}) w.push_back(std::make_unique<Worker>(seed, o));
  std::vector<std::string> committed(kWorld);
  std::vector<at::Tensor> committed_params;
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    Worker& me = *w[static_cast<size_t>(rank)];
    train(me, rank, group, data, kCommitted, kPerRank);
    me.state.commit();
    committed[static_cast<size_t>(rank)] = me.powersgd->save();
    if (rank == 0) committed_params = torch_test::snapshot(*me.net);
    train(me, rank, group, data, 1, kPerRank);  // not committed
  });
  CHECK((committed[0] != committed[1]));  // each rank's own error feedback
  w[3]->state.commit();                   // a joining worker's run() commits its fresh state first

  const std::vector<size_t> next = {1, 0, 3};  // B, A, D as ranks 0, 1, 2 of the next group
  std::vector<at::Tensor> recovered(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    Worker& me = *w[next[static_cast<size_t>(rank)]];
    me.state.restore();
    { ddp::torch::DistributedDataParallel<torch_test::TinyNet> on_group(me.net, group); }
    me.state.sync(*group, 0);
    CHECK(me.step == kCommitted);
    CHECK(me.powersgd->iteration() == kCommitted);
    if (rank < 2) CHECK((me.powersgd->save() == committed[next[static_cast<size_t>(rank)]]));
    train(me, rank, group, data, kAfter, kPerRank);
    recovered[static_cast<size_t>(rank)] = flat(me.net->parameters());
  });

  std::vector<at::Tensor> direct(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    Worker me(5, o);
    {
      ::torch::NoGradGuard no_grad;
      auto params = me.net->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(committed_params[i]);
    }
    me.step = kCommitted;
    if (rank < 2) {
      me.powersgd->load(committed[next[static_cast<size_t>(rank)]]);
    } else {
      me.powersgd->load_shared(committed[1]);
    }
    train(me, rank, group, data, kAfter, kPerRank);
    direct[static_cast<size_t>(rank)] = flat(me.net->parameters());
  });
  for (int r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    CHECK(recovered[static_cast<size_t>(r)].equal(direct[static_cast<size_t>(r)]));
  }
}

namespace {

// A worker with ZeRO (Adam) instead of PowerSGD.
struct ZeroWorker {
  explicit ZeroWorker(uint64_t seed, const ddp::comm::ProcessGroupPtr& group)
      : net(torch_test::seeded_net(seed)),
        zero(net->parameters(), group,
             [](std::vector<at::Tensor> p) {
               return std::make_unique<::torch::optim::Adam>(std::move(p), ::torch::optim::AdamOptions(0.01));
             }),
        state(*net.ptr(), zero, {&step}) {}
  torch_test::TinyNet net;
  ddp::torch::ZeroRedundancyOptimizer zero;
  int64_t step = 0;
  ddp::torch::ElasticState state;
};

void train(ZeroWorker& w, int rank, const ddp::comm::ProcessGroupPtr& group, const torch_test::Batches& data,
           int steps, int64_t per_rank) {
  ddp::torch::DistributedDataParallel<torch_test::TinyNet> model(w.net, group);
  for (int s = 0; s < steps; ++s, ++w.step) {
    w.zero.zero_grad();
    const auto x = torch_test::shard(data.x[static_cast<size_t>(w.step)], rank, per_rank);
    const auto y = torch_test::shard(data.y[static_cast<size_t>(w.step)], rank, per_rank);
    ::torch::nn::functional::cross_entropy(model(x), y).backward();
    w.zero.step();
  }
}

// Adam's state of parameter `p` in `opt` (exp_avg, exp_avg_sq, step), empty when none.
std::vector<at::Tensor> adam_state(const ::torch::optim::Optimizer& opt, const at::Tensor& p) {
  auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
  if (it == opt.state().end()) return {};
  const auto& s = dynamic_cast<const ::torch::optim::AdamParamState&>(*it->second);
  return {s.exp_avg().clone(), s.exp_avg_sq().clone(), at::tensor(s.step())};
}

}  // namespace

// Workers A, B, C with ZeRO commit, take one more step, then C is lost and D joins: B, A and D
// regroup (on_group) between the restore and the sync. Each new shard must hold the committed
// state its old owner kept when that owner survived (by value), and none when it was C.
TEST_CASE("ElasticState with ZeRO: survivors' shards come back as committed, regrouped over the new group") {
  at::set_num_threads(1);
  constexpr int kWorld = 3, kCommitted = 2;
  constexpr int64_t kPerRank = 4;
  const auto data = torch_test::make_batches(kCommitted + 3, kWorld * kPerRank);
  std::vector<std::unique_ptr<ZeroWorker>> w(4);
  std::vector<std::vector<at::Tensor>> committed;  // per parameter index, from the consolidation
  std::vector<at::Tensor> committed_params;
  std::vector<int> old_owner;
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    w[static_cast<size_t>(rank)] = std::make_unique<ZeroWorker>(1, group);
    ZeroWorker& me = *w[static_cast<size_t>(rank)];
    train(me, rank, group, data, kCommitted, kPerRank);
    me.state.commit();
    me.zero.consolidate_state_dict(0);
    if (rank == 0) {
      committed_params = torch_test::snapshot(*me.net);
      for (const auto& p : me.net->parameters()) committed.push_back(adam_state(*me.zero.consolidated(), p));
      for (size_t i = 0; i < committed_params.size(); ++i) old_owner.push_back(me.zero.owner(i));
    }
    train(me, rank, group, data, 1, kPerRank);  // not committed
  });
  REQUIRE(std::count(old_owner.begin(), old_owner.end(), 2) > 0);  // C held some of the state

  const std::vector<size_t> next = {1, 0, 3};  // B, A, D
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    if (rank == 2) {
      w[3] = std::make_unique<ZeroWorker>(9, group);
      w[3]->state.commit();  // a joining worker's run() commits its fresh state first
    }
    ZeroWorker& me = *w[next[static_cast<size_t>(rank)]];
    me.state.restore();
    me.zero.regroup(group);  // on_group
    me.state.sync(*group, 0);
    CHECK(me.step == kCommitted);
    const auto params = me.net->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      CHECK(params[i].equal(committed_params[i]));
      if (me.zero.owner(i) != rank) continue;
      const auto got = adam_state(me.zero.local_optimizer(), params[i]);
      if (old_owner[i] == 2) {
        CHECK(got.empty());  // C's shard went with C
        continue;
      }
      REQUIRE(got.size() == 3);
      REQUIRE(committed[i].size() == 3);
      for (size_t k = 0; k < 3; ++k) CHECK(got[k].equal(committed[i][k]));
    }
    train(me, rank, group, data, 1, kPerRank);  // the regrouped ZeRO steps on
  });
}
