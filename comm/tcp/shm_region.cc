#include "comm/tcp/shm_region.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "common/shm_names.h"
#include "rendezvous/store.h"

namespace ddp::comm::tcp {
namespace {

std::string key(uint64_t id, const char* what, int rank) {
  return detail::str("tcp/region/", id, "/", what, "/", rank);
}

// Waits for `what` of every rank; a TimeoutError names the ranks that never came.
void wait_all(rdzv::Store& store, const ShmRegion::Setup& s, const char* what) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(s.world));
  for (int r = 0; r < s.world; ++r) keys.push_back(key(s.id, what, r));
  try {
    store.wait(keys, s.timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < s.world; ++r) {
      if (!store.check({keys[static_cast<size_t>(r)]}))
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    DDP_THROW(TimeoutError, "allocate(", s.bytes, " bytes, group memory #", s.id, "): ranks [", missing,
              "] did not allocate within ", s.timeout.count(),
              " ms (every rank must call allocate, in the same order)");
  }
}

// Group memory takes at most half of what /dev/shm has free (the group's ranks together): the
// rest stays for the segments of groups made later, which would otherwise run over sockets.
void leave_room(const ShmRegion::Setup& s) {
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return;  // no such file system: shm_open will say
  const auto free_bytes = static_cast<unsigned long long>(st.f_bavail) * st.f_frsize;
  const auto want = static_cast<unsigned long long>(s.bytes) * static_cast<unsigned long long>(s.world);
  if (want > free_bytes / 2) {
    DDP_THROW(BackendError, "group memory of ", s.bytes, " bytes for each of ", s.world,
              " ranks would take more than half of the ", free_bytes, " bytes free in /dev/shm");
  }
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What a rank published: "<bytes> <name>", or "<bytes> - <why>" when it could not make its object.
struct Entry {
  size_t bytes = 0;
  std::string name;
  std::string why;  // non-empty: that rank failed
};

Entry read_entry(rdzv::Store& store, const ShmRegion::Setup& s, int r) {
  std::istringstream in(store.get_string(key(s.id, "name", r), s.timeout));
  Entry e;
  in >> e.bytes >> e.name;
  if (e.name == "-") {
    std::getline(in, e.why);
    if (e.why.empty()) e.why = " (no reason given)";
  }
  return e;
}

}  // namespace

std::shared_ptr<ShmRegion> ShmRegion::create(const Setup& s) {
  rdzv::Store& store = *s.store;
  std::shared_ptr<ShmRegion> region(new ShmRegion());
  region->rank_ = s.rank;
  region->id_ = s.id;
  region->bytes_ = s.bytes;
  region->files_.resize(static_cast<size_t>(s.world));
  ShmFile& mine = region->files_[static_cast<size_t>(s.rank)];
  // A rank that cannot make its object (a /dev/shm too small) says so instead of a name, and
  // every rank then fails alike: allocate is collective, so all must come out the same way.
  try {
    leave_room(s);
    mine = ShmFile::create(s.bytes, detail::str("for group memory of ", s.bytes, " bytes"));
    store.set(key(s.id, "name", s.rank), detail::str(s.bytes, " ", mine.name()));
  } catch (const BackendError& e) {
    store.set(key(s.id, "name", s.rank), detail::str(s.bytes, " - ", e.what()));
  }
  wait_all(store, s, "name");
  std::vector<Entry> entries;
  entries.reserve(static_cast<size_t>(s.world));
  for (int r = 0; r < s.world; ++r) entries.push_back(read_entry(store, s, r));
  for (int r = 0; r < s.world; ++r) {
    const Entry& e = entries[static_cast<size_t>(r)];
    if (!e.why.empty())
      DDP_THROW(BackendError, "allocate (group memory #", s.id, "): rank ", r, " could not:", e.why);
  }
  for (int r = 0; r < s.world; ++r) {
    const Entry& e = entries[static_cast<size_t>(r)];
    if (r == s.rank) continue;
    if (e.bytes != s.bytes) {
      DDP_THROW(InvalidArgument, "allocate (group memory #", s.id, "): rank ", s.rank, " asked for ", s.bytes,
                " bytes but rank ", r, " for ", e.bytes, " (every rank must ask for the same)");
    }
    // Only a tcp object (common/shm_names.h) is opened, whatever the store holds.
    if (e.name.empty() || e.name[0] != '/' || shm_names::tcp_segment_creator(e.name.substr(1)) <= 0) {
      DDP_THROW(InvalidArgument, "allocate (group memory #", s.id, "): rank ", r, " published '", e.name,
                "', not a tcp shared-memory name");
    }
    ShmFile& theirs = region->files_[static_cast<size_t>(r)];
    theirs = ShmFile::open(e.name);
    if (theirs.bytes() != s.bytes) {
      DDP_THROW(InvalidArgument, "allocate: shared memory ", e.name, " of rank ", r, " holds ",
                theirs.bytes(), " bytes, not ", s.bytes);
    }
  }
  store.set(key(s.id, "mapped", s.rank), "1");
  wait_all(store, s, "mapped");
  mine.unlink();
  return region;
}

void ShmRegions::add(const std::shared_ptr<ShmRegion>& region) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.push_back(region);
}

bool ShmRegions::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.empty();
}

std::optional<DirectView> ShmRegions::find(const void* data, size_t bytes, uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(regions_, [](const std::weak_ptr<ShmRegion>& w) { return w.expired(); });
  const auto* p = static_cast<const char*>(data);
  for (const auto& weak : regions_) {
    auto region = weak.lock();
    if (!region || p < region->mine() || p >= region->mine() + region->bytes()) continue;
    const auto offset = static_cast<size_t>(p - region->mine());
    if (bytes > region->bytes() - offset) return std::nullopt;  // runs past its end
    DirectView v;
    v.bufs.reserve(static_cast<size_t>(region->world()));
    for (int r = 0; r < region->world(); ++r) v.bufs.push_back(region->base(r) + offset);
    v.tag = mix(mix(mix(region->id() + 1) ^ offset) ^ bytes) ^ mix(seq + 0x9e3779b97f4a7c15ull);
    if (v.tag == 0) v.tag = 1;
    v.region = std::move(region);
    return v;
  }
  return std::nullopt;
}

}  // namespace ddp::comm::tcp
