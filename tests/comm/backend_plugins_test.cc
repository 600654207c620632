// The shared libddp's registry (comm/backend_plugins.cc): linked against libddp.so, as a
// program would be, so tcp is built in and the other backends load as plugins from beside it.
#include "comm/backend.h"

#include <doctest/doctest.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;

namespace {

GroupSetup world_of_one() {
  GroupSetup s;
  s.store = std::make_shared<rdzv::HashStore>();
  return s;
}

bool listed(const std::string& backend) {
  const auto all = available_backends();
  return std::find(all.begin(), all.end(), backend) != all.end();
}

bool gpu_present() {
  return ::getenv("CUDA_VISIBLE_DEVICES") != nullptr || std::ifstream("/dev/nvidia0").good();
}

bool mapped(const std::string& lib) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(lib) != std::string::npos) return true;
  }
  return false;
}

// How many loaded objects are `lib` (dlopen of a loaded file must not map it again).
int loaded_copies(const std::string& lib) {
  struct Count {
    const std::string* lib;
    int n;
  } count{&lib, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Count*>(data);
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.size() >= c->lib->size() &&
            name.compare(name.size() - c->lib->size(), c->lib->size(), *c->lib) == 0)
          ++c->n;
        return 0;
      },
      &count);
  return count.n;
}

}  // namespace

TEST_CASE("tcp is built in; listing the plugins loads none of them") {
  CHECK(available_backends().front() == "tcp");
  auto g = create_group("tcp", world_of_one());
  CHECK(g->backend_name() == "tcp");
  CHECK_FALSE(mapped("libddp_backend_"));
}

TEST_CASE("tcp groups load CUDA only for a CUDA buffer: host buffers never load the nccl plugin") {
  auto g = create_group("tcp", world_of_one());
  std::vector<float> x{2.0f};
  g->all_reduce(view(x.data(), 1))->wait();
  CHECK(x[0] == 2.0f);
  CHECK_FALSE(mapped("libddp_backend_nccl"));
}

// Without a GPU a CUDA buffer is an error (from the staging, or its plugin missing), never a
// crash. Its own ctest, Skipped where a GPU is visible (the gpu tests cover CUDA buffers there).
TEST_CASE("tcp groups without a GPU: a CUDA buffer is an error, and the group goes on" *
          doctest::skip(gpu_present())) {
  auto g = create_group("tcp", world_of_one());
  std::vector<float> x{2.0f};
  float fake = 0;
  Buffer on_gpu{&fake, 1, DType::kFloat32, Device{DeviceType::kCuda, 0}};
  CHECK_THROWS_AS(g->all_reduce(on_gpu)->wait(), ddp::Error);
  g->all_reduce(view(x.data(), 1))->wait();  // the group still works for host buffers
  CHECK(x[0] == 2.0f);
}

// Through the API only: the registry's own functions (comm/backend_plugin.h) are not exported.
TEST_CASE("a built plugin loads on first use, once, and makes a working group") {
  for (const std::string b : {"gloo", "mpi"}) {
    if (!listed(b)) continue;
    CAPTURE(b);
    const std::string file = "libddp_backend_" + b + ".so";
    auto g = create_group(b, world_of_one());
    CHECK(g->backend_name() == b);
    CHECK(mapped(file));
    auto again = create_group(b, world_of_one());
    CHECK(loaded_copies(file) == 1);
    std::vector<float> x{3.0f};
    g->all_reduce(view(x.data(), 1))->wait();
    CHECK(x[0] == 3.0f);
  }
}

// A listed backend whose plugin file is gone is an error naming the file: install_test moves
// each installed plugin away and checks that.
TEST_CASE("unknown backends are errors naming what is missing") {
  CHECK_THROWS_WITH_AS(create_group("carrier-pigeon", world_of_one()), doctest::Contains("unknown"),
                       InvalidArgument);
  GroupSetup no_store;
  CHECK_THROWS_AS(create_group("tcp", no_store), InvalidArgument);
}
