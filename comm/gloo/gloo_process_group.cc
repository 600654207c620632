#include "comm/gloo/gloo_process_group.h"

#include <cstring>

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::gloo_backend {
namespace {

constexpr const char* kFailureKey = "gloo/first_failure";
// How long a rank whose collective failed waits for the others to report the same failure
// before it names the ones that did not (they share the op's deadline, so they report together).
constexpr Millis kSilentGrace{2'000};
constexpr Millis kGaveUpGrace{500};

// Point-to-point slots: the tag in the low 32 bits and a hash of the byte count above it, so
// that a send and a recv of different sizes never match (Gloo would abort the process on the
// overflow) and the receiver times out with a clear error instead. Collective slots carry a
// non-zero prefix byte in bits 56..63, so these never collide with them.
uint64_t p2p_slot(int tag, size_t nbytes) {
  uint64_t h = nbytes * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return ((h & 0xFFFFFFull) << 32) | static_cast<uint32_t>(tag);
}

// What every rank must agree on for a collective: per-rank byte count, dtype, reduce op, root.
// Folded into the op's Gloo tag, a disagreement leaves the ranks on different slots: they time
// out with an error instead of Gloo aborting the process on an oversized message.
uint16_t signature(const Buffer& b, int rop, int root) {
  uint64_t h = b.bytes() * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(b.dtype) + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= static_cast<uint64_t>(rop + 2) * 0x165667B19E3779F9ull;
  h ^= static_cast<uint64_t>(root + 2) * 0x27D4EB2F165667C5ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<uint16_t>(h);
}

bool is_timeout(const std::string& message) {
  return message.find("Timed out") != std::string::npos || message.find("timeout") != std::string::npos;
}

void copy(const Buffer& from, const Buffer& to) {
  if (from.data != to.data && from.bytes() > 0) std::memcpy(to.data, from.data, from.bytes());
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(const GroupSetup& setup)
    : ProcessGroup(setup.rank, setup.size, setup.options), setup_(setup) {
  if (setup.size > 1) {
    DDP_CHECK(setup.store != nullptr, "gloo: group '", setup.name, "' needs a store");
    context_ = std::make_unique<GlooContext>(setup);
  }
  worker_ = std::make_unique<TaskThread>();
}

GlooProcessGroup::~GlooProcessGroup() {
  if (worker_->pending() > 0 && context_) {
    // Ops still queued or blocked in Gloo would otherwise wait for their full timeout.
    Op op{"gloo group '" + setup_.name + "' destroyed", 0, Millis(0), -1};
    break_group(op, std::make_exception_ptr(NetworkError(
                        op.what + " with ops still pending; they were cancelled", __FILE__, __LINE__)));
  }
  worker_.reset();
}

GlooProcessGroup::Op GlooProcessGroup::next_op(const char* name, Millis timeout, int peer) {
  uint64_t seq = next_seq_++;
  std::string what =
      detail::str("gloo ", name, " #", seq, " in group '", setup_.name, "' (rank ", rank(), "/", size(), ")");
  return Op{std::move(what), static_cast<uint32_t>(seq), timeout, peer};
}

std::exception_ptr GlooProcessGroup::broken(const Op& op) {
  std::lock_guard<std::mutex> lock(broken_mu_);
  if (aborted_)
    return std::make_exception_ptr(Aborted(op.what + ": aborted: " + *aborted_, __FILE__, __LINE__));
  return broken_;
}

// The group breaks first (an op that Gloo's abort wakes finds it), then the context is aborted.
void GlooProcessGroup::do_abort(const std::string& reason) {
  const Op op{"gloo group '" + setup_.name + "'", 0, Millis(0), -1};
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (!broken_) aborted_ = reason;
  }
  break_group(op, broken(op));
}

void GlooProcessGroup::break_group(const Op& op, const std::exception_ptr& error) noexcept {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (broken_) return;
    broken_ = error;
  }
  if (!context_) return;
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  try {
    // First writer wins: peers that fail because we aborted can say what started it.
    setup_.store->compare_set(kFailureKey, {},
                              rdzv::Store::to_bytes(detail::str("rank ", rank(), ": ", message)));
  } catch (...) {
    // The store may be gone with the failure; the note is only a courtesy.
  }
  logger("gloo")->debug("{}: group broken: {}", op.what, message);
  context_->abort(detail::str("aborted by rank ", rank(), " after ", op.what, " failed"));
}

namespace {
std::string saw_failure_key(const uint32_t tag, int rank) {
  return detail::str("gloo/saw_failure/", tag, "/", rank);
}
}  // namespace

void GlooProcessGroup::report_failure(const Op& op) noexcept {
  try {
    setup_.store->set(saw_failure_key(op.tag, rank()), "1");
  } catch (...) {
    // The store may be gone with the failure; the report is only a courtesy.
  }
}

std::string GlooProcessGroup::silent_ranks(const Op& op) noexcept {
  try {
    auto key = [&](int r) { return saw_failure_key(op.tag, r); };
    rdzv::Store& store = *setup_.store;
    std::vector<std::string> keys;
    keys.reserve(size());
    for (int r = 0; r < size(); ++r) keys.push_back(key(r));
    try {
      store.wait(keys, kSilentGrace);
      return "";
    } catch (const TimeoutError&) {
    }
    std::string silent;
    for (int r = 0; r < size(); ++r) {
      if (!store.check({key(r)})) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
    }
    if (silent.empty()) return "";
    return detail::str("; silent: ranks [", silent, "] did not report this failure within ",
                       kSilentGrace.count(), " ms (stopped, cut off or dead)");
  } catch (...) {
    return "";  // the store went with the failure: nothing more to say
  }
}

// A peer that timed out on this op itself closes its connections (Gloo does, on a timeout), so
// the ranks still waiting see it hang up first: when it reported the failure too (within
// kGaveUpGrace), it is not the cause, and the ranks that stayed silent are named instead.
std::string GlooProcessGroup::gave_up_too(const Op& op, int peer) noexcept {
  if (peer < 0 || size() <= 2) return "";
  try {
    setup_.store->wait({saw_failure_key(op.tag, peer)}, kGaveUpGrace);
  } catch (...) {
    return "";  // it did not report: it may well be the cause (or the store went with it)
  }
  return detail::str(" (rank ", peer, " gave up on this op too)", silent_ranks(op));
}

std::exception_ptr GlooProcessGroup::translate(const Op& op) noexcept {
  try {
    try {
      throw;
    } catch (const Error&) {
      return std::current_exception();
    } catch (const ::gloo::IoException& e) {
      std::string gloo = context_ ? context_->describe(e.what()) : e.what();
      int peer = op.peer >= 0 ? op.peer : (context_ ? context_->peer_in(e.what()) : -1);
      if (peer < 0 && size() == 2) peer = 1 - rank();  // two ranks: there is only one peer
      if (op.peer < 0) report_failure(op);             // before anything slow: the others may be counting
      std::string first;
      try {
        if (setup_.store->check({kFailureKey}))
          first = "; first failure in the group: " + setup_.store->get_string(kFailureKey, Millis(1000));
      } catch (...) {
      }
      if (is_timeout(gloo)) {
        DDP_THROW(
            TimeoutError, op.what, ": timed out after ", op.timeout.count(), " ms waiting for ",
            peer >= 0 ? "rank " + std::to_string(peer) : std::string("a peer (gloo does not say which)"),
            " (gloo: ", gloo, ")", first, peer >= 0 ? std::string() : silent_ranks(op),
            op.peer >= 0 ? ""
                         : "; ranks that called a different op, or this op with a different count, dtype, "
                           "root or reduce op, also end here");
      }
      DDP_THROW(NetworkError, op.what, ": lost connection to ",
                peer >= 0 ? "rank " + std::to_string(peer) : std::string("a peer"), " (gloo: ", gloo, ")",
                first, op.peer < 0 ? gave_up_too(op, peer) : std::string(), "; the group must be rebuilt");
    } catch (const ::gloo::Exception& e) {
      DDP_THROW(BackendError, op.what, ": gloo: ", e.what());
    } catch (const std::exception& e) {
      DDP_THROW(BackendError, op.what, ": gloo: ", e.what());
    } catch (...) {
      DDP_THROW(BackendError, op.what, ": gloo threw an unknown exception");
    }
  } catch (...) {
    return std::current_exception();
  }
}

void GlooProcessGroup::run(const Op& op, const WorkPtr& work, const Body& body) noexcept {
  std::exception_ptr error = broken(op);
  if (!error) {
    try {
      body(OpArgs{context_ ? context_->get() : nullptr, op.tag, op.timeout});
    } catch (...) {
      // Woken by abort(): no store notes, no grace for silent ranks (translate's).
      error = broken(op);
      if (!error) error = translate(op);
      break_group(op, error);
    }
  }
  work->finish(error);
}

WorkPtr GlooProcessGroup::submit(const char* name, Millis timeout, bool local, uint16_t signature,
                                 Body body) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  Op op = next_op(name, timeout);
  // The low 16 bits of the Gloo tag carry what every rank must agree on (see signature()).
  op.tag = (op.tag << 16) | signature;
  auto work = std::make_shared<Work>(op.what);
  if (local) {
    run(op, work, body);  // nothing to wait for: complete before returning
  } else {
    worker_->post([this, op, work, body = std::move(body)] { run(op, work, body); });
  }
  return work;
}

WorkPtr GlooProcessGroup::submit_p2p(bool is_send, Buffer buf, int peer, int tag, Millis timeout,
                                     std::shared_ptr<int> source) {
  const char* name = is_send ? "send" : "recv";
  std::lock_guard<std::mutex> lock(issue_mu_);
  Op op{detail::str("gloo ", name, " #", next_p2p_++, " (point-to-point) in group '", setup_.name, "' (rank ",
                    rank(), "/", size(), ")"),
        0, timeout, peer};
  op.what += peer < 0 ? detail::str(" from any rank (tag ", tag, ", ", buf.bytes(), " bytes)")
                      : detail::str(is_send ? " to rank " : " from rank ", peer, " (tag ", tag, ", ",
                                    buf.bytes(), " bytes)");
  auto work = std::make_shared<Work>(op.what);
  if (buf.count == 0) {
    run(op, work, [](const OpArgs&) {});
    return work;
  }
  // Post now, wait on the worker: Gloo matches a send with the receiver's posted recv.
  std::shared_ptr<::gloo::transport::UnboundBuffer> ubuf;
  std::exception_ptr post_error = broken(op);
  if (!post_error) {
    try {
      ubuf = context_->get()->createUnboundBuffer(buf.data, buf.bytes());
      if (is_send) {
        ubuf->send(peer, p2p_slot(tag, buf.bytes()));
      } else if (peer < 0) {
        std::vector<int> others;
        for (int r = 0; r < size(); ++r) {
          if (r != rank()) others.push_back(r);
        }
        ubuf->recv(others, p2p_slot(tag, buf.bytes()));
      } else {
        ubuf->recv(peer, p2p_slot(tag, buf.bytes()));
      }
    } catch (...) {
      post_error = translate(op);
    }
  }
  worker_->post([this, op, work, ubuf, post_error, is_send, source] {
    run(op, work, [&](const OpArgs& a) {
      if (post_error) std::rethrow_exception(post_error);
      if (is_send) {
        ubuf->waitSend(a.timeout);
      } else {
        ubuf->waitRecv(source.get(), a.timeout);
      }
    });
  });
  return work;
}

WorkPtr GlooProcessGroup::do_send(Buffer buf, int dst, SendOptions opts) {
  return submit_p2p(true, buf, dst, opts.tag, opts.timeout);
}

WorkPtr GlooProcessGroup::do_recv(Buffer buf, int src, RecvOptions opts) {
  return submit_p2p(false, buf, src, opts.tag, opts.timeout);
}

WorkPtr GlooProcessGroup::do_recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts) {
  return submit_p2p(false, buf, -1, opts.tag, opts.timeout, std::move(source));
}

WorkPtr GlooProcessGroup::do_broadcast(Buffer buf, BroadcastOptions opts) {
  bool local = size() == 1 || buf.count == 0;
  return submit("broadcast", opts.timeout, local, signature(buf, -1, opts.root), [=](const OpArgs& a) {
    if (!local) run_broadcast(a, buf, opts.root);
  });
}

WorkPtr GlooProcessGroup::do_all_reduce(Buffer buf, AllReduceOptions opts) {
  bool local = size() == 1 || buf.count == 0;
  return submit("all_reduce", opts.timeout, local, signature(buf, static_cast<int>(opts.op), -1),
                [=](const OpArgs& a) {
                  if (!local) run_all_reduce(a, buf, opts.op);
                });
}

WorkPtr GlooProcessGroup::do_reduce(Buffer buf, ReduceOptions opts) {
  bool local = size() == 1 || buf.count == 0;
  return submit("reduce", opts.timeout, local, signature(buf, static_cast<int>(opts.op), opts.root),
                [=](const OpArgs& a) {
                  if (!local) run_reduce(a, buf, opts.root, opts.op);
                });
}

WorkPtr GlooProcessGroup::do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  bool local = size() == 1 || input.count == 0;
  return submit("all_gather", opts.timeout, local, signature(input, -1, -1), [=, this](const OpArgs& a) {
    if (size() == 1) copy(input, output);
    if (!local) run_all_gather(a, input, output);
  });
}

WorkPtr GlooProcessGroup::do_gather(Buffer input, Buffer output, GatherOptions opts) {
  bool local = size() == 1 || input.count == 0;
  return submit("gather", opts.timeout, local, signature(input, -1, opts.root), [=, this](const OpArgs& a) {
    if (size() == 1) copy(input, output);
    if (!local) run_gather(a, input, output, opts.root);
  });
}

WorkPtr GlooProcessGroup::do_scatter(Buffer input, Buffer output, ScatterOptions opts) {
  bool local = size() == 1 || output.count == 0;
  return submit("scatter", opts.timeout, local, signature(output, -1, opts.root), [=, this](const OpArgs& a) {
    if (size() == 1) copy(input, output);
    if (!local) run_scatter(a, input, output, opts.root);
  });
}

WorkPtr GlooProcessGroup::do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  bool local = size() == 1 || output.count == 0;
  return submit("reduce_scatter", opts.timeout, local, signature(output, static_cast<int>(opts.op), -1),
                [=, this](const OpArgs& a) {
                  if (size() == 1) copy(input, output);
                  if (!local) run_reduce_scatter(a, input, output, opts.op);
                });
}

WorkPtr GlooProcessGroup::do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  bool local = size() == 1 || input.count == 0;
  return submit("all_to_all", opts.timeout, local, signature(input, -1, -1), [=, this](const OpArgs& a) {
    if (size() == 1) copy(input, output);
    if (!local) run_all_to_all(a, input, output);
  });
}

WorkPtr GlooProcessGroup::do_barrier(BarrierOptions opts) {
  bool local = size() == 1;
  return submit("barrier", opts.timeout, local, 0, [=](const OpArgs& a) {
    if (!local) run_barrier(a);
  });
}

}  // namespace ddp::comm::gloo_backend

namespace ddp::comm {

ProcessGroupPtr make_gloo_group(const GroupSetup& setup) {
  return std::make_shared<gloo_backend::GlooProcessGroup>(setup);
}

}  // namespace ddp::comm
