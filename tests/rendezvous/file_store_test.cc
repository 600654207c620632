// FileStore specifics: crash safety of the log (torn tails), the file header, and real
// processes sharing one file, one of them SIGKILLed mid-write.
// The Store semantics are in store_test.cc (conformance).
#include "rendezvous/file_store.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>

#include "common/error.h"
#include "process.h"
#include "store_fixtures.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::testing;

namespace {

constexpr Millis kLong{30'000};

uint64_t size_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<uint64_t>(st.st_size);
}

void append_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

}  // namespace

TEST_CASE("a file that is not a FileStore is refused, never overwritten") {
  TempDir dir;
  std::string path = dir.file("precious.txt");
  append_raw(path, "important user data\n");
  CHECK_THROWS_AS(FileStore{path}, InvalidArgument);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "important user data");
  CHECK_THROWS_AS(FileStore{dir.file("no/such/dir/store")}, SystemError);
}

TEST_CASE("a torn header (creator killed while writing it) is repaired") {
  TempDir dir;
  std::string path = dir.file("store");
  append_raw(path, "DDP-FILE");  // a prefix of the header
  FileStore s(path);
  s.set("k", "v");
  FileStore t(path);
  CHECK(t.get_string("k", kLong) == "v");
}

TEST_CASE("a torn tail is ignored by readers and cut by the next writer") {
  TempDir dir;
  std::string path = dir.file("store");
  {
    FileStore s(path);
    s.set("a", "1");
    s.set("b", "2");
  }
  uint64_t good = size_of(path);
  // A record cut short: valid magic and lengths, missing body and checksum.
  append_raw(path, std::string("DDRL\x01\x01\x00\x00\x00\x05\x00\x00\x00"
                               "c12",
                               16));
  FileStore reader(path);
  CHECK(reader.get_string("a", kLong) == "1");
  CHECK_FALSE(reader.check({"c"}));
  CHECK(reader.num_keys() == 2);
  FileStore writer(path);
  writer.set("c", "3");
  CHECK(reader.get_string("c", kLong) == "3");  // reachable: the torn bytes were cut
  FileStore fresh(path);
  CHECK(fresh.num_keys() == 3);
  CHECK(size_of(path) > good);
  // A torn record with a bad checksum (garbage in place of the sum) is equally ignored.
  append_raw(path, std::string("DDRL\x01\x01\x00\x00\x00\x01\x00\x00\x00"
                               "dX"
                               "garbage!",
                               23));
  FileStore again(path);
  CHECK_FALSE(again.check({"d"}));
  again.add("n", 5);
  CHECK(FileStore(path).add("n", 1) == 6);
}

TEST_CASE("multi-process: adds from many processes are exact") {
  TempDir dir;
  std::string path = dir.file("store");
  FileStore parent(path);
  constexpr int kProcs = 4;
  constexpr int kAdds = 100;
  std::vector<std::unique_ptr<Child>> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(std::make_unique<Child>([&path] {
      FileStore s(path);
      for (int i = 0; i < kAdds; ++i) s.add("count", 1);
      s.add("done", 1);
      s.wait({"release"}, kLong);  // woken through the file watch
      return s.get_string("release", kLong) == "go" ? 0 : 1;
    }));
  }
  while (parent.add("done", 0) < kProcs) parent.wait({"done"}, kLong);
  CHECK(parent.add("count", 0) == kProcs * kAdds);
  parent.set("release", "go");
  for (auto& k : kids) CHECK(k->wait() == 0);
}

TEST_CASE("multi-process: a writer SIGKILLed mid-write never corrupts the store") {
  TempDir dir;
  std::string path = dir.file("store");
  FileStore parent(path);
  // The victim writes large values (each a single byte repeated) so a kill lands mid-write.
  Child victim([&path] {
    FileStore s(path);
    for (uint8_t i = 1;; ++i) {
      s.set("big", Bytes(8 << 20, i == 0 ? 1 : i));
      s.add("writes", 1);
    }
    return 0;
  });
  Child survivor([&path] {
    FileStore s(path);
    s.wait({"writes"}, kLong);
    for (int i = 0; i < 200; ++i) s.add("survivor", 1);
    s.wait({"victim_dead"}, kLong);
    return s.add("survivor", 0) == 200 ? 0 : 1;
  });
  while (parent.add("writes", 0) < 3) parent.wait({"writes"}, kLong);
  victim.kill(SIGKILL);
  CHECK(victim.wait() == 128 + SIGKILL);
  parent.set("victim_dead", "yes");
  CHECK(survivor.wait() == 0);
  // Every value read back is one the victim completed: all bytes equal.
  FileStore fresh(path);
  Bytes big = fresh.get("big", kLong);
  REQUIRE(big.size() == (8u << 20));
  CHECK(std::count(big.begin(), big.end(), big[0]) == static_cast<long>(big.size()));
  fresh.set("after", "crash");
  CHECK(parent.get_string("after", kLong) == "crash");
  CHECK(FileStore(path).add("survivor", 0) == 200);
}
