#include "comm/tcp/shm_links.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>

#include "comm/tcp/shm_region.h"
#include "comm/tcp/shm_segment.h"
#include "common/error.h"
#include "rendezvous/prefix_store.h"

namespace ddp::comm::tcp {
namespace {

constexpr size_t kHeader = 16;  // a message's header, and the unit its payload is padded to

struct Header {
  uint64_t bytes;
  uint32_t step;
  uint32_t unused;
};
static_assert(sizeof(Header) == kHeader);

size_t padded(size_t bytes) { return (bytes + kHeader - 1) / kHeader * kHeader; }

std::exception_ptr size_mismatch(const std::string& label, int peer, size_t sent, size_t wanted) {
  const std::string what = detail::str(label, ": rank ", peer, " sent ", sent, " bytes for a receive of ",
                                       wanted, " (shared memory)");
  return std::make_exception_ptr(InvalidArgument(what, __FILE__, __LINE__));
}

// Copies `n` bytes out of or into a ring of `size` bytes at stream offset `at` (two pieces
// where it wraps).
void ring_read(const char* ring, size_t size, uint64_t at, char* to, size_t n) {
  const size_t off = at % size, first = std::min(n, size - off);
  std::memcpy(to, ring + off, first);
  std::memcpy(to + first, ring, n - first);
}
void ring_write(char* ring, size_t size, uint64_t at, const char* from, size_t n) {
  const size_t off = at % size, first = std::min(n, size - off);
  std::memcpy(ring + off, from, first);
  std::memcpy(ring, from + first, n - first);
}

}  // namespace

// A rank's bell, first in its region: a peer that wrote into its FIFO to the rank, or read from
// the rank's FIFO to it, rings it where the rank sleeps (waiters > 0).
struct ShmLinks::Bell {
  alignas(64) std::atomic<uint32_t> word;
  std::atomic<uint32_t> waiters;
};

// The counters of one FIFO, each on its own cache line: `written` by the sender, `read` by the
// receiver.
struct ShmLinks::Fifo {
  alignas(64) std::atomic<uint64_t> written;
  alignas(64) std::atomic<uint64_t> read;
};

ShmLinks::ShmLinks(const std::shared_ptr<rdzv::Store>& store, Options options, GroupHealth* health)
    : o_(options), health_(health), peers_(static_cast<size_t>(options.world)) {
  DDP_CHECK(o_.fifo_bytes % kHeader == 0 && o_.fifo_bytes >= 4 * kHeader, "ShmLinks: FIFO of ", o_.fifo_bytes,
            " bytes");
  auto prefixed = std::make_shared<rdzv::PrefixStore>("tcp/links/", store);
  const auto w = static_cast<size_t>(o_.world);
  ShmRegion::Setup s{.store = prefixed.get(),
                     .rank = o_.rank,
                     .world = o_.world,
                     .id = 0,
                     .bytes = sizeof(Bell) + w * sizeof(Fifo) + w * o_.fifo_bytes,
                     .timeout = o_.timeout};
  region_ = ShmRegion::create(s);  // zeroed: every counter starts at 0
}

ShmLinks::~ShmLinks() = default;

ShmLinks::Bell& ShmLinks::bell(int rank) const { return *reinterpret_cast<Bell*>(region_->base(rank)); }

ShmLinks::Fifo& ShmLinks::fifo(int from, int to) const {
  return reinterpret_cast<Fifo*>(region_->base(from) + sizeof(Bell))[to];
}

char* ShmLinks::fifo_data(int from, int to) const {
  const auto w = static_cast<size_t>(o_.world);
  return region_->base(from) + sizeof(Bell) + w * sizeof(Fifo) + static_cast<size_t>(to) * o_.fifo_bytes;
}

void ShmLinks::ring_bell(int peer) const {
  Bell& b = bell(peer);
  if (b.waiters.load(std::memory_order_seq_cst) > 0) futex_wake_all(b.word);
}

void ShmLinks::send(Batch& b, int peer, int step, const void* data, size_t bytes, const OpContext& ctx) {
  auto work = std::make_shared<Work>(ctx.label());
  peers_[static_cast<size_t>(peer)].out.push_back({static_cast<const char*>(data), bytes, step, 0, work});
  b.works.emplace_back(std::move(work), peer);
}

void ShmLinks::recv(Batch& b, int peer, int step, void* data, size_t bytes, const OpContext& ctx) {
  auto work = std::make_shared<Work>(ctx.label());
  Peer& p = peers_[static_cast<size_t>(peer)];
  b.works.emplace_back(work, peer);
  auto early = p.early.find(step);
  if (early == p.early.end() || early->second.empty()) {
    p.in.push_back({static_cast<char*>(data), bytes, step, std::move(work)});
    return;
  }
  Early& e = early->second.front();
  if (e.bytes.size() != bytes) {
    work->finish(size_mismatch(ctx.label(), peer, e.bytes.size(), bytes));
  } else if (e.complete) {
    if (bytes > 0) std::memcpy(data, e.bytes.data(), bytes);  // an empty message's data may be null
    work->finish();
  } else {  // still arriving: the receive takes it over, with what came so far
    if (p.arrival.done > 0) std::memcpy(data, e.bytes.data(), std::min(bytes, p.arrival.done));
    p.arrival.into = p.in.insert(p.in.end(), {static_cast<char*>(data), bytes, step, std::move(work), true});
    p.arrival.early = nullptr;
  }
  early->second.pop_front();
}

bool ShmLinks::push(int peer, Peer& p) {
  Fifo& f = fifo(o_.rank, peer);
  char* ring = fifo_data(o_.rank, peer);
  bool moved = false;
  while (!p.out.empty()) {
    Outgoing& m = p.out.front();
    const size_t room =
        o_.fifo_bytes - static_cast<size_t>(p.written - f.read.load(std::memory_order_acquire));
    if (m.done == 0) {
      if (room < kHeader) break;
      const Header h{m.bytes, static_cast<uint32_t>(m.step), 0};
      ring_write(ring, o_.fifo_bytes, p.written, reinterpret_cast<const char*>(&h), kHeader);
      p.written += kHeader;
      m.done = kHeader;
      moved = true;
      continue;
    }
    const size_t left = padded(m.bytes) - (m.done - kHeader);
    const size_t n = std::min(left, room);
    if (n == 0 && left > 0) break;
    const size_t payload = m.done - kHeader;  // bytes of the padded payload written so far
    if (payload < m.bytes) {
      ring_write(ring, o_.fifo_bytes, p.written, m.data + payload, std::min(n, m.bytes - payload));
    }
    p.written += n;
    m.done += n;
    moved = true;
    if (n < left) break;
    f.written.store(p.written, std::memory_order_release);
    m.work->finish();
    p.out.pop_front();
  }
  if (moved) {
    f.written.store(p.written, std::memory_order_seq_cst);  // before ring_bell() reads the waiters
    ring_bell(peer);
  }
  return moved;
}

void ShmLinks::open_arrival(int peer, Peer& p, uint64_t bytes, uint32_t step) {
  Arrival& a = p.arrival;
  a = Arrival{};
  a.open = true;
  a.bytes = bytes;
  a.step = step;
  for (auto it = p.in.begin(); it != p.in.end(); ++it) {
    if (it->matched || it->step != static_cast<int>(step)) continue;
    it->matched = true;
    if (it->bytes == bytes) {
      a.into = it;
      return;
    }
    it->work->finish(size_mismatch(it->work->description(), peer, bytes, it->bytes));
    p.in.erase(it);
    p.dropped.bytes.resize(bytes);
    a.early = &p.dropped;
    return;
  }
  // No receive yet: kept aside.
  EarlyQueue& q = p.early[static_cast<int>(step)];
  q.push_back({std::vector<char>(bytes), false});
  a.early = &q.back();
}

void ShmLinks::take(Peer& p, const char* from, size_t n) {
  Arrival& a = p.arrival;
  char* to = a.early != nullptr ? a.early->bytes.data() : a.into->data;
  std::memcpy(to + a.done, from, n);
}

void ShmLinks::end_arrival(Peer& p) {
  Arrival& a = p.arrival;
  if (a.early != nullptr) {
    a.early->complete = true;
  } else {
    a.into->work->finish();
    p.in.erase(a.into);
  }
  a = Arrival{};
}

bool ShmLinks::pull(int peer, Peer& p) {
  Fifo& f = fifo(peer, o_.rank);
  const char* ring = fifo_data(peer, o_.rank);
  const uint64_t written = f.written.load(std::memory_order_acquire);
  bool moved = false;
  while (p.read < written) {
    Arrival& a = p.arrival;
    if (!a.open) {
      Header h{};
      ring_read(ring, o_.fifo_bytes, p.read, reinterpret_cast<char*>(&h), kHeader);
      p.read += kHeader;
      open_arrival(peer, p, h.bytes, h.step);
      moved = true;
      if (h.bytes == 0) end_arrival(p);
      continue;
    }
    const size_t n = std::min<size_t>(padded(a.bytes) - a.done, written - p.read);
    if (a.done < a.bytes) {
      const size_t useful = std::min<size_t>(n, a.bytes - a.done);
      const size_t off = p.read % o_.fifo_bytes, first = std::min(useful, o_.fifo_bytes - off);
      take(p, ring + off, first);
      a.done += first;
      if (useful > first) {
        take(p, ring, useful - first);
        a.done += useful - first;
      }
      a.done += n - useful;  // padding
    } else {
      a.done += n;
    }
    p.read += n;
    moved = true;
    if (a.done == padded(a.bytes)) end_arrival(p);
  }
  if (moved) {
    f.read.store(p.read, std::memory_order_seq_cst);
    ring_bell(peer);
  }
  return moved;
}

bool ShmLinks::progress() {
  bool moved = false;
  for (int q = 0; q < o_.world; ++q) {
    if (q == o_.rank) continue;
    Peer& p = peers_[static_cast<size_t>(q)];
    if (!p.out.empty()) moved |= push(q, p);
    moved |= pull(q, p);
  }
  return moved;
}

void ShmLinks::await(Work& work, const OpContext& ctx) {
  const auto start = Clock::now();
  const auto spin_end = start + std::chrono::microseconds(o_.spin_us);
  const auto yield_end = spin_end + std::chrono::microseconds(o_.yield_us);
  for (unsigned i = 0; !work.is_completed(); ++i) {
    const bool moved = progress();
    if ((also_ != nullptr && also_->progress()) || moved) continue;
    if ((i & 63) != 0) {
      _mm_pause();
      continue;
    }
    const auto now = Clock::now();
    if (health_->broken() || ctx.deadline.expired()) {
      clear();
      health_->check(ctx.label());
      return;
    }
    if (now < spin_end) continue;
    if (now < yield_end) {
      sched_yield();
    } else {
      doze(work);
    }
  }
}

bool ShmLinks::idle() const {
  return std::all_of(peers_.begin(), peers_.end(),
                     [](const Peer& p) { return p.out.empty() && p.in.empty() && !p.arrival.open; });
}

void ShmLinks::doze(Work& work) {
  if (idle() && (also_ == nullptr || !also_->moved_by_caller())) {
    // Nothing of ours is pending: `work` is another transport's (sockets, whose thread
    // completes it and wakes this one). Its error, if any, is the caller's to rethrow.
    try {
      work.wait();
    } catch (...) {
    }
    return;
  }
  Bell& b = bell(o_.rank);
  b.waiters.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = b.word.load(std::memory_order_seq_cst);
  // Looked at once more after registering: a peer's move from before is seen here, a later one
  // rings. Another transport's messages do not ring: a short slice while it has some.
  if (!progress() && !work.is_completed()) {
    futex_sleep(b.word, seen, std::chrono::microseconds(also_ != nullptr ? 50 : 1000));
  }
  b.waiters.fetch_sub(1, std::memory_order_seq_cst);
}

// A message's own error (sizes differ) leaves the others as they are; a lost peer, the
// deadline or another transport's error (routed_links.h) leaves nothing.
void ShmLinks::wait_one(Batch& b, size_t k, const OpContext& ctx) {
  auto& [work, peer] = b.works[k];
  await(*work, ctx);
  if (!work->is_completed()) {
    DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(), " ms waiting for rank ",
              peer);
  }
  try {
    work->wait();  // its error, if it failed
  } catch (const InvalidArgument&) {
    throw;
  } catch (...) {
    clear();
    throw;
  }
}

void ShmLinks::wait(Batch& b, const OpContext& ctx) {
  for (size_t k = 0; k < b.works.size(); ++k) {
    try {
      wait_one(b, k, ctx);
    } catch (const TimeoutError&) {
      std::set<int> late;
      for (auto& [work, peer] : b.works) {
        if (!work->is_completed()) late.insert(peer);
      }
      std::string ranks;
      for (int p : late) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
      b.works.clear();
      DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(),
                " ms waiting for ranks [", ranks, "]");
    }
  }
  b.works.clear();
}

void ShmLinks::clear() noexcept {
  for (Peer& p : peers_) {
    p.out.clear();
    p.in.clear();
    p.early.clear();
    p.arrival = Arrival{};
  }
}

}  // namespace ddp::comm::tcp
