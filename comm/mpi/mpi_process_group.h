#pragma once
// MpiProcessGroup: the ProcessGroup contract over MPI (make_mpi_group in comm/backend.h).
// Every rank must be an MPI process (`mpirun -np <world>`; under ddp-launch, one worker per
// launcher, else a BackendError before MPI is touched). Ops run on the process's MPI thread
// (mpi_runtime.h) in issue order and their Works complete in issue order; small ops may start
// on the caller's thread (DDP_MPI_P2P_BYTES, DDP_MPI_CALLER_BYTES). MPI error codes are
// BackendErrors naming the op and sequence number; a passed deadline is a TimeoutError that
// breaks the group; a dead peer is the MPI runtime's (Open MPI ends the job). abort(reason)
// fails every later op at once; MPI_Abort is never called. Zero-length ops complete at once;
// CUDA buffers are an InvalidArgument; the store is not used. How: mpi_process_group.cc.
#include <mpi.h>

#include <mutex>
#include <optional>
#include <string>

#include "comm/backend.h"
#include "comm/mpi/mpi_p2p_allreduce.h"
#include "comm/mpi/mpi_runtime.h"

namespace ddp::comm::mpi_backend {

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(const GroupSetup& setup);
  ~MpiProcessGroup() override;

  std::string backend_name() const override { return "mpi"; }

 protected:
  WorkPtr do_send(Buffer buf, int dst, SendOptions opts) override;
  WorkPtr do_recv(Buffer buf, int src, RecvOptions opts) override;
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions opts) override;
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions opts) override;
  WorkPtr do_reduce(Buffer buf, ReduceOptions opts) override;
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) override;
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions opts) override;
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions opts) override;
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) override;
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) override;
  WorkPtr do_barrier(BarrierOptions opts) override;
  // Host buffers whose count fits MPI's int.
  void check_device(const char* op, const Buffer& b) const override;
  void do_abort(const std::string& reason) override;

 private:
  // Makes the op's MPI call: the nonblocking one with a request, the blocking one without.
  using Start = std::function<int(MPI_Comm, MPI_Request*)>;
  struct Spec {
    const char* name = "";
    Millis timeout{0};
    bool local = false;  // nothing to move (count 0): completes at once
    size_t bytes = 0;    // each rank's share, the same on every rank: small ones may start on the caller
    std::string detail;  // appended to the op's description (send/recv: the peer and tag)
    bool cancellable = false;  // send/recv
    // Set: the op is our own point-to-point all_reduce of this (comm and tag filled in).
    std::optional<P2pAllReduceSpec> p2p_all_reduce;
  };
  // Takes the next sequence number; runs start (and done) on the calling thread (a small
  // collective while the MPI thread is idle: MpiRuntime::run_here) or posts them to the MPI
  // thread, unless `local`.
  WorkPtr submit(const Spec& spec, Start start, std::function<void()> done = {});
  // A collective whose rank's share is `share` (none: a barrier), and a send/recv.
  static Spec collective(const char* name, Millis timeout, const std::optional<Buffer>& share);
  static Spec p2p(const char* name, Millis timeout, const Buffer& buf, std::string detail);
  int mpi_tag(const char* op, int tag) const;

  MpiRuntime& runtime_;
  std::string name_;
  std::string where_;  // " in group 'name' (rank r/n)": the end of every op's description
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;  // a dup of comm_: our own point-to-point all_reduces
  uint64_t channel_ = 0;
  // Collectives of at most this many bytes are nonblocking on every rank (MPI matches blocking
  // with blocking only) and start on the caller's thread when they can (DDP_MPI_CALLER_BYTES).
  size_t caller_bytes_ = 0;
  // All_reduces of at most this many bytes are our own point-to-point rounds (DDP_MPI_P2P_BYTES).
  size_t p2p_bytes_ = 0;
  size_t halving_bytes_ = 0;  // P2pAllReduceSpec::halving_bytes
  std::mutex issue_mu_;
  uint64_t next_seq_ = 1;
  std::optional<std::string> aborted_;  // abort()'s reason; under issue_mu_
  uint64_t next_p2p_op_ = 0;            // our point-to-point all_reduces issued: their tag ranges
  // The last one when it ran start to end on a caller's thread (run_here gave it back):
  // reused by the next.
  std::shared_ptr<P2pAllReduce> p2p_spare_;
  std::shared_ptr<P2pScratchPool> p2p_scratch_;  // their heap scratch, shared by all of them
  size_t eager_piece_ = 0;                       // P2pAllReduceSpec::piece_bytes, agreed by the ranks
};

}  // namespace ddp::comm::mpi_backend
