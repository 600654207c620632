// An outside LibTorch program built against the installed ddp::torch, run under the installed
// ddp-launch: a linear model wrapped in DistributedDataParallel trains a few SGD steps on
// rank-dependent data. After each backward every rank checks its gradient against the average
// of all ranks' gradients, which it computes itself on a plain copy of the model (each rank can
// make any rank's data), and after each step that its weights equal the plain copy's.
// Headers as installed: <ddp/...>, nothing but <prefix>/include and LibTorch's.
#include <torch/torch.h>

#include <cstdio>
#include <exception>

#include <ddp/comm/init.h>
#include <ddp/torch/distributed_data_parallel.h>

namespace {

constexpr int kSteps = 3;
constexpr double kLr = 0.1;

// Rank r's batch at step s: 4 samples of 3 features and their targets, all known to every rank.
torch::Tensor inputs(int rank, int step) {
  return torch::arange(12, torch::kFloat32).reshape({4, 3}) * (rank + 1) / 10.0 + step;
}
torch::Tensor targets(int rank, int step) { return torch::full({4, 1}, rank - step, torch::kFloat32); }

torch::Tensor loss_of(torch::nn::Linear& model, int rank, int step) {
  return (model(inputs(rank, step)) - targets(rank, step)).pow(2).mean();
}

int run() {
  auto group = ddp::init_process_group();  // env://: ddp-launch sets RANK, WORLD_SIZE, ...
  const int rank = group->rank();
  const int world = group->size();
  torch::manual_seed(1234);  // the same start on every rank (DDP broadcasts rank 0's anyway)
  torch::nn::Linear net(3, 1);
  torch::nn::Linear plain(3, 1);
  {
    torch::NoGradGuard no_grad;
    plain->weight.copy_(net->weight);
    plain->bias.copy_(net->bias);
  }
  ddp::torch::DistributedDataParallel model(net, group);
  torch::optim::SGD opt(model->parameters(), kLr);
  torch::optim::SGD plain_opt(plain->parameters(), kLr);
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    (model(inputs(rank, step)) - targets(rank, step)).pow(2).mean().backward();
    // The average of the ranks' losses has the average of their gradients.
    plain_opt.zero_grad();
    torch::Tensor mean_loss = loss_of(plain, 0, step) / world;
    for (int r = 1; r < world; ++r) mean_loss = mean_loss + loss_of(plain, r, step) / world;
    mean_loss.backward();
    if (!torch::allclose(net->weight.grad(), plain->weight.grad(), 1e-5, 1e-6) ||
        !torch::allclose(net->bias.grad(), plain->bias.grad(), 1e-5, 1e-6)) {
      std::printf("torch consumer: rank %d step %d: the gradient is not the ranks' average\n", rank, step);
      return 1;
    }
    opt.step();
    plain_opt.step();
  }
  if (!torch::allclose(net->weight, plain->weight, 1e-5, 1e-6)) {
    std::printf("torch consumer: rank %d: the weights differ from the average's\n", rank);
    return 1;
  }
  std::printf("torch consumer: rank %d of %d, %d steps, gradients averaged, weights' sum %.6f\n", rank, world,
              kSteps, net->weight.sum().item<double>());
  ddp::destroy_process_group();
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::printf("torch consumer: error: %s\n", e.what());
    return 1;
  }
}
