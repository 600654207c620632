#include "rendezvous/etcd_watch.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/text.h"
#include "rendezvous/etcd_client.h"
#include "rendezvous/etcd_http.h"

namespace ddp::rdzv {
namespace {

constexpr Millis kSleepStep{20};  // how soon a backing-off watch sees cancel()

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string shown_url(const std::string& url) { return url.starts_with("http://") ? url.substr(7) : url; }

}  // namespace

EtcdWatch::EtcdWatch(std::shared_ptr<EtcdClient> client, EtcdWatchRequest request)
    : client_(std::move(client)),
      request_(std::move(request)),
      next_revision_(request_.start_revision),
      member_(client_->current_member()),
      errors_(client_->http_options().urls.size()) {}

EtcdWatch::~EtcdWatch() = default;

void EtcdWatch::cancel() noexcept {
  cancelled_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_) stream_->cancel();
}

void EtcdWatch::wake() noexcept {
  woken_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_) stream_->wake();
}

// Opens a stream on member_ unless one is open; backs off once every member failed in turn.
// False when the deadline passed first.
bool EtcdWatch::ensure_stream(const Deadline& deadline) {
  if (stream_) return true;
  const size_t n = errors_.size();
  if (failures_in_a_row_ > 0 && failures_in_a_row_ % n == 0) {
    const size_t rounds = std::min<size_t>(failures_in_a_row_ / n, 5);
    const Deadline pause(std::min(kEtcdFirstBackoff * (1 << (rounds - 1)), kEtcdMaxBackoff));
    while (!pause.expired() && !deadline.expired() && !cancelled_) {
      std::this_thread::sleep_for(std::min({kSleepStep, pause.remaining(), deadline.remaining()}));
    }
  }
  if (deadline.expired() || cancelled_) return false;
  nlohmann::json create{{"key", etcd::base64_encode(std::string_view(request_.key))}};
  if (!request_.range_end.empty())
    create["range_end"] = etcd::base64_encode(std::string_view(request_.range_end));
  if (next_revision_ > 0) create["start_revision"] = std::to_string(next_revision_);
  if (request_.deletions_only) create["filters"] = nlohmann::json::array({"NOPUT"});
  token_ = client_->token(deadline.remaining());
  logger("etcd")->trace("/v3/watch of '{}'{}", printable_excerpt(request_.key, 120),
                        request_.range_end.empty() ? "" : " (prefix)");
  const EtcdHttpOptions& o = client_->http_options();
  auto stream = std::make_unique<EtcdStream>(o, o.urls[member_], "/v3/watch",
                                             nlohmann::json{{"create_request", create}}.dump(), token_);
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = std::move(stream);
  if (cancelled_) stream_->cancel();
  created_ = false;
  create_by_ = Deadline(o.attempt_timeout);
  return true;
}

void EtcdWatch::lost(const std::string& why) {
  errors_[member_] = why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_.reset();
  }
  created_ = false;
  member_ = (member_ + 1) % errors_.size();
  ++failures_in_a_row_;
}

void EtcdWatch::unreachable() const {
  std::string detail;
  const auto& urls = client_->http_options().urls;
  for (size_t i = 0; i < errors_.size(); ++i) {
    if (!errors_[i].empty()) detail += (detail.empty() ? "" : "; ") + shown_url(urls[i]) + ": " + errors_[i];
  }
  DDP_THROW(NetworkError, "etcd watch of key '", request_.key, "': could not reach etcd: ", detail);
}

bool EtcdWatch::on_chunk(const etcd::WatchResponse& r, EtcdWatchBatch* out) {
  if (r.canceled) {
    if (r.compact_revision > 0) {
      compacted_ = true;
      out->compacted = true;
      std::lock_guard<std::mutex> lock(mu_);
      stream_.reset();
      return true;
    }
    const std::string& why = r.cancel_reason;
    if (contains(why, "invalid auth token") && !reauthenticated_) {
      reauthenticated_ = true;
      client_->refresh_token(token_);
      std::lock_guard<std::mutex> lock(mu_);
      stream_.reset();  // again on the same member, with the new token
      return false;
    }
    if (contains(why, "permission denied") || contains(why, "user name is empty") ||
        contains(why, "invalid auth token") || contains(why, "authentication")) {
      DDP_THROW(StoreError, "etcd watch of key '", request_.key, "': etcd at ", shown_url(stream_->url()),
                " refused it: ", why);
    }
    lost(why.empty() ? "etcd cancelled the watch" : why);  // no leader, or the member going away
    return false;
  }
  if (r.created) {
    created_ = true;
    failures_in_a_row_ = 0;
    reauthenticated_ = false;  // a token etcd forgets later gets its one renewal again
    if (next_revision_ == 0) next_revision_ = r.header.revision + 1;
    return false;
  }
  if (r.events.empty()) return false;  // a progress notice
  next_revision_ = r.events.back().kv.mod_revision + 1;
  out->events = r.events;
  if (!request_.strip_prefix.empty()) {
    for (auto& e : out->events) {
      if (e.kv.key.starts_with(request_.strip_prefix)) e.kv.key.erase(0, request_.strip_prefix.size());
    }
  }
  return true;
}

EtcdWatchBatch EtcdWatch::next(const Deadline& deadline) {
  EtcdWatchBatch out;
  while (true) {
    if (cancelled_) DDP_THROW(NetworkError, "etcd watch of key '", request_.key, "': cancelled");
    if (woken_.exchange(false)) return out;
    if (compacted_) {
      out.compacted = true;
      return out;
    }
    if (!ensure_stream(deadline)) {
      if (cancelled_) continue;
      if (failures_in_a_row_ > 0) unreachable();
      return out;
    }
    // Until the member confirms the watch, it gets attempt_timeout: a silent one is skipped.
    const Deadline& by = !created_ && create_by_.end() < deadline.end() ? create_by_ : deadline;
    std::optional<std::string> line;
    try {
      line = stream_->next_line(by);
    } catch (const Error& e) {  // NetworkError: lost; StoreError: that member is not etcd
      lost(e.message());
      continue;
    }
    if (!line) {
      if (cancelled_) continue;
      if (woken_.exchange(false)) return out;
      if (!by.expired()) continue;  // the stream's leftover wake: read on
      if (!created_ && create_by_.expired() && !deadline.expired()) {
        lost("no answer within " + std::to_string(client_->http_options().attempt_timeout.count()) + " ms");
        continue;
      }
      if (!created_ && failures_in_a_row_ > 0) unreachable();
      return out;
    }
    const std::string source = "etcd watch of key '" + request_.key + "' at " + shown_url(stream_->url());
    etcd::WatchResponse chunk;
    try {
      chunk = etcd::parse_watch_chunk(*line, source);
    } catch (const StoreError& e) {
      lost(e.message());  // a garbled chunk: read again from the last event, elsewhere
      continue;
    }
    if (on_chunk(chunk, &out)) return out;
  }
}

}  // namespace ddp::rdzv
