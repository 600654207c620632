#include "comm/nccl/nccl_process_group.h"

#include <cstring>

#include "comm/nccl/cuda_memory.h"
#include "comm/nccl/nccl_unique_id.h"
#include "common/error.h"
#include "common/log.h"

// How the group meets NCCL and runs its ops (the contract: nccl_process_group.h).
// - One CUDA device per group: LOCAL_RANK (else the rank) modulo the visible devices; buffers
//   must be CUDA views on that device (InvalidArgument otherwise). No device: BackendError.
// - Rendezvous: rank 0's ncclUniqueId goes through the group's store; the communicator is
//   created non-blocking, so a rank that never arrives is a TimeoutError after the group's
//   timeout (the half-built communicator is aborted), never a hang.
// - Ops are queued on the group's own CUDA stream, after whatever the caller queued on the
//   legacy default stream; each records a CUDA event, and a watcher thread finishes the Works
//   in issue order as their events complete (cudaEventQuery).
// - Watchdog: the same thread polls ncclCommGetAsyncError; an async error, or an op past its
//   deadline, aborts the communicator (ncclCommAbort) so the hung kernels exit, and fails that
//   op (naming it and its sequence number) and every pending and later op. Rebuild the group.

// - all_to_all, gather and scatter are grouped ncclSend/ncclRecv (ncclGroupStart/End); AVG is
//   ncclAvg; bitwise reductions do not exist in NCCL and are an InvalidArgument; send/recv
//   ignore the tag (NCCL matches point-to-point messages in issue order per peer).
// - Zero-length ops complete at once.

// - Multi-buffer ops (process_group.h, nccl_multi.cc): first the list-shape agreement, an
//   all_gather on the group's communicator (a rank that differs is an InvalidArgument on every
//   rank). A list of one (on the group's device) then runs on the group's communicator. K > 1
//   buffers must be CUDA buffers on K distinct devices (else InvalidArgument naming the index):
//   they run on a clique of world × K NCCL ranks (nccl_clique.h), communicator i being rank
//   rank × K + i on the device of buffer i, all K calls in one ncclGroupStart/End. The clique
//   for a device list is created on first use (unique id under a store key of its own, created
//   when any rank lacks it, so every rank creates it together), cached, watched by the same
//   watchdog and aborted with the group. Works, timeouts and errors as for the other ops.

namespace ddp::comm::nccl_backend {
namespace {

constexpr const char* kUniqueIdKey = "nccl/unique_id";

void check_cuda(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) {
    cudaGetLastError();
    DDP_THROW(BackendError, what, ": ", cudaGetErrorString(rc));
  }
}

}  // namespace

std::exception_ptr NcclProcessGroup::nccl_error(const std::string& what, ncclResult_t rc) const {
  std::string last = comm_ != nullptr ? ncclGetLastError(comm_) : "";
  std::string text = what + ": " + ncclGetErrorString(rc) + (last.empty() ? "" : " (" + last + ")");
  // Remote and system errors mean a peer or a connection is gone: the group must be rebuilt.
  if (rc == ncclRemoteError || rc == ncclSystemError) {
    return std::make_exception_ptr(
        NetworkError(text + "; a peer failed, the group must be rebuilt", __FILE__, __LINE__));
  }
  if (rc == ncclInvalidArgument || rc == ncclInvalidUsage)
    return std::make_exception_ptr(InvalidArgument(text, __FILE__, __LINE__));
  return std::make_exception_ptr(BackendError(text, __FILE__, __LINE__));
}

void NcclProcessGroup::settle(const std::string& what, ncclResult_t rc, const Deadline& deadline,
                              std::span<const ncclComm_t> comms) {
  if (comms.empty()) comms = std::span<const ncclComm_t>(&comm_, 1);
  int backoff_us = 10;
  while (rc == ncclInProgress) {
    if (deadline.expired()) {
      DDP_THROW(TimeoutError, what, ": NCCL did not finish within ", deadline.elapsed().count(),
                " ms; the communicator is aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(backoff_us));
    backoff_us = std::min(backoff_us * 2, 1000);
    rc = ncclSuccess;
    for (ncclComm_t c : comms) {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t query = ncclCommGetAsyncError(c, &async);
      if (query != ncclSuccess) async = query;
      if (async != ncclSuccess && async != ncclInProgress) {
        rc = async;
        break;
      }
      if (async == ncclInProgress) rc = ncclInProgress;
    }
  }
  if (rc != ncclSuccess) std::rethrow_exception(nccl_error(what, rc));
}

NcclProcessGroup::NcclProcessGroup(const GroupSetup& setup)
    : ProcessGroup(setup.rank, setup.size, setup.options), name_(setup.name), store_(setup.store) {
  DDP_CHECK(setup.store != nullptr, "nccl: group '", setup.name, "' needs a store");
  device_ = cuda::default_device(setup.rank);
  const std::string what =
      detail::str("nccl group '", name_, "' (rank ", rank(), "/", size(), ", cuda:", device_, ")");
  check_cuda(cudaSetDevice(device_), what + ": cudaSetDevice");
  ncclUniqueId id = exchange_unique_id(
      *setup.store, {kUniqueIdKey, rank() == 0, setup.options.timeout, "nccl group '" + name_ + "'"});
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so a rank that never arrives is a timeout, not a hang
  Deadline deadline(setup.options.timeout);
  try {
    settle(what + ": ncclCommInitRankConfig", ncclCommInitRankConfig(&comm_, size(), id, rank(), &config),
           deadline);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), what + ": cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming), what + ": cudaEventCreate");
    check_cuda(cudaMalloc(&scratch_, sizeof(int32_t)), what + ": cudaMalloc");
    check_cuda(cudaMemset(scratch_, 0, sizeof(int32_t)), what + ": cudaMemset");
  } catch (...) {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (caller_ready_ != nullptr) cudaEventDestroy(caller_ready_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    throw;
  }
  watcher_ = std::thread([this] { watch(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    pending = !pending_.empty();
  }
  cv_.notify_all();
  if (pending) {
    fail_all(std::make_exception_ptr(
        NetworkError("nccl group '" + name_ + "' destroyed with ops still pending; they were aborted",
                     __FILE__, __LINE__)));
  }
  watcher_.join();
  cliques_.clear();  // finalized and destroyed, or already aborted with the group
  cudaSetDevice(device_);
  for (cudaEvent_t e : retired_) cudaEventDestroy(e);
  if (!aborted_) {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }
  cudaStreamDestroy(stream_);
  cudaEventDestroy(caller_ready_);
  cudaFree(scratch_);
}

void NcclProcessGroup::do_abort(const std::string& reason) {
  fail_all(std::make_exception_ptr(
      Aborted(detail::str("nccl group '", name_, "' (rank ", rank(), "/", size(), "): aborted: ", reason),
              __FILE__, __LINE__)));
}

void NcclProcessGroup::fail_all(std::exception_ptr error) noexcept {
  std::deque<Pending> failed;
  std::vector<NcclClique*> cliques;
  bool abort_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_) broken_ = std::move(error);
    failed.swap(pending_);
    abort_now = !aborted_;
    aborted_ = true;
    for (const auto& c : cliques_) cliques.push_back(c.get());
  }
  if (abort_now) {
    // Makes NCCL's kernels exit, so the streams (and our events) can complete.
    ncclCommAbort(comm_);
    for (NcclClique* c : cliques) c->abort();
    logger("nccl")->debug("nccl group '{}': communicator aborted", name_);
  }
  for (auto& p : failed) {
    {
      // The watcher may be querying this event right now: destroy it only after it stopped.
      std::lock_guard<std::mutex> lock(mu_);
      retired_.push_back(p.event);
    }
    p.work->finish(broken_);
  }
}

void NcclProcessGroup::watch() {
  int backoff_us = 0;
  for (;;) {
    Pending front;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (backoff_us > 0) {
        cv_.wait_for(lock, std::chrono::microseconds(backoff_us), [&] { return stop_ && pending_.empty(); });
      } else {
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      }
      if (pending_.empty()) {
        if (stop_) return;
        backoff_us = 0;
        continue;
      }
      front = pending_.front();
    }
    cudaError_t q = cudaEventQuery(front.event);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty() || pending_.front().event != front.event) continue;  // failed meanwhile
      if (q == cudaSuccess) pending_.pop_front();
    }
    if (q == cudaSuccess) {
      cudaEventDestroy(front.event);
      front.work->finish();
      backoff_us = 0;
      continue;
    }
    std::exception_ptr error;
    const ncclResult_t async = q == cudaErrorNotReady ? async_error() : ncclSuccess;
    if (q != cudaErrorNotReady) {
      cudaGetLastError();
      error = std::make_exception_ptr(
          BackendError(front.what + ": CUDA: " + cudaGetErrorString(q), __FILE__, __LINE__));
    } else if (async != ncclSuccess) {
      error = nccl_error(front.what, async);
    } else if (Clock::now() >= front.deadline) {
      error = std::make_exception_ptr(TimeoutError(front.what + ": did not complete within " +
                                                       std::to_string(front.timeout.count()) +
                                                       " ms (NCCL cannot say which ranks are missing); the "
                                                       "communicator was aborted, rebuild the group",
                                                   __FILE__, __LINE__));
    }
    if (error) {
      fail_all(error);
      continue;
    }
    backoff_us = std::min(std::max(backoff_us * 2, 20), 1000);
  }
}

ncclResult_t NcclProcessGroup::async_error() const {
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
    return async;
  std::vector<const NcclClique*> cliques;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : cliques_) cliques.push_back(c.get());
  }
  for (const NcclClique* c : cliques) {
    async = c->async_error();
    if (async != ncclSuccess && async != ncclInProgress) return async;
  }
  return ncclSuccess;
}

WorkPtr NcclProcessGroup::submit(const char* name, Millis timeout, bool local, const Launch& launch,
                                 const std::string& detail) {
  std::lock_guard<std::mutex> issue(issue_mu_);
  const uint64_t seq = next_seq_++;
  Pending p;
  p.what = detail::str("nccl ", name, " #", seq, " in group '", name_, "' (rank ", rank(), "/", size(), ")",
                       detail);
  p.work = std::make_shared<Work>(p.what);
  p.timeout = timeout;  // resolved by ProcessGroup
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      p.work->finish(broken_);
      return p.work;
    }
  }
  if (local) {
    p.work->finish();
    return p.work;
  }
  try {
    const Deadline deadline(p.timeout);
    check_cuda(cudaSetDevice(device_), p.what + ": cudaSetDevice");
    // The op reads what the caller queued on the legacy default stream: wait for it.
    check_cuda(cudaEventRecord(caller_ready_, nullptr), p.what + ": cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, caller_ready_, 0), p.what + ": cudaStreamWaitEvent");
    launch(stream_, deadline);
    check_cuda(cudaEventCreateWithFlags(&p.event, cudaEventDisableTiming), p.what + ": cudaEventCreate");
    check_cuda(cudaEventRecord(p.event, stream_), p.what + ": cudaEventRecord");
  } catch (...) {
    auto error = std::current_exception();
    if (p.event != nullptr) cudaEventDestroy(p.event);
    fail_all(error);
    p.work->finish(error);
    return p.work;
  }
  p.deadline = Clock::now() + p.timeout;
  WorkPtr work = p.work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(p));
  }
  cv_.notify_all();
  return work;
}

}  // namespace ddp::comm::nccl_backend

namespace ddp::comm {

ProcessGroupPtr make_nccl_group(const GroupSetup& setup) {
  return std::make_shared<nccl_backend::NcclProcessGroup>(setup);
}

}  // namespace ddp::comm
