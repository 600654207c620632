// C10dStore: our Store contract over PyTorch's own stores (c10d::HashStore, c10d::FileStore,
// and a c10d::PrefixStore, which torch.distributed hands every backend).
#include <doctest/doctest.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "ddp/torch/python/c10d_store.h"

using ddp::Millis;
using ddp::rdzv::Bytes;
using ddp::torch::C10dStore;

namespace {

c10::intrusive_ptr<c10d::Store> torch_hash_store() {
  auto s = c10::make_intrusive<c10d::HashStore>();
  s->setTimeout(std::chrono::seconds(30));
  return s;
}

void exercise(ddp::rdzv::Store& store) {
  store.set("a", std::string("one"));
  CHECK(store.get_string("a") == "one");
  CHECK(store.add("n", 2) == 2);
  CHECK(store.add("n", 3) == 5);
  CHECK(store.check({"a", "n"}));
  CHECK_FALSE(store.check({"a", "missing"}));
  CHECK(C10dStore::to_string(
            store.compare_set("a", C10dStore::to_bytes("one"), C10dStore::to_bytes("two"))) == "two");
  CHECK(C10dStore::to_string(
            store.compare_set("a", C10dStore::to_bytes("xxx"), C10dStore::to_bytes("three"))) == "two");
  CHECK(store.delete_key("a"));
  CHECK_FALSE(store.check({"a"}));
}

}  // namespace

TEST_CASE("set, get, add, compare_set, check and delete_key reach the PyTorch store") {
  auto torch_store = torch_hash_store();
  C10dStore store(torch_store);
  exercise(store);
  CHECK(torch_store->add("n", 0) == 5);  // the same data, seen from PyTorch's side
}

TEST_CASE("get and wait block until another client sets the key") {
  auto torch_store = torch_hash_store();
  C10dStore store(torch_store);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    torch_store->set("late", std::vector<uint8_t>{'x'});
  });
  CHECK(store.get("late", Millis(10'000)) == Bytes{'x'});
  setter.join();
}

TEST_CASE("a wait that expires is our TimeoutError naming the missing key") {
  C10dStore store(torch_hash_store());
  store.set("here", std::string("1"));
  try {
    store.wait({"here", "never"}, Millis(200));
    FAIL("no timeout");
  } catch (const ddp::TimeoutError& e) {
    const std::string what = e.what();
    CHECK(what.find("never") != std::string::npos);
    CHECK(what.find("here") == std::string::npos);
  }
  CHECK_THROWS_AS(store.get("never", Millis(100)), ddp::TimeoutError);
}

TEST_CASE("a FileStore under a PrefixStore, as torch.distributed passes it, works the same") {
  char tmpl[] = "/tmp/ddp-c10d-store-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  REQUIRE(dir != nullptr);
  const std::string path = std::string(dir) + "/store";
  {
    auto file = c10::make_intrusive<c10d::FileStore>(path, 1);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("0", file);
    C10dStore store(prefixed);
    exercise(store);
    CHECK(file->check({"0/n"}));
  }
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("a null store is an InvalidArgument") {
  CHECK_THROWS_AS(C10dStore(c10::intrusive_ptr<c10d::Store>()), ddp::InvalidArgument);
}
