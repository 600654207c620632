// ddp-train-mlp: the demo job. An MLP classifier trained data-parallel on a synthetic,
// learnable data set (each rank its shard), with the DDP engine overlapping the gradient
// all_reduce with backward (mark_ready per layer). Run it under ddp-launch:
//
//   ddp-launch --standalone --nproc-per-node 2 build/bin/ddp-train-mlp
//
// Rank 0 prints one line per epoch (loss, accuracy); at the end every rank checks that the
// final weights are identical everywhere (checksum all-gathered) and rank 0 prints it.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "comm/init.h"
#include "common/error.h"
#include "ddp/engine.h"
#include "examples/dataset.h"
#include "examples/mlp.h"

namespace {

struct Config {
  std::string backend = "tcp";
  int epochs = 8;
  int batch = 64;       // per rank
  int samples = 16384;  // training set, split across ranks
  int test_samples = 2048;
  int dim = 32;
  int hidden = 64;
  int classes = 8;
  float lr = 0.1f;
  float momentum = 0.9f;
  uint64_t seed = 1234;
  double bucket_cap_mb = 0.012;  // small on purpose: several buckets, so backward overlaps them
};

using ddp::comm::view;

struct Totals {
  double loss = 0;
  double correct = 0;
  double count = 0;
};

// Sums (loss * n, correct, n) over ranks.
Totals all_reduce_totals(ddp::comm::ProcessGroup& g, Totals t) {
  std::vector<double> v{t.loss, t.correct, t.count};
  g.all_reduce(view(v.data(), v.size()))->wait();
  return {v[0], v[1], v[2]};
}

Totals evaluate(ddp::example::Mlp& model, const ddp::example::Dataset& data, const Config& c, int rank,
                int world) {
  Totals t;
  const int64_t base = 10'000'000;  // test samples live far from the training indices
  const int per_rank = c.test_samples / world;
  std::vector<float> x(static_cast<size_t>(c.batch) * c.dim);
  std::vector<int32_t> y(c.batch);
  for (int i = 0; i + c.batch <= per_rank; i += c.batch) {
    data.batch(base + static_cast<int64_t>(rank) * per_rank + i, c.batch, x.data(), y.data());
    auto r = model.forward(x.data(), y.data(), c.batch);
    t.loss += r.loss * c.batch;
    t.correct += r.correct;
    t.count += c.batch;
  }
  return t;
}

// The model's parameters, registered with the engine; the ids mark_ready takes, per layer.
struct Registered {
  std::vector<size_t> weight_id, bias_id;
};

Registered register_model(ddp::Engine& engine, ddp::example::Mlp& model) {
  Registered ids;
  for (size_t l = 0; l < model.layers().size(); ++l) {
    auto& lin = model.layers()[l];
    const std::string name = "fc" + std::to_string(l);
    ids.weight_id.push_back(engine.register_param({name + ".weight",
                                                   view(lin.weight.data(), lin.weight.size()),
                                                   view(lin.grad_weight.data(), lin.grad_weight.size()),
                                                   {lin.out, lin.in}}));
    ids.bias_id.push_back(engine.register_param({name + ".bias",
                                                 view(lin.bias.data(), lin.bias.size()),
                                                 view(lin.grad_bias.data(), lin.grad_bias.size()),
                                                 {lin.out}}));
  }
  return ids;
}

struct Job {
  const Config& c;
  ddp::comm::ProcessGroupPtr group;
  ddp::example::Dataset data;
  ddp::example::Mlp model;
  ddp::example::Sgd sgd;

  int rank() const { return group->rank(); }
  int world() const { return group->size(); }

  // One pass over this rank's shard; every rank takes the same number of steps.
  Totals epoch(ddp::Engine& engine, const Registered& ids, int epoch) {
    const int shard = c.samples / world(), steps = shard / c.batch;
    std::vector<float> x(static_cast<size_t>(c.batch) * c.dim);
    std::vector<int32_t> y(c.batch);
    // Every batch of the shard once per epoch, in an order shuffled by the epoch (Fisher-Yates).
    std::vector<int> order(steps);
    for (int s = 0; s < steps; ++s) order[s] = s;
    for (int s = steps - 1; s > 0; --s) {
      std::swap(order[s], order[ddp::example::mix(c.seed, epoch, s) % static_cast<uint64_t>(s + 1)]);
    }
    Totals t;
    for (int b : order) {
      data.batch(static_cast<int64_t>(rank()) * shard + static_cast<int64_t>(b) * c.batch, c.batch, x.data(),
                 y.data());
      model.zero_grad();
      engine.pre_forward();
      auto r = model.forward(x.data(), y.data(), c.batch);
      model.backward([&](size_t l) {  // layer l's gradients are final: its bucket may go
        engine.mark_ready(ids.weight_id[l]);
        engine.mark_ready(ids.bias_id[l]);
      });
      engine.finish_backward();  // averaged gradients
      sgd.step(model);
      t.loss += r.loss * c.batch;
      t.correct += r.correct;
      t.count += c.batch;
    }
    return t;
  }

  // The weights must be identical on every rank: compare checksums across ranks.
  bool identical_everywhere() {
    double checksum = model.checksum();
    std::vector<double> all(world());
    group->all_gather(view(&checksum, 1), view(all.data(), all.size()))->wait();
    for (int r = 0; r < world(); ++r) {
      if (all[r] != all[0]) {
        std::fprintf(stderr,
                     "ddp-train-mlp: rank %d: weights differ across ranks (rank 0 %.17g, rank %d %.17g)\n",
                     rank(), all[0], r, all[r]);
        return false;
      }
    }
    if (rank() == 0)
      std::printf("final weights checksum: %.10f (identical on all %d ranks)\n", checksum, world());
    return true;
  }
};

int train(const Config& c) {
  ddp::InitOptions init;
  init.backend = c.backend;
  if (ddp::ranks_from_env().world_size < 0) {  // no launcher (ddp-launch, mpirun, srun): a world of one
    init.rank = 0;
    init.world_size = 1;
  }
  auto group = ddp::init_process_group(init);
  // Every rank starts from a different model: the engine's broadcast from rank 0 aligns them.
  Job job{c, group, ddp::example::Dataset(c.dim, c.classes, c.seed),
          ddp::example::Mlp({c.dim, c.hidden, c.hidden, c.classes}, c.seed + 17 * group->rank()),
          ddp::example::Sgd({c.lr, c.momentum})};
  ddp::EngineOptions options;
  options.bucket_cap_mb = c.bucket_cap_mb;
  options.first_bucket_cap_mb = c.bucket_cap_mb / 2;
  ddp::Engine engine(group, options);
  Registered ids = register_model(engine, job.model);
  engine.finalize();
  if (job.rank() == 0) {
    std::printf(
        "ddp-train-mlp: %d rank(s), backend %s, %zu parameters, %zu buckets, %d samples/rank, batch "
        "%d/rank\n",
        job.world(), group->backend_name().c_str(), job.model.num_parameters(), engine.buckets().size(),
        c.samples / job.world(), c.batch);
  }
  auto start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= c.epochs; ++epoch) {
    // Cosine learning-rate decay down to a tenth: smooth late epochs that still learn.
    const float phase = 3.14159265f * static_cast<float>(epoch - 1) / static_cast<float>(c.epochs);
    job.sgd.set_lr(c.lr * (0.1f + 0.45f * (1.0f + std::cos(phase))));
    Totals tr = all_reduce_totals(*group, job.epoch(engine, ids, epoch));
    Totals te = all_reduce_totals(*group, evaluate(job.model, job.data, c, job.rank(), job.world()));
    if (job.rank() == 0) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("epoch %2d/%d  loss %.4f  train-acc %5.1f%%  test-loss %.4f  test-acc %5.1f%%  (%.2f s)\n",
                  epoch, c.epochs, tr.loss / tr.count, 100 * tr.correct / tr.count, te.loss / te.count,
                  100 * te.correct / te.count, secs);
      std::fflush(stdout);
    }
  }
  if (!job.identical_everywhere()) return 1;
  ddp::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"ddp-train-mlp: data-parallel MLP training with the ddp engine (the demo job)"};
  app.add_option("--backend", c.backend, "tcp, gloo, mpi or nccl")->capture_default_str();
  app.add_option("--epochs", c.epochs, "passes over the training set")->capture_default_str();
  app.add_option("--batch", c.batch, "batch size per rank")->capture_default_str();
  app.add_option("--samples", c.samples, "training samples (all ranks together)")->capture_default_str();
  app.add_option("--hidden", c.hidden, "hidden layer width")->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--seed", c.seed, "data set and model seed")->capture_default_str();
  app.add_option("--bucket-cap-mb", c.bucket_cap_mb, "engine bucket cap (MB)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (c.epochs < 1 || c.batch < 1 || c.samples < c.batch || c.hidden < 1) {
    std::fprintf(stderr,
                 "ddp-train-mlp: epochs, batch, samples and hidden must be positive (samples >= batch)\n");
    return 2;
  }
  try {
    return train(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-train-mlp: error: %s\n", e.what());
    return 1;
  }
}
