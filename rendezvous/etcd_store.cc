#include "rendezvous/etcd_store.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>

#include "common/error.h"
#include "rendezvous/node_registration.h"

namespace ddp::rdzv {
namespace {

// A request made inside a get/wait gets the time left, but never less than this: a 50 ms get
// still reads its key once, however loaded the machine.
constexpr Millis kMinRequest{1'000};
// etcd's default --max-txn-ops is 128.
constexpr size_t kKeysPerTxn = 64;
// add()'s markers: "<prefix>\x01add/<nonce>", under a lease of twice this (seconds), granted
// again once this old: a marker outlives the retries of its add, which last at most this.
constexpr Millis kMarkerLife{30'000};
constexpr const char* kMarkerInfix =
    "\x01"
    "add/";
// ticket()'s keys: "<prefix>\x01ticket/<key's length>/<key>/<nonce>". Every key the store keeps
// for itself starts "<prefix>\x01" (num_keys leaves them out).
constexpr const char* kTicketInfix =
    "\x01"
    "ticket/";
constexpr const char* kInternalInfix = "\x01";
// Between tries of a call etcd did not answer, with patience (set_patience).
constexpr Millis kPatientPause{200};
// Parked get/wait watches kept at most (one connection each): a caller waits on one key set at
// a time per thread.
constexpr size_t kMaxParked = 4;

etcd::Compare unchanged(const std::string& key, bool exists, int64_t mod_revision) {
  etcd::Compare c;
  c.key = key;
  c.target = exists ? etcd::CompareTarget::kModRevision : etcd::CompareTarget::kCreateRevision;
  c.number = exists ? mod_revision : 0;
  return c;
}

etcd::RangeRequest one_key(const std::string& key, bool count_only = false) {
  etcd::RangeRequest r;
  r.key = key;
  r.count_only = count_only;
  return r;
}

etcd::RangeRequest all_under(const std::string& prefix, bool count_only = false) {
  etcd::RangeRequest r = one_key(prefix, count_only);
  r.range_end = etcd::prefix_end(prefix);
  return r;
}

etcd::PutRequest put_of(const std::string& key, Bytes value, int64_t lease = 0) {
  etcd::PutRequest p;
  p.key = key;
  p.value = std::move(value);
  p.lease = lease;
  return p;
}

// The transaction of add and compare_set: `desired` if the key is as read, else read it again.
etcd::TxnRequest write_if_unchanged(const std::string& key, bool exists, int64_t mod_revision,
                                    Bytes desired) {
  etcd::TxnRequest t;
  t.compare.push_back(unchanged(key, exists, mod_revision));
  t.success.emplace_back(put_of(key, std::move(desired)));
  t.failure.emplace_back(one_key(key));
  return t;
}

// compare_set's first try, one request where the key is absent or holds `expected`: `desired`
// if the key is absent (`expected` empty) or its value is `expected`, else read it.
etcd::TxnRequest write_if_matches(const std::string& key, const Bytes& expected, const Bytes& desired) {
  etcd::Compare c;
  c.key = key;
  c.target = expected.empty() ? etcd::CompareTarget::kCreateRevision : etcd::CompareTarget::kValue;
  c.value = expected;  // etcd fails a value compare on a missing key
  etcd::TxnRequest t;
  t.compare.push_back(std::move(c));
  t.success.emplace_back(put_of(key, desired));
  t.failure.emplace_back(one_key(key));
  return t;
}

}  // namespace

struct EtcdStore::Current {
  bool exists = false;
  Bytes value;
  int64_t mod_revision = 0;

  static Current of(const std::vector<etcd::KeyValue>& kvs) {
    if (kvs.empty()) return {};
    return {.exists = true, .value = kvs.front().value, .mod_revision = kvs.front().mod_revision};
  }
  bool same_as(const Current& o) const { return exists == o.exists && mod_revision == o.mod_revision; }
};

// Keeps a get/wait's watch where interrupt() finds it.
class EtcdStore::Registered {
 public:
  Registered(EtcdStore* store, EtcdWatch* watch) : store_(store), watch_(watch) {
    std::lock_guard<std::mutex> lock(store_->watches_mu_);
    store_->watches_.insert(watch_);
    if (store_->interrupted_) watch_->cancel();
  }
  ~Registered() {
    std::lock_guard<std::mutex> lock(store_->watches_mu_);
    store_->watches_.erase(watch_);
  }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;

 private:
  EtcdStore* store_;
  EtcdWatch* watch_;
};

EtcdStore::EtcdStore(EtcdStoreOptions options)
    : EtcdStore(std::make_shared<EtcdClient>(std::move(options.client)), std::move(options.prefix),
                options.timeout) {}

EtcdStore::EtcdStore(std::shared_ptr<EtcdClient> client, std::string prefix, Millis timeout)
    : Store(timeout), client_(std::move(client)), prefix_(std::move(prefix)) {
  if (!client_) DDP_THROW(InvalidArgument, "EtcdStore: no client");
  if (prefix_.empty())
    DDP_THROW(InvalidArgument, "EtcdStore: an empty key prefix (it would span all of etcd)");
}

EtcdStore::~EtcdStore() = default;

std::unique_ptr<Store> EtcdStore::clone() {
  return std::make_unique<EtcdStore>(std::make_shared<EtcdClient>(client_->options()), prefix_, timeout());
}

void EtcdStore::interrupt() noexcept {
  interrupted_ = true;
  std::lock_guard<std::mutex> lock(watches_mu_);
  for (EtcdWatch* w : watches_) w->cancel();
  parked_.clear();
}

EtcdStore::Current EtcdStore::read(const std::string& key) {
  return Current::of(client_->range(one_key(k(key))).kvs);
}

void EtcdStore::do_set(const std::string& key, const Bytes& value) {
  patiently([&] { return client_->put(put_of(k(key), value)); });
}

void EtcdStore::set_with_lease(const std::string& key, const Bytes& value, int64_t lease) {
  if (key.empty()) DDP_THROW(InvalidArgument, "store key must not be empty");
  client_->put(put_of(k(key), value, lease));
}

Bytes EtcdStore::do_get(const std::string& key, Millis timeout) {
  Bytes value;
  wait_for("get", {key}, timeout, &value);
  return value;
}

void EtcdStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  wait_for("wait", keys, timeout, nullptr);
}

std::vector<std::string> EtcdStore::missing(const std::vector<std::string>& keys, int64_t* revision) {
  std::vector<std::string> out;
  *revision = 0;
  for (size_t first = 0; first < keys.size(); first += kKeysPerTxn) {
    const size_t last = std::min(keys.size(), first + kKeysPerTxn);
    etcd::TxnRequest t;
    for (size_t i = first; i < last; ++i) t.success.emplace_back(one_key(k(keys[i]), true));
    const etcd::TxnResponse r = client_->txn(t);
    if (r.responses.size() != last - first) {
      DDP_THROW(StoreError, "etcd check of ", last - first, " keys: ", r.responses.size(), " answers");
    }
    for (size_t i = first; i < last; ++i) {
      if (r.responses[i - first].range.count == 0) out.push_back(keys[i]);
    }
    *revision = *revision == 0 ? r.header.revision : std::min(*revision, r.header.revision);
  }
  return out;
}

std::vector<std::optional<Bytes>> EtcdStore::do_get_present(const std::vector<std::string>& keys) {
  std::vector<std::optional<Bytes>> out;
  out.reserve(keys.size());
  for (size_t first = 0; first < keys.size(); first += kKeysPerTxn) {
    const size_t last = std::min(keys.size(), first + kKeysPerTxn);
    etcd::TxnRequest t;
    for (size_t i = first; i < last; ++i) t.success.emplace_back(one_key(k(keys[i])));
    const etcd::TxnResponse r = patiently([&] { return client_->txn(t); });
    if (r.responses.size() != last - first) {
      DDP_THROW(StoreError, "etcd read of ", last - first, " keys: ", r.responses.size(), " answers");
    }
    for (const auto& answer : r.responses) {
      if (answer.range.kvs.empty()) {
        out.emplace_back(std::nullopt);
      } else {
        out.emplace_back(answer.range.kvs.front().value);
      }
    }
  }
  return out;
}

// A get/wait's state: its keys (as the caller gave them), which of them exist as of the last
// event read (full key -> exists), a get's value, and the watch over their span from the
// revision they were read at. Every change to them comes in order, so `present` stays exact.
struct EtcdStore::Pending {
  std::vector<std::string> keys;
  bool get = false;
  std::map<std::string, bool> present;
  Bytes value;
  std::unique_ptr<EtcdWatch> watch;
  std::thread::id owner;  // parked for this thread's next get/wait only
  bool complete() const {
    return std::all_of(present.begin(), present.end(), [](const auto& p) { return p.second; });
  }
};

void EtcdStore::wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout, Bytes* value) {
  const Deadline deadline(timeout);
  std::unique_ptr<Pending> p = unpark(keys, value != nullptr);
  while (true) {
    Read r;
    try {
      if (!p) p = start_wait(keys, value, deadline);
      if (!p) return;  // every key was there
      Registered registered(this, p->watch.get());
      r = read_until(op, *p, deadline);
    } catch (const NetworkError&) {
      if (interrupted_ || patience_ms_.load() == 0) throw;
      p.reset();  // etcd did not answer: read the keys again, within the deadline
      if (deadline.expired()) throw_wait_timeout(op, keys, deadline.elapsed());
      std::this_thread::sleep_for(std::min(kPatientPause, deadline.remaining()));
      continue;
    }
    if (r == Read::kAll) {
      if (value != nullptr) *value = p->value;
      return;
    }
    if (r == Read::kCompacted) {
      p.reset();  // read the keys again, and watch from there
      continue;
    }
    std::vector<std::string> still;
    for (const auto& key : keys) {
      if (!p->present[k(key)]) still.push_back(key);
    }
    park(std::move(p));
    throw_wait_timeout(op, still, deadline.elapsed());
  }
}

std::unique_ptr<EtcdStore::Pending> EtcdStore::start_wait(const std::vector<std::string>& keys, Bytes* value,
                                                          const Deadline& deadline) {
  const Millis request = std::min(client_->request_timeout(), std::max(deadline.remaining(), kMinRequest));
  auto p = std::make_unique<Pending>();
  p->keys = keys;
  p->get = value != nullptr;
  p->owner = std::this_thread::get_id();
  int64_t revision = 0;
  if (p->get) {
    const etcd::RangeResponse r = client_->range(one_key(k(keys.front())), request);
    if (!r.kvs.empty()) {
      *value = r.kvs.front().value;
      return nullptr;
    }
    revision = r.header.revision;
    p->present[k(keys.front())] = false;
  } else {
    const std::vector<std::string> absent = missing(keys, &revision);
    if (absent.empty()) return nullptr;
    for (const auto& key : keys) p->present[k(key)] = true;
    for (const auto& key : absent) p->present[k(key)] = false;
  }
  EtcdWatchRequest w;
  w.key = p->present.begin()->first;
  w.range_end = p->present.size() > 1 ? p->present.rbegin()->first + std::string(1, '\0') : "";
  w.start_revision = revision + 1;
  p->watch = std::make_unique<EtcdWatch>(client_, w);
  return p;
}

EtcdStore::Read EtcdStore::read_until(const char* op, Pending& p, const Deadline& deadline) {
  while (true) {
    EtcdWatchBatch batch;
    try {
      batch = p.watch->next(deadline);
    } catch (const NetworkError& e) {
      if (!interrupted_) throw;
      DDP_THROW(NetworkError, "etcd store ", op, "('", p.keys.front(),
                "'): interrupted (EtcdStore::interrupt)");
    }
    if (batch.compacted) return Read::kCompacted;
    for (const auto& e : batch.events) {
      auto it = p.present.find(e.kv.key);
      if (it == p.present.end()) continue;
      it->second = e.type == etcd::Event::Type::kPut;
      if (p.get && it->second) p.value = e.kv.value;
    }
    if (p.complete()) return Read::kAll;
    if (deadline.expired()) return Read::kDeadline;
  }
}

std::unique_ptr<EtcdStore::Pending> EtcdStore::unpark(const std::vector<std::string>& keys, bool get) {
  std::lock_guard<std::mutex> lock(watches_mu_);
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    if ((*it)->keys == keys && (*it)->get == get && (*it)->owner == std::this_thread::get_id()) {
      std::unique_ptr<Pending> p = std::move(*it);
      parked_.erase(it);
      return p;
    }
  }
  return nullptr;
}

void EtcdStore::park(std::unique_ptr<Pending> p) {
  std::lock_guard<std::mutex> lock(watches_mu_);
  if (interrupted_) return;  // its wait would end at once anyway
  if (parked_.size() == kMaxParked) parked_.erase(parked_.begin());
  parked_.push_back(std::move(p));
}

int64_t EtcdStore::do_add(const std::string& key, int64_t delta) {
  const std::string mark = marker_key();  // one per add, however often it is tried
  bool again = false;
  return patiently([&]() -> int64_t {
    if (std::exchange(again, true)) {
      const Current marked = Current::of(client_->range(one_key(mark)).kvs);
      if (marked.exists) return parse_counter(key, marked.value);
    }
    return add_once(key, delta, mark);
  });
}

int64_t EtcdStore::add_once(const std::string& key, int64_t delta, const std::string& mark) {
  const std::string full = k(key);
  Current cur = read(key);
  int64_t lease = marker_lease();
  const Deadline retries(std::min(timeout(), kMarkerLife));
  while (true) {
    const int64_t now = cur.exists ? parse_counter(key, cur.value) : 0;
    if (delta == 0 && cur.exists) return now;  // a read (polls of a count): no write, no event
    const int64_t next = checked_add(key, now, delta);
    const std::string text = std::to_string(next);
    etcd::TxnRequest t =
        write_if_unchanged(full, cur.exists, cur.mod_revision, Bytes(text.begin(), text.end()));
    t.success.emplace_back(put_of(mark, Bytes(text.begin(), text.end()), lease));
    t.failure.emplace_back(one_key(mark));
    etcd::TxnResponse r;
    try {
      r = client_->txn(t);
    } catch (const NetworkError& e) {
      // Lost in flight: the marker says whether it was applied; if not, it never will be once
      // the key changes, since it holds only on the revision it read.
      if (auto applied = settle_add(key, delta, mark, retries, e.message(), &cur)) return *applied;
      continue;
    } catch (const StoreError& e) {
      // The markers' lease expired before a slow etcd applied this (it refused all of it): a
      // new lease, and again.
      if (e.message().find("requested lease not found") == std::string::npos) throw;
      lease = marker_lease(lease);
      continue;
    }
    if (r.succeeded) return next;
    if (r.responses.size() != 2)
      DDP_THROW(StoreError, "etcd store add('", key, "'): a failed transaction without its reads");
    // An earlier try of this add that applied after all (it was late, not lost): its value.
    if (const Current marked = Current::of(r.responses[1].range.kvs); marked.exists) {
      return parse_counter(key, marked.value);
    }
    cur = Current::of(r.responses.front().range.kvs);
  }
}

std::optional<int64_t> EtcdStore::settle_add(const std::string& key, int64_t delta, const std::string& mark,
                                             const Deadline& retries, std::string why, Current* cur) {
  while (true) {
    if (retries.expired()) {
      DDP_THROW(NetworkError, "etcd store add('", key, "', ", delta, "): not applied within ",
                retries.elapsed().count(), " ms: ", why);
    }
    try {
      const Current marked = Current::of(client_->range(one_key(mark)).kvs);
      if (marked.exists) return parse_counter(key, marked.value);
      *cur = read(key);
      return std::nullopt;
    } catch (const NetworkError& e) {
      why = e.message();  // etcd still away: its calls wait for it, up to their own deadline
    }
  }
}

template <typename F>
auto EtcdStore::patiently(F&& f) -> decltype(f()) {
  const Deadline patience(Millis(patience_ms_.load()));
  while (true) {
    try {
      return f();
    } catch (const NetworkError&) {
      if (interrupted_ || patience.expired()) throw;
      std::this_thread::sleep_for(std::min(kPatientPause, patience.remaining()));
    }
  }
}

std::string EtcdStore::marker_key() const { return prefix_ + kMarkerInfix + registration_nonce(); }

int64_t EtcdStore::marker_lease(int64_t gone) {
  std::lock_guard<std::mutex> lock(marker_mu_);
  if (marker_lease_ == 0 || marker_lease_ == gone || Clock::now() - marker_granted_ > kMarkerLife) {
    marker_lease_ = client_->grant_lease(2 * kMarkerLife.count() / 1000).id;
    marker_granted_ = Clock::now();
  }
  return marker_lease_;
}

Bytes EtcdStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return patiently([&] { return compare_set_once(key, expected, desired); });
}

Bytes EtcdStore::compare_set_once(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const Deadline retries(client_->request_timeout());
  Current cur;
  try {
    const etcd::TxnResponse r = client_->txn(write_if_matches(k(key), expected, desired));
    if (r.succeeded) return desired;
    cur = failed_read(r, key);
  } catch (const NetworkError&) {
    if (retries.expired()) throw;
    cur = read(key);  // lost in flight: decide on what is there now (ours, or not)
  }
  return compare_set_from(key, expected, desired, cur, retries);
}

Bytes EtcdStore::compare_set_from(const std::string& key, const Bytes& expected, const Bytes& desired,
                                  Current cur, const Deadline& retries) {
  while (true) {
    const bool match = cur.exists ? cur.value == expected : expected.empty();
    if (!match) return cur.exists ? cur.value : expected;
    const etcd::TxnRequest t = write_if_unchanged(k(key), cur.exists, cur.mod_revision, desired);
    etcd::TxnResponse r;
    try {
      r = client_->txn(t);
    } catch (const NetworkError&) {
      if (retries.expired()) throw;
      cur = read(key);  // lost in flight: decide again on what is there now (ours, or not)
      continue;
    }
    if (r.succeeded) return desired;
    cur = failed_read(r, key);
  }
}

EtcdStore::Current EtcdStore::failed_read(const etcd::TxnResponse& r, const std::string& key) {
  if (r.responses.empty()) {
    DDP_THROW(StoreError, "etcd store compare_set('", key, "'): a failed transaction without its read");
  }
  return Current::of(r.responses.front().range.kvs);
}

bool EtcdStore::do_check(const std::vector<std::string>& keys) {
  int64_t revision = 0;
  return patiently([&] { return missing(keys, &revision).empty(); });
}

bool EtcdStore::do_delete_key(const std::string& key) {
  return patiently([&] {
    return client_->delete_range(etcd::DeleteRangeRequest{k(key), "", false}).deleted > 0;
  });
}

int64_t EtcdStore::do_num_keys() {
  return patiently([&] { return count_keys(); });
}

int64_t EtcdStore::count_keys() {
  etcd::TxnRequest t;
  t.success.emplace_back(all_under(prefix_, true));
  t.success.emplace_back(all_under(prefix_ + kInternalInfix, true));
  const etcd::TxnResponse r = client_->txn(t);
  if (r.responses.size() != 2)
    DDP_THROW(StoreError, "etcd store num_keys: ", r.responses.size(), " answers of 2");
  return r.responses[0].range.count - r.responses[1].range.count;  // markers and tickets are not keys
}

int64_t EtcdStore::tickets_until(const std::string& dir, int64_t revision) {
  etcd::RangeRequest then = all_under(dir, true);  // the count as of that revision: one number
  then.revision = revision;
  try {
    return client_->range(then).count;
  } catch (const StoreError& e) {
    if (e.message().find("compacted") == std::string::npos) throw;
  }
  // History compacted: the keys created by then, listed (etcd's count ignores the filter).
  etcd::RangeRequest created = all_under(dir);
  created.keys_only = true;
  created.max_create_revision = revision;
  return static_cast<int64_t>(client_->range(created).kvs.size());
}

std::string EtcdStore::ticket_dir(const std::string& key) const {
  return prefix_ + kTicketInfix + std::to_string(key.size()) + "/" + key + "/";
}

int64_t EtcdStore::do_tickets(const std::string& key) {
  return client_->range(all_under(ticket_dir(key), true)).count;
}

int64_t EtcdStore::first_ticket_revision(const std::string& key, int64_t* now) {
  etcd::RangeRequest oldest = all_under(ticket_dir(key));
  oldest.keys_only = true;
  oldest.oldest_first = true;
  oldest.limit = 1;
  const etcd::RangeResponse r = client_->range(oldest);
  if (now != nullptr) *now = r.header.revision;
  return r.kvs.empty() ? 0 : r.kvs.front().create_revision;
}

int64_t EtcdStore::do_ticket(const std::string& key) {
  const std::string dir = ticket_dir(key);
  const std::string mine = dir + registration_nonce();
  // Safe to send again, so tried again while etcd does not answer, as long as add settles.
  const Deadline retries(std::max(Millis(patience_ms_.load()), std::min(timeout(), kMarkerLife)));
  while (true) {
    try {
      // The put, its creation revision (the first put's, if sent again) and the tickets' count.
      etcd::TxnRequest t;
      t.success.emplace_back(put_of(mine, {}));
      t.success.emplace_back(one_key(mine));
      t.success.emplace_back(all_under(dir, true));
      const etcd::TxnResponse r = client_->txn(t);
      if (r.responses.size() != 3 || r.responses[1].range.kvs.empty())
        DDP_THROW(StoreError, "etcd store ticket('", key, "'): a transaction without its key's read");
      const int64_t created = r.responses[1].range.kvs.front().create_revision;
      // Created by this transaction: the count is as of its creation. Else (sent again, the key
      // was there) later tickets may be counted too: counted as of its creation.
      if (created == r.header.revision) return r.responses[2].range.count - 1;
      return tickets_until(dir, created) - 1;
    } catch (const NetworkError&) {
      if (interrupted_ || retries.expired()) throw;
      std::this_thread::sleep_for(std::min(kPatientPause, retries.remaining()));
    }
  }
}

EtcdSnapshot EtcdStore::read_prefix(const std::string& key_prefix) {
  const std::string from = k(key_prefix);
  const etcd::RangeResponse r = client_->range(all_under(from));
  EtcdSnapshot out{.entries = {}, .revision = r.header.revision};
  for (const auto& kv : r.kvs) out.entries.emplace_back(kv.key.substr(prefix_.size()), kv.value);
  return out;
}

std::unique_ptr<EtcdWatch> EtcdStore::watch_prefix(const std::string& key_prefix, int64_t start_revision,
                                                   bool deletions_only) {
  const std::string from = k(key_prefix);
  return std::make_unique<EtcdWatch>(
      client_, EtcdWatchRequest{from, etcd::prefix_end(from), start_revision, prefix_, deletions_only});
}

}  // namespace ddp::rdzv
