// ddp-train-fashion-mnist: the main demo job (`make demo`). A convolutional network trained
// data-parallel on Fashion-MNIST with LibTorch and ddp::torch::DistributedDataParallel:
//   ddp-launch --standalone --nproc-per-node 2 build/bin/ddp-train-fashion-mnist
// Each rank reads the real IDX files and trains on its shard (DistributedRandomSampler,
// reshuffled every epoch). Rank 0 prints one line per epoch — training loss, test accuracy over
// the whole test set, samples/s over all ranks. With --checkpoint DIR, rank 0 saves model,
// optimizer and progress atomically every --checkpoint-every steps and at each epoch's end, and
// every rank loads the newest at start, before wrapping the model: a job restarted by ddp-launch
// (--max-restarts, or a new elastic round) continues from the saved step, mid-epoch, with the same
// data order (the batches already trained are skipped). --elastic-in-place (under --nnodes
// MIN:MAX): a lost or joining node restarts no worker; the state is committed every step and
// re-formed in place (ddp/elastic/elastic.h, train_in_place below).
#include <torch/data.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/init.h"
#include "common/error.h"
#include "common/settings.h"
#include "ddp/elastic/elastic.h"
#include "ddp/post_local_sgd_hook.h"
#include "ddp/powersgd.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "ddp/torch/elastic_state.h"
#include "ddp/torch/model_averaging.h"
#include "ddp/torch/powersgd_random.h"
#include "ddp/torch/zero_optimizer.h"
#include "examples/checkpoint.h"
#include "examples/cnn.h"
#include "examples/fashion_mnist.h"

namespace {

using demo::FashionMnist;

struct Config {
  std::string backend = "tcp";
  std::string data_dir = demo::kFashionMnistDir;
  std::string checkpoint;          // directory; empty: none
  int64_t checkpoint_every = 100;  // optimizer steps between checkpoints (and one at each epoch's end)
  int epochs = 2;
  int batch = 32;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  size_t train_limit = 0;  // 0: all 60,000
  size_t test_limit = 0;   // 0: all 10,000
  int threads = 0;         // 0: LibTorch's default (OMP_NUM_THREADS)
  bool bucket_view = false;
  bool sync_bn = false;
  bool fp16 = false;             // gradients all_reduced in float16
  int powersgd = 0;              // PowerSGD's rank; 0: plain averaging
  int64_t powersgd_start = 100;  // plain iterations before PowerSGD
  bool zero = false;             // ZeroRedundancyOptimizer around the SGD
  int64_t local_sgd = 0;         // average parameters every K steps after the warm-up; 0: off
  int64_t local_sgd_warmup = 100;
  bool in_place = false;     // --elastic-in-place
  int64_t fail_at_step = 0;  // tests: the last rank exits after this global step, in the first attempt only
  bool print_steps = false;  // bench/elastic.sh: one line per optimizer step
};

struct Totals {
  double loss = 0, correct = 0, count = 0;
};

Totals sum_over_ranks(ddp::comm::ProcessGroup& group, Totals t) {
  std::vector<double> v{t.loss, t.correct, t.count};
  group.all_reduce(ddp::comm::view(v.data(), v.size()))->wait();
  return {v[0], v[1], v[2]};
}

// Where training stands, and what happens after each optimizer step: rank 0 saves a checkpoint
// every `checkpoint_every` steps; the test fault (--fail-at-step) fires.
struct Steps {
  const Config& c;
  int rank, world;
  demo::Cnn& cnn;
  ::torch::optim::Optimizer& opt;
  demo::Progress& at;
  bool first_attempt;
  std::function<void()> optimizer_step, zero_grad;  // opt's, or the ZeRO / local SGD wrapper's
  ddp::elastic::State* elastic = nullptr;           // committed after every step (--elastic-in-place)

  void save() {
    if (rank == 0 && !c.checkpoint.empty()) demo::save_checkpoint(c.checkpoint, *cnn, opt, at);
  }
  void after_step(int64_t batch_size) {
    ++at.step;
    ++at.epoch_step;
    at.epoch_samples += batch_size * world;  // every rank's shard has the same size
    if (c.checkpoint_every > 0 && at.step % c.checkpoint_every == 0) save();
    if (elastic != nullptr) elastic->commit();
    if (c.print_steps) print_step();
    if (first_attempt && at.step == c.fail_at_step && rank == world - 1) {
      std::fprintf(stderr,
                   "ddp-train-fashion-mnist: rank %d: failing after step %lld as asked (--fail-at-step)\n",
                   rank, static_cast<long long>(at.step));
      std::exit(3);
    }
  }
  // As bench/elastic_job.py prints its steps (bench/elastic.sh reads them).
  void print_step() const {
    const double t =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::printf(
        "elastic_job step %lld rank %d world %d restart %lld t %.6f\n", static_cast<long long>(at.step), rank,
        world, static_cast<long long>(ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount)), t);
    std::fflush(stdout);
  }
  void end_epoch() {
    at = {at.step, at.epoch + 1, 0, 0, world};
    save();
  }
  // The batches of this epoch already trained: drawn again but not trained, so the data order
  // stays the same. A checkpoint of another world size trained another sharding: skip the same
  // share of the epoch.
  int64_t batches_done() const {
    if (at.world_size == world) return at.epoch_step;
    return at.epoch_samples / (static_cast<int64_t>(c.batch) * world);
  }
};

template <typename Model, typename Loader>
Totals train_epoch(Model& model, Loader& loader, Steps& steps) {
  Totals t;
  model->train();
  int64_t skip = steps.batches_done();
  steps.at.epoch_step = skip;
  steps.at.world_size = steps.world;
  for (auto& batch : *loader) {
    if (skip > 0) {
      --skip;
      continue;
    }
    steps.zero_grad();
    auto loss = ::torch::nn::functional::nll_loss(model(batch.data), batch.target);
    loss.backward();  // averaged gradients when it returns
    steps.optimizer_step();
    const double n = static_cast<double>(batch.data.size(0));
    t.loss += loss.template item<double>() * n;
    t.count += n;
    steps.after_step(batch.data.size(0));
  }
  return t;
}

// The local module, no collectives: each rank scores its share of the test set.
template <typename Loader>
Totals evaluate(demo::Cnn& model, Loader& loader) {
  Totals t;
  ::torch::NoGradGuard no_grad;
  model->eval();
  for (auto& batch : *loader) {
    auto out = model(batch.data);
    t.loss += ::torch::nn::functional::nll_loss(
                  out, batch.target, ::torch::nn::functional::NLLLossFuncOptions().reduction(::torch::kSum))
                  .template item<double>();
    t.correct += out.argmax(1).eq(batch.target).sum().template item<double>();
    t.count += static_cast<double>(batch.data.size(0));
  }
  return t;
}

// The optimizer wrappers and comm hooks the flags ask for (--fp16, --powersgd, --zero, --local-sgd);
// sets steps.optimizer_step and steps.zero_grad.
struct Companions {
  std::unique_ptr<::torch::optim::Optimizer> sgd;  // without a wrapper
  std::unique_ptr<ddp::torch::ZeroRedundancyOptimizer> zero;
  std::unique_ptr<ddp::torch::PostLocalSGDOptimizer> local_sgd;
};

template <typename Model>
Companions use_companions(const Config& c, Model& model, const ddp::comm::ProcessGroupPtr& group,
                          std::unique_ptr<::torch::optim::Optimizer> sgd, Steps& steps) {
  Companions out;
  if (c.fp16) model->register_comm_hook(ddp::fp16_compress_hook());
  if (c.powersgd > 0) {
    ddp::PowerSGDOptions o;
    o.matrix_approximation_rank = c.powersgd;
    o.start_powersgd_iter = c.powersgd_start;
    o.random_normal = ddp::torch::torch_random_normal();
    model->register_comm_hook(ddp::powersgd_hook(std::make_shared<ddp::PowerSGDState>(o)));
  }
  if (c.local_sgd > 0) {
    model->register_comm_hook(ddp::post_local_sgd_hook(
        std::make_shared<ddp::PostLocalSGDState>(ddp::PostLocalSGDOptions{c.local_sgd_warmup, nullptr})));
    out.local_sgd = std::make_unique<ddp::torch::PostLocalSGDOptimizer>(
        std::move(sgd), ddp::torch::PeriodicModelAverager(c.local_sgd, c.local_sgd_warmup, group));
    steps.optimizer_step = [o = out.local_sgd.get()] { o->step(); };
    steps.zero_grad = [o = out.local_sgd.get()] { o->zero_grad(); };
  } else if (c.zero) {
    const double lr = c.lr, momentum = c.momentum;
    out.zero = std::make_unique<ddp::torch::ZeroRedundancyOptimizer>(
        model->module()->parameters(), group, [lr, momentum](std::vector<at::Tensor> shard) {
          return std::make_unique<::torch::optim::SGD>(shard,
                                                       ::torch::optim::SGDOptions(lr).momentum(momentum));
        });
    steps.optimizer_step = [o = out.zero.get()] { o->step(); };
    steps.zero_grad = [o = out.zero.get()] { o->zero_grad(); };
  } else {
    out.sgd = std::move(sgd);
    steps.optimizer_step = [o = out.sgd.get()] { o->step(); };
    steps.zero_grad = [o = out.sgd.get()] { o->zero_grad(); };
  }
  return out;
}

ddp::comm::ProcessGroupPtr init_group(const Config& c) {
  ddp::InitOptions init;
  init.backend = c.backend;
  if (ddp::ranks_from_env().world_size < 0) {  // no launcher: a world of one
    init.rank = 0;
    init.world_size = 1;
  }
  return ddp::init_process_group(init);
}

// Loads the newest checkpoint (before the model is wrapped: loading replaces the tensors'
// storage, and DDP registers where they live). No collective: a worker that joins a running
// job in place (--elastic-in-place) takes its state from the others' broadcast instead.
demo::Progress load_progress(const Config& c, int rank, int world, demo::Cnn& cnn,
                             ::torch::optim::Optimizer& opt) {
  const auto loaded = demo::load_newest_checkpoint(c.checkpoint, *cnn, opt);
  demo::Progress at;
  at.world_size = world;
  if (!loaded) return at;
  for (const auto& s : loaded->skipped)
    std::fprintf(stderr, "ddp-train-fashion-mnist: rank %d: skipped %s\n", rank, s.c_str());
  at = loaded->progress;
  if (rank == 0) {
    std::printf("resumed from %s: epoch %lld, step %lld of it (global step %lld, world %lld -> %d)\n",
                loaded->path.c_str(), static_cast<long long>(at.epoch), static_cast<long long>(at.epoch_step),
                static_cast<long long>(at.step), static_cast<long long>(at.world_size), world);
  }
  return at;
}

// load_progress, then a check that every rank found the same checkpoint.
demo::Progress resume(const Config& c, ddp::comm::ProcessGroup& group, demo::Cnn& cnn,
                      ::torch::optim::Optimizer& opt) {
  demo::Progress at = load_progress(c, group.rank(), group.size(), cnn, opt);
  std::vector<int64_t> steps(static_cast<size_t>(group.size()));
  group.all_gather(ddp::comm::view(&at.step, 1), ddp::comm::view(steps.data(), steps.size()))->wait();
  for (int r = 0; r < group.size(); ++r) {
    if (steps[r] != steps[0])
      DDP_THROW(InvalidArgument, "rank ", r, " resumes from step ", steps[r], " but rank 0 from step ",
                steps[0], ": every rank must see the same checkpoint directory (", c.checkpoint, ")");
  }
  return at;
}

// The epochs from steps.at on: training, then the test set scored, one line per epoch by rank 0.
template <typename Model>
void run_epochs(const Config& c, ddp::comm::ProcessGroup& group, Model& model, Steps& steps,
                FashionMnist train_set, FashionMnist test_set) {
  const int rank = group.rank(), world = group.size();
  const size_t train_size = *train_set.size(), test_size = *test_set.size();
  demo::Cnn& cnn = steps.cnn;
  auto train_batches = train_set.map(::torch::data::transforms::Stack<>());
  auto test_loader = ::torch::data::make_data_loader(test_set.map(::torch::data::transforms::Stack<>()),
                                                     ::torch::data::samplers::DistributedSequentialSampler(
                                                         test_size, world, rank, /*allow_duplicates=*/false),
                                                     ::torch::data::DataLoaderOptions(256));

  for (int epoch = static_cast<int>(steps.at.epoch); epoch <= c.epochs; ++epoch) {
    // A loader per epoch: the sampler's permutation is seeded by the epoch (the loader keeps
    // its own copy of the sampler). The data set copy shares its tensors.
    ::torch::data::samplers::DistributedRandomSampler sampler(train_size, world, rank);
    sampler.set_epoch(static_cast<size_t>(epoch));
    auto train_loader = ::torch::data::make_data_loader(train_batches, std::move(sampler),
                                                        ::torch::data::DataLoaderOptions(c.batch));
    auto start = std::chrono::steady_clock::now();
    Totals tr = sum_over_ranks(group, train_epoch(model, train_loader, steps));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Totals te = sum_over_ranks(group, evaluate(cnn, test_loader));
    if (rank == 0) {
      std::printf("epoch %d/%d  loss %.4f  test-loss %.4f  test-acc %.1f%%  samples/s %.0f  (%.1f s)\n",
                  epoch, c.epochs, tr.loss / tr.count, te.loss / te.count, 100 * te.correct / te.count,
                  tr.count / secs, secs);
      std::fflush(stdout);
    }
    steps.end_epoch();
  }
}

// --elastic-in-place: the same training through ddp::elastic::run (see the header comment).
int train_in_place(const Config& c, FashionMnist train_set, FashionMnist test_set) {
  ddp::elastic::SessionOptions so;
  so.backend = c.backend;
  ddp::elastic::Session session(so);
  ::torch::manual_seed(1 + session.rank());
  demo::Cnn cnn(ddp::comm::ProcessGroupPtr{});  // no --sync-bn group
  ::torch::optim::SGD opt(cnn->parameters(), ::torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  demo::Progress at = load_progress(c, session.rank(), session.world_size(), cnn, opt);
  ddp::torch::ElasticState state(*cnn, opt,
                                 {&at.step, &at.epoch, &at.epoch_step, &at.epoch_samples, &at.world_size});
  const bool first_attempt = ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount) == 0;
  ddp::EngineOptions options;
  options.gradient_as_bucket_view = c.bucket_view;
  std::optional<ddp::torch::DistributedDataParallel<demo::Cnn>> model;
  ddp::elastic::RunOptions ro;
  ro.on_group = [&](const ddp::comm::ProcessGroupPtr& g) {
    model.reset();  // its buckets belong to the old group
    model.emplace(cnn, g, options);
    std::printf("in place: pid %d round %d rank %d of %d\n", static_cast<int>(::getpid()), session.round(),
                g->rank(), g->size());
    std::fflush(stdout);
  };
  ddp::elastic::run(
      session, state,
      [&](const ddp::comm::ProcessGroupPtr& g) {
        // After the state's broadcast: every rank of the group says the same step and sum.
        double sum = 0;
        for (const auto& p : cnn->parameters()) sum += p.sum().item<double>();
        std::printf("in place: pid %d round %d from step %lld, parameter sum %.9g\n",
                    static_cast<int>(::getpid()), session.round(), static_cast<long long>(at.step), sum);
        std::fflush(stdout);
        Steps steps{c,
                    g->rank(),
                    g->size(),
                    cnn,
                    opt,
                    at,
                    first_attempt,
                    [&] { opt.step(); },
                    [&] { opt.zero_grad(); },
                    &state};
        run_epochs(c, *g, *model, steps, train_set, test_set);
      },
      ro);
  if (session.rank() == 0) {
    std::printf("finished in place: round %d, %d rank(s)\n", session.round(), session.world_size());
    std::fflush(stdout);
  }
  return 0;
}

int train(const Config& c) {
  if (c.threads > 0) ::torch::set_num_threads(c.threads);
  if (c.in_place) {
    return train_in_place(c,
                          FashionMnist(c.data_dir, FashionMnist::Split::kTrain,
                                       c.train_limit ? std::optional(c.train_limit) : std::nullopt),
                          FashionMnist(c.data_dir, FashionMnist::Split::kTest,
                                       c.test_limit ? std::optional(c.test_limit) : std::nullopt));
  }
  auto group = init_group(c);
  const int rank = group->rank(), world = group->size();
  auto train_set = FashionMnist(c.data_dir, FashionMnist::Split::kTrain,
                                c.train_limit ? std::optional(c.train_limit) : std::nullopt);
  auto test_set = FashionMnist(c.data_dir, FashionMnist::Split::kTest,
                               c.test_limit ? std::optional(c.test_limit) : std::nullopt);
  const size_t train_size = *train_set.size(), test_size = *test_set.size();

  ::torch::manual_seed(1 + rank);  // different on purpose: DDP starts every rank from rank 0's weights
  // SyncBatchNorm gets a group of its own: its backward all_reduce runs on autograd's thread
  // while DDP's bucket thread issues the gradient all_reduces on `group`.
  ddp::comm::ProcessGroupPtr bn_group;
  if (c.sync_bn) {
    std::vector<int> all(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
    bn_group = ddp::new_group(all);
  }
  demo::Cnn cnn(bn_group);
  auto sgd = std::make_unique<::torch::optim::SGD>(cnn->parameters(),
                                                   ::torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  ::torch::optim::Optimizer& opt = *sgd;
  const bool first_attempt = ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount) == 0;
  demo::Progress at = resume(c, *group, cnn, opt);
  Steps steps{c, rank, world, cnn, opt, at, first_attempt, {}, {}};
  ddp::EngineOptions options;
  options.gradient_as_bucket_view = c.bucket_view;
  ddp::torch::DistributedDataParallel model(cnn, group, options);
  const Companions companions = use_companions(c, model, group, std::move(sgd), steps);
  if (rank == 0) {
    size_t params = 0;
    for (const auto& p : cnn->parameters()) params += static_cast<size_t>(p.numel());
    std::printf(
        "ddp-train-fashion-mnist: %d rank(s), backend %s, CNN with %zu parameters, %zu train / %zu test "
        "images, batch %d/rank\n",
        world, group->backend_name().c_str(), params, train_size, test_size, c.batch);
    std::fflush(stdout);
  }

  run_epochs(c, *group, model, steps, train_set, test_set);
  ddp::destroy_process_group();
  return 0;
}

// --elastic-in-place re-forms the DDP wrapper only: what keeps a group or state of its own is refused.
bool in_place_fits(const Config& c) {
  if (c.in_place && (c.sync_bn || c.zero || c.fp16 || c.powersgd > 0 || c.local_sgd > 0)) {
    std::fprintf(
        stderr,
        "ddp-train-fashion-mnist: --elastic-in-place takes none of --sync-bn, --zero, --fp16, --powersgd, "
        "--local-sgd (their state is not re-formed in place)\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{
      "ddp-train-fashion-mnist: a CNN trained data-parallel on Fashion-MNIST (LibTorch + ddp::torch)"};
  app.add_option("--backend", c.backend, "tcp, gloo, mpi or nccl")->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "directory of the Fashion-MNIST IDX files (.gz or plain)")
      ->capture_default_str();
  app.add_option("--epochs", c.epochs, "passes over the training set")->capture_default_str();
  app.add_option("--batch", c.batch, "batch size per rank")->capture_default_str();
  app.add_option("--lr", c.lr, "SGD learning rate")->capture_default_str();
  app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  app.add_option(
      "--checkpoint", c.checkpoint,
      "directory of checkpoints: rank 0 saves there, every rank resumes from the newest (empty: none)");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "optimizer steps between checkpoints, besides one at each epoch's end (0: epochs only)")
      ->capture_default_str();
  app.add_option("--train-limit", c.train_limit, "use only the first N training images (0: all)")
      ->capture_default_str();
  app.add_option("--test-limit", c.test_limit, "use only the first N test images (0: all)")
      ->capture_default_str();
  app.add_option("--threads", c.threads, "LibTorch threads per rank (0: OMP_NUM_THREADS)")
      ->capture_default_str();
  app.add_flag("--bucket-view", c.bucket_view, "gradients live in the all_reduce buckets (no copies)");
  app.add_flag("--sync-bn", c.sync_bn,
               "batch norm over the whole group's batch (ddp::torch::SyncBatchNorm2d)");
  app.add_flag("--fp16", c.fp16, "gradients all_reduced in float16 (ddp::fp16_compress_hook)");
  app.add_option("--powersgd", c.powersgd,
                 "PowerSGD gradient compression of this rank (ddp::powersgd_hook; 0: plain averaging)")
      ->capture_default_str();
  app.add_option("--powersgd-start", c.powersgd_start, "plain iterations before PowerSGD starts")
      ->capture_default_str();
  app.add_flag("--zero", c.zero,
               "ZeRO: each rank keeps the SGD momentum of its shard of the parameters only");
  app.add_option(
         "--local-sgd", c.local_sgd,
         "local SGD: after the warm-up, gradients stay local and parameters are averaged every K steps "
         "(0: off)")
      ->capture_default_str();
  app.add_option("--local-sgd-warmup", c.local_sgd_warmup, "steps of ordinary DDP before local SGD")
      ->capture_default_str();
  app.add_flag(
      "--elastic-in-place", c.in_place,
      "recover in place when a node is lost or joins (ddp-launch --nnodes MIN:MAX; ddp/elastic/elastic.h)");
  app.add_option("--fail-at-step", c.fail_at_step,
                 "testing: the last rank exits after this global step in attempt 0");
  app.add_flag("--print-steps", c.print_steps,
               "benchmarks: one line per optimizer step with its time (bench/elastic.sh)");
  CLI11_PARSE(app, argc, argv);
  if (!in_place_fits(c)) return 2;
  if (c.zero && !c.checkpoint.empty()) {
    std::fprintf(stderr,
                 "ddp-train-fashion-mnist: --zero cannot be combined with --checkpoint (the optimizer state "
                 "is sharded)\n");
    return 2;
  }
  if (c.powersgd < 0 || c.local_sgd < 0 || c.local_sgd_warmup < 1 || c.powersgd_start < 2 ||
      (c.zero && c.local_sgd > 0) || (c.fp16 + (c.powersgd > 0) + (c.local_sgd > 0) > 1)) {
    std::fprintf(
        stderr,
        "ddp-train-fashion-mnist: --powersgd and --local-sgd must not be negative, --powersgd-start at "
        "least 2, --local-sgd-warmup at least 1; one of --fp16, --powersgd, --local-sgd (comm hooks); "
        "--local-sgd excludes --zero\n");
    return 2;
  }
  if (c.epochs < 1 || c.batch < 1 || c.lr <= 0 || c.checkpoint_every < 0) {
    std::fprintf(
        stderr,
        "ddp-train-fashion-mnist: epochs, batch and lr must be positive, --checkpoint-every not negative\n");
    return 2;
  }
  try {
    return train(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-train-fashion-mnist: error: %s\n", e.what());
    return 1;
  }
}
