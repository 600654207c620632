#include "rendezvous/etcd_store.h"

#include <algorithm>
#include <map>

#include "common/error.h"

namespace ddp::rdzv {
namespace {

// A request made inside a get/wait gets the time left, but never less than this: a 50 ms get
// still reads its key once, however loaded the machine.
constexpr Millis kMinRequest{1'000};
// etcd's default --max-txn-ops is 128.
constexpr size_t kKeysPerTxn = 64;

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
}

EtcdStore::Current EtcdStore::read(const std::string& key) {
  return Current::of(client_->range(one_key(k(key))).kvs);
}

void EtcdStore::do_set(const std::string& key, const Bytes& value) { client_->put(put_of(k(key), value)); }

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

// One watch over the span of the keys from the revision they were read at: every change to
// them comes in order, so the set of present keys is exact at each event.
void EtcdStore::wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout, Bytes* value) {
  const Deadline deadline(timeout);
  while (true) {
    const Millis request = std::min(client_->request_timeout(), std::max(deadline.remaining(), kMinRequest));
    int64_t revision = 0;
    std::map<std::string, bool> present;  // full key -> exists
    if (value != nullptr) {
      const etcd::RangeResponse r = client_->range(one_key(k(keys.front())), request);
      if (!r.kvs.empty()) {
        *value = r.kvs.front().value;
        return;
      }
      revision = r.header.revision;
      present[k(keys.front())] = false;
    } else {
      std::vector<std::string> absent = missing(keys, &revision);
      if (absent.empty()) return;
      for (const auto& key : keys) present[k(key)] = true;
      for (const auto& key : absent) present[k(key)] = false;
    }
    const std::string lo = present.begin()->first;
    const std::string hi = present.size() > 1 ? present.rbegin()->first + std::string(1, '\0') : "";
    EtcdWatchRequest request_of_watch;
    request_of_watch.key = lo;
    request_of_watch.range_end = hi;
    request_of_watch.start_revision = revision + 1;
    EtcdWatch watch(client_, request_of_watch);
    Registered registered(this, &watch);
    while (true) {
      EtcdWatchBatch batch;
      try {
        batch = watch.next(deadline);
      } catch (const NetworkError& e) {
        if (!interrupted_) throw;
        DDP_THROW(NetworkError, "etcd store ", op, "('", keys.front(),
                  "'): interrupted (EtcdStore::interrupt)");
      }
      if (batch.compacted) break;  // read again
      for (const auto& e : batch.events) {
        auto it = present.find(e.kv.key);
        if (it == present.end()) continue;
        it->second = e.type == etcd::Event::Type::kPut;
        if (value != nullptr && it->second) *value = e.kv.value;
      }
      if (std::all_of(present.begin(), present.end(), [](const auto& p) { return p.second; })) return;
      if (deadline.expired()) {
        std::vector<std::string> still;
        for (const auto& key : keys) {
          if (!present[k(key)]) still.push_back(key);
        }
        throw_wait_timeout(op, still, deadline.elapsed());
      }
    }
  }
}

int64_t EtcdStore::do_add(const std::string& key, int64_t delta) {
  const std::string full = k(key);
  Current cur = read(key);
  const Deadline retries(client_->request_timeout());
  while (true) {
    const int64_t now = cur.exists ? parse_counter(key, cur.value) : 0;
    const int64_t next = checked_add(key, now, delta);
    const std::string text = std::to_string(next);
    const etcd::TxnRequest t =
        write_if_unchanged(full, cur.exists, cur.mod_revision, Bytes(text.begin(), text.end()));
    etcd::TxnResponse r;
    try {
      r = client_->txn(t);
    } catch (const NetworkError& e) {
      // Lost in flight: unchanged means it was not applied; changed may be our own write.
      const Current again = read(key);
      if (again.same_as(cur)) {
        if (retries.expired()) throw;
        continue;
      }
      DDP_THROW(NetworkError, "etcd store add('", key, "', ", delta,
                "): the transaction's outcome is unknown and the key has changed since, so the add was not "
                "repeated (",
                e.message(), ")");
    }
    if (r.succeeded) return next;
    if (r.responses.empty())
      DDP_THROW(StoreError, "etcd store add('", key, "'): a failed transaction without its read");
    cur = Current::of(r.responses.front().range.kvs);
  }
}

Bytes EtcdStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const std::string full = k(key);
  Current cur = read(key);
  const Deadline retries(client_->request_timeout());
  while (true) {
    const bool match = cur.exists ? cur.value == expected : expected.empty();
    if (!match) return cur.exists ? cur.value : expected;
    const etcd::TxnRequest t = write_if_unchanged(full, cur.exists, cur.mod_revision, desired);
    etcd::TxnResponse r;
    try {
      r = client_->txn(t);
    } catch (const NetworkError&) {
      if (retries.expired()) throw;
      cur = read(key);  // lost in flight: decide again on what is there now (ours, or not)
      continue;
    }
    if (r.succeeded) return desired;
    if (r.responses.empty()) {
      DDP_THROW(StoreError, "etcd store compare_set('", key, "'): a failed transaction without its read");
    }
    cur = Current::of(r.responses.front().range.kvs);
  }
}

bool EtcdStore::do_check(const std::vector<std::string>& keys) {
  int64_t revision = 0;
  return missing(keys, &revision).empty();
}

bool EtcdStore::do_delete_key(const std::string& key) {
  return client_->delete_range(etcd::DeleteRangeRequest{k(key), "", false}).deleted > 0;
}

int64_t EtcdStore::do_num_keys() { return client_->range(all_under(prefix_, true)).count; }

EtcdSnapshot EtcdStore::read_prefix(const std::string& key_prefix) {
  const std::string from = k(key_prefix);
  const etcd::RangeResponse r = client_->range(all_under(from));
  EtcdSnapshot out{.entries = {}, .revision = r.header.revision};
  for (const auto& kv : r.kvs) out.entries.emplace_back(kv.key.substr(prefix_.size()), kv.value);
  return out;
}

std::unique_ptr<EtcdWatch> EtcdStore::watch_prefix(const std::string& key_prefix, int64_t start_revision) {
  const std::string from = k(key_prefix);
  return std::make_unique<EtcdWatch>(client_,
                                     EtcdWatchRequest{from, etcd::prefix_end(from), start_revision, prefix_});
}

}  // namespace ddp::rdzv
