// ddp::torch::ElasticState: a LibTorch model's parameters, buffers, optimizer state and counters
// as the bytes ddp::elastic commits and broadcasts; loaded in place (the tensors keep their
// storage, which a DDP wrapper registered).
#include "ddp/torch/elastic_state.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;

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
