// Mailbox: the socket engine's matching rule without sockets. Messages are "received" by
// copying bytes into wherever payload_target() points, as the engine's reader does.
#include "comm/tcp/mailbox.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;

namespace {

constexpr MailKey kA{0, 7};
constexpr MailKey kB{0, 8};
constexpr size_t kChunk = 4;  // small, so discards take several steps

struct Recv {
  std::string buf;
  WorkPtr work = std::make_shared<Work>();
  RecvOp op(const std::string& label, Clock::time_point deadline = Clock::now() + Millis(60'000)) {
    return RecvOp{buf.data(), buf.size(), deadline, work, label};
  }
  explicit Recv(size_t n) : buf(n, '.') {}
};

// The whole of one message, header then payload, in steps of at most kChunk bytes.
void deliver(Mailbox& box, const MailKey& key, const std::string& payload, Completions& done) {
  REQUIRE(box.arrive(key, payload.size(), done).empty());
  size_t at = 0;
  while (box.receiving()) {
    Mailbox::Target t = box.payload_target(kChunk);
    size_t n = std::min({t.room, kChunk, payload.size() - at});
    if (t.data != nullptr) std::memcpy(t.data, payload.data() + at, n);
    at += n;
    if (box.received(n)) box.complete(done);
  }
}

// The Work's outcome once `done` is finished: "" or the error's message.
std::string outcome(const WorkPtr& work, Completions& done) {
  for (auto& [w, err] : done) {
    if (w) w->finish(err);
  }
  done.clear();
  if (!work->is_completed()) return "pending";
  try {
    work->wait();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("a recv posted first takes the message straight into its buffer") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  Recv r(5);
  CHECK(box.post(kA, r.op("recv a"), done) == Mailbox::Posted::kQueued);
  deliver(box, kA, "hello", done);
  CHECK(outcome(r.work, done) == "");
  CHECK(r.buf == "hello");
  CHECK(box.unexpected_bytes() == 0);
}

TEST_CASE("a message that comes first is buffered, counted, and handed to the next recv of its key") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  deliver(box, kA, "early", done);
  CHECK(box.has_unexpected(kA));
  CHECK_FALSE(box.has_unexpected(kB));
  CHECK(box.unexpected_bytes() == 5);
  Recv r(5);
  CHECK(box.post(kA, r.op("recv a"), done) == Mailbox::Posted::kFinished);
  CHECK(outcome(r.work, done) == "");
  CHECK(r.buf == "early");
  CHECK(box.unexpected_bytes() == 0);
  CHECK_FALSE(box.has_unexpected(kA));
}

TEST_CASE("first arrived, first taken; tags do not cross") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  deliver(box, kA, "one", done);
  deliver(box, kB, "bee", done);
  deliver(box, kA, "two", done);
  Recv a1(3), b(3), a2(3);
  box.post(kA, a1.op("a1"), done);
  box.post(kB, b.op("b"), done);
  box.post(kA, a2.op("a2"), done);
  CHECK(outcome(a1.work, done) == "");
  CHECK(a1.buf == "one");
  CHECK(b.buf == "bee");
  CHECK(a2.buf == "two");
}

TEST_CASE("a recv that finds its message arriving waits on it; the next queues and takes the next message") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  REQUIRE(box.arrive(kA, 4, done).empty());  // the header is in, the payload not yet
  Recv first(4), second(4);
  CHECK(box.post(kA, first.op("first"), done) == Mailbox::Posted::kWaiting);
  CHECK(box.post(kA, second.op("second"), done) == Mailbox::Posted::kQueued);
  Mailbox::Target t = box.payload_target(kChunk);
  REQUIRE(t.data != nullptr);  // into the buffered message
  std::memcpy(t.data, "abcd", 4);
  REQUIRE(box.received(4));
  box.complete(done);
  CHECK(outcome(first.work, done) == "");
  CHECK(first.buf == "abcd");
  CHECK(outcome(second.work, done) == "pending");
  deliver(box, kA, "efgh", done);
  CHECK(outcome(second.work, done) == "");
  CHECK(second.buf == "efgh");
}

TEST_CASE("sizes must agree: the recv fails naming both sizes and the peer; the message is consumed") {
  Mailbox box("rank 1 (pid 42)", 1 << 20);
  Completions done;
  Recv posted(2);
  box.post(kA, posted.op("recv posted"), done);
  deliver(box, kA, "toolong", done);  // discarded
  CHECK(outcome(posted.work, done)
            .find("recv posted: the message from rank 1 (pid 42) holds 7 bytes but the buffer "
                  "holds 2") != std::string::npos);
  CHECK(posted.buf == "..");
  CHECK_FALSE(box.has_unexpected(kA));
  deliver(box, kA, "abc", done);
  Recv late(5);
  box.post(kA, late.op("recv late"), done);
  CHECK(outcome(late.work, done).find("holds 3 bytes but the buffer holds 5") != std::string::npos);
  CHECK_FALSE(box.has_unexpected(kA));
  CHECK(box.unexpected_bytes() == 0);
}

TEST_CASE("a waiter whose buffer differs from the message fails instead of overflowing") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  REQUIRE(box.arrive(kA, 6, done).empty());
  Recv small(2);
  CHECK(box.post(kA, small.op("small"), done) == Mailbox::Posted::kWaiting);
  Mailbox::Target t = box.payload_target(kChunk);
  std::memcpy(t.data, "abcdef", 6);
  REQUIRE(box.received(6));
  box.complete(done);
  CHECK(outcome(small.work, done).find("holds 6 bytes but the buffer holds 2") != std::string::npos);
  CHECK(small.buf == "..");
}

TEST_CASE("a zero-byte message completes with its header") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  Recv r(0);
  box.post(kA, r.op("empty"), done);
  REQUIRE(box.arrive(kA, 0, done).empty());
  CHECK_FALSE(box.receiving());
  CHECK(outcome(r.work, done) == "");
  REQUIRE(box.arrive(kB, 0, done).empty());
  CHECK(box.has_unexpected(kB));
}

TEST_CASE("buffering past the limit is refused before anything is allocated") {
  Mailbox box("rank 1", 8);
  Completions done;
  deliver(box, kA, "12345", done);
  CHECK_FALSE(box.arrive(kA, 4, done).empty());
  CHECK(box.unexpected_bytes() == 5);
  CHECK_FALSE(box.receiving());
  Recv r(4);  // a posted recv is not buffering: any size goes
  box.post(kB, r.op("posted"), done);
  CHECK(box.arrive(kB, 4, done).empty());
}

TEST_CASE(
    "expire ends posted recvs, waiters and the recv being filled, naming the peer; the rest is discarded") {
  Mailbox box("rank 3", 1 << 20);
  Completions done;
  const auto past = Clock::now() - Millis(1);
  Recv posted(1), active(8), waiter(2), alive(1);
  box.post(kB, posted.op("posted", past), done);
  box.post(kA, active.op("active", past), done);
  box.post(kB, alive.op("alive"), done);
  REQUIRE(box.arrive(kA, 8, done).empty());  // into `active`
  box.expire(Clock::now(), done);
  CHECK(outcome(posted.work, done).find("posted: timed out waiting for a message from rank 3") !=
        std::string::npos);
  CHECK(outcome(active.work, done).find("active: timed out receiving from rank 3") != std::string::npos);
  CHECK(box.payload_target(kChunk).data == nullptr);  // the rest of the payload is discarded
  REQUIRE(box.received(8));
  box.complete(done);
  CHECK(active.buf == "........");
  REQUIRE(box.arrive(kA, 2, done).empty());
  box.post(kA, waiter.op("waiter", past), done);
  box.expire(Clock::now(), done);
  CHECK(outcome(waiter.work, done).find("waiter: timed out receiving from rank 3") != std::string::npos);
  CHECK(outcome(alive.work, done) == "pending");
}

TEST_CASE(
    "when a waiter expires, the recv queued behind it takes the message (first posted, first matched)") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  REQUIRE(box.arrive(kA, 2, done).empty());
  Recv gone(2), next(2);
  box.post(kA, gone.op("gone", Clock::now() - Millis(1)), done);
  box.post(kA, next.op("next"), done);
  box.expire(Clock::now(), done);
  Mailbox::Target t = box.payload_target(kChunk);
  std::memcpy(t.data, "hi", 2);
  REQUIRE(box.received(2));
  box.complete(done);
  CHECK(outcome(next.work, done) == "");
  CHECK(next.buf == "hi");
}

TEST_CASE("fail ends every waiting recv with the caller's error; messages that came first still match") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  deliver(box, kB, "kept", done);
  Recv posted(1), active(4);
  box.post(kA, posted.op("posted"), done);
  box.post(kA, active.op("active"), done);
  REQUIRE(box.arrive(kA, 1, done).empty());  // `posted` is being filled
  box.fail(
      [](const std::string& label) {
        return std::make_exception_ptr(NetworkError(label + ": lost", "f", 1));
      },
      done);
  CHECK(outcome(posted.work, done).find("posted: lost") != std::string::npos);
  CHECK(outcome(active.work, done).find("active: lost") != std::string::npos);
  Recv later(4);
  CHECK(box.post(kB, later.op("later"), done) == Mailbox::Posted::kFinished);
  CHECK(outcome(later.work, done) == "");
  CHECK(later.buf == "kept");
}

TEST_CASE("next_deadline is the earliest of every waiting recv, bounded") {
  Mailbox box("rank 1", 1 << 20);
  Completions done;
  const auto now = Clock::now();
  const auto bound = now + Millis(1000);
  CHECK(box.next_deadline(bound) == bound);
  Recv a(1), b(1);
  box.post(kA, a.op("a", now + Millis(500)), done);
  box.post(kB, b.op("b", now + Millis(200)), done);
  CHECK(box.next_deadline(bound) == now + Millis(200));
}
