// SocketEngine: how operations end when things go wrong (deadlines, peers that leave or are
// lost, an engine that fails). Every routine here runs under the engine's mutex.
#include "comm/tcp/socket_engine_state.h"
#include "common/log.h"

namespace ddp::comm::tcp {

// Under mu_: ends every operation whose deadline passed.
void SocketEngine::expire(Done& done) {
  const auto now = Clock::now();
  auto timeout = [&](const std::string& label, int p, const char* what) {
    return engine_error<TimeoutError>(detail::str(label, ": timed out ", what, " ", name_of(p)));
  };
  for (size_t r = 0; r < peers_.size(); ++r) {
    Peer& peer = *peers_[r];
    const int p = static_cast<int>(r);
    for (auto it = peer.sendq.begin(); it != peer.sendq.end();) {
      if (!it->work || it->deadline > now) {
        ++it;
      } else if (it->sent == 0) {
        done.emplace_back(it->work, timeout(it->label, p, "sending to"));
        it = peer.sendq.erase(it);
      } else {  // partly written: keep the stream whole, stop using the caller's buffer
        it->owned.assign(it->data, it->data + it->bytes);
        it->data = it->owned.data();
        done.emplace_back(it->work, timeout(it->label, p, "sending to"));
        it->work.reset();
        ++it;
      }
    }
    peer.mailbox.expire(now, done);
  }
  for (auto it = any_.begin(); it != any_.end();) {
    if (it->op.deadline > now) {
      ++it;
      continue;
    }
    done.emplace_back(it->op.work, engine_error<TimeoutError>(detail::str(
                                       it->op.label, ": timed out waiting for a message from any peer")));
    it = any_.erase(it);
  }
}

// Under mu_.
void SocketEngine::claim_for_any(int p, const MailKey& key) {
  Peer& peer = *peers_[p];
  if (peer.mailbox.has_posted(key) || peer.mailbox.has_unexpected(key)) return;  // p's own recvs first
  for (auto it = any_.begin(); it != any_.end(); ++it) {
    if (it->key != key) continue;
    *it->source = p;
    Done none;  // nothing is buffered for the key: the op is queued, nothing completes here
    peer.mailbox.post(key, std::move(it->op), none);
    any_.erase(it);
    return;
  }
}

// Under mu_.
void SocketEngine::fail_any(const ErrorFor& err, Done& done) {
  for (auto& a : any_) done.emplace_back(a.op.work, err(a.op.label));
  any_.clear();
}

// Under mu_: the peer destroyed its group; only what still needs it fails.
void SocketEngine::close_peer(int p, Done& done) {
  Peer& peer = *peers_[p];
  if (!peer.alive) return;
  peer.alive = false;
  const std::string reason =
      detail::str(name_of(p), " left the group (destroyed it) before this op completed");
  auto err = [&](const std::string& label) {
    return engine_error<NetworkError>(detail::str(label, ": ", reason));
  };
  fail_ops(peer, err, done);
  bool anyone = false;
  for (const auto& other : peers_) anyone = anyone || (other->alive && !other->said_bye);
  if (!anyone) fail_any(err, done);  // a recv_any has no one left to hear from
}

// Under mu_: fails every operation that involves the peer, each with err(its label).
void SocketEngine::fail_ops(Peer& peer, const ErrorFor& err, Done& done) {
  for (auto& op : peer.sendq) {
    if (op.work) done.emplace_back(op.work, err(op.label));
  }
  peer.sendq.clear();
  peer.mailbox.fail(err, done);
}

// Under mu_.
void SocketEngine::lose_peer(int p, const std::string& why, Done& done) {
  Peer& peer = *peers_[p];
  if (!peer.alive) return;
  peer.alive = false;
  const std::string reason = detail::str(name_of(p), " was lost: ", why);
  health_->fail(FailureKind::kNetwork, p, reason);
  fail_all(done, reason);
}

// Once: the ops pending then fail; later ones are refused when posted (the health is broken).
// Only a lost peer and an abort are followed: the group's own other failures (a timeout, a
// mismatch, its destruction) end their ops where they happen, and the goodbyes queued then must
// still leave.
void SocketEngine::follow_health(Done& done) {
  if (followed_ || !health_->broken()) return;
  if (health_->kind() == FailureKind::kAborted) {
    followed_ = true;
    abort_all(done);
  } else if (health_->lost_peer() >= 0) {
    followed_ = true;
    fail_all(done, "the group failed");
  }
}

void SocketEngine::abort_all(Done& done) {
  auto err = [&](const std::string& label) {
    try {
      health_->rethrow(label);
    } catch (...) {
      return std::current_exception();
    }
  };
  for (auto& peer : peers_) {
    for (auto it = peer->sendq.begin(); it != peer->sendq.end();) {
      if (!it->work) {
        ++it;
      } else if (it->sent == 0) {
        done.emplace_back(it->work, err(it->label));
        it = peer->sendq.erase(it);
      } else {  // partly written: keep the stream whole, stop using the caller's buffer
        it->owned.assign(it->data, it->data + it->bytes);
        it->data = it->owned.data();
        done.emplace_back(it->work, err(it->label));
        it->work.reset();
        ++it;
      }
    }
    peer->mailbox.fail(err, done);
  }
  fail_any(err, done);
}

// Under mu_: every pending operation fails with the group's failure, seen from its label.
void SocketEngine::fail_all(Done& done, const std::string& reason) {
  auto err = [&](const std::string& label) {
    if (health_->broken()) {
      try {
        health_->rethrow(label);
      } catch (...) {
        return std::current_exception();
      }
    }
    return engine_error<NetworkError>(detail::str(label, ": ", reason));
  };
  for (auto& peer : peers_) fail_ops(*peer, err, done);
  fail_any(err, done);
}

// Not under mu_: the progress thread caught an exception; the group fails and every pending
// op completes with the error (the thread then ends).
void SocketEngine::fail_engine(Done& done, const std::string& why) noexcept {
  try {
    const std::string reason =
        detail::str("the progress engine of group '", options_.group, "' failed: ", why);
    logger("tcp")->error("tcp backend: {}", reason);
    {
      std::lock_guard<std::mutex> lock(mu_);
      health_->fail(FailureKind::kOther, -1, reason);
      fail_all(done, reason);
    }
    finish_all(done);
  } catch (...) {  // out of memory even for the error: nothing more can be done from here
  }
}

}  // namespace ddp::comm::tcp
