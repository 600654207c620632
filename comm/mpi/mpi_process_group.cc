#include "comm/mpi/mpi_process_group.h"

#include <bit>
#include <climits>
#include <functional>

#include "comm/mpi/mpi_eager_limit.h"
#include "comm/mpi/mpi_p2p_allreduce.h"
#include "comm/mpi/mpi_types.h"
#include "common/error.h"
#include "common/settings.h"

// How the group meets MPI and runs its ops (the contract: mpi_process_group.h).
// - Every rank of the job must be an MPI process: start it with `mpirun -np <world>`; the
//   world group's ranks are the setup's ranks (MPI_Comm_split keyed by them, so they may differ
//   from MPI_COMM_WORLD's), and a subgroup is MPI_Comm_create_group over setup.global_ranks
//   (collective over its members only). Under ddp-launch under mpirun the worker takes its
//   launcher's MPI identity, so only one worker per launcher (RANK == OMPI_COMM_WORLD_RANK)
//   is supported; anything else is a BackendError before MPI is touched.

// - Ops are MPI calls run by the process's MPI thread (mpi_runtime.h), in issue order; Works
//   complete in issue order. An all_reduce of at most DDP_MPI_P2P_BYTES (default: every size
//   in a power-of-two group, 64 KiB in others; 0: none) is our own point-to-point rounds
//   (mpi_p2p_allreduce.h) instead of MPI's all_reduce; any other collective of at most
//   DDP_MPI_CALLER_BYTES (default 2048; 0: none) is MPI's nonblocking call (both the same on
//   every rank). Either starts on the caller's thread when the MPI thread is idle
//   (MpiRuntime::run_here): a small op then costs no hand-off to that thread. The world
//   group's other collectives are MPI's blocking calls (its tuned algorithms), other groups'
//   and every send/recv are nonblocking calls completed by MPI_Test
//   (DDP_MPI_COLLECTIVES=nonblocking makes the world's nonblocking too). AVG = SUM then divide;
//   float16/bfloat16 reduce through user-defined MPI_Ops (ours: the shared kernels).

// - Errors: MPI error codes are BackendErrors naming the op and sequence number (the group's
//   communicator returns errors instead of aborting); a deadline passing is a TimeoutError
//   and breaks the group (a point-to-point all_reduce cancels its receives: a late peer may
//   still complete it, or time out itself). A dead peer is the MPI runtime's business: Open MPI
//   ends the job.
// - abort(reason): every later op fails at once with Aborted naming it and the reason. MPI
//   cannot cancel a collective it already runs (nor would the runtime let its buffers go), so
//   ops posted before the abort end as they would have: when their peers take part, or at
//   their deadline (a blocking call's by the watchdog, mpi_watchdog.h), TimeoutError. MPI_Abort
//   is never called (it would end the whole job).
// - Zero-length ops complete at once; CUDA buffers are an InvalidArgument. The store is not
//   used (MPI wires itself up).

namespace ddp::comm::mpi_backend {
namespace {

void check_rc(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) DDP_THROW(BackendError, what, ": ", mpi_error_string(rc));
}

// A worker of ddp-launch run under mpirun inherits its launcher's MPI identity: usable only
// when that identity is its own (one worker per launcher). Checked before MPI_Init.
void check_launch_environment(const GroupSetup& setup) {
  auto as_int = [](std::optional<std::string> v) -> std::optional<int64_t> {
    if (!v) return std::nullopt;
    try {
      return std::stoll(*v);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  auto ompi_size = as_int(settings::get("OMPI_COMM_WORLD_SIZE"));
  if (!ompi_size) return;
  bool under_launcher = settings::get(settings::kRunId) || settings::get(settings::kTorchelasticRunId);
  auto world = settings::get_int(settings::kWorldSize);
  auto rank = settings::get_int(settings::kRank);
  auto ompi_rank = as_int(settings::get("OMPI_COMM_WORLD_RANK"));
  if (under_launcher && ((world && *world != *ompi_size) || (rank && ompi_rank && *rank != *ompi_rank))) {
    DDP_THROW(
        BackendError, "mpi group '", setup.name,
        "': this worker runs under ddp-launch under mpirun (MPI world of ", *ompi_size, " launchers, job of ",
        world.value_or(-1),
        " workers); the mpi backend needs every worker to be an MPI rank: start the workers with mpirun "
        "directly, or use the tcp, gloo or nccl backend under ddp-launch");
  }
}

// The world group runs its collectives as MPI's blocking calls (its tuned algorithms, faster
// than its nonblocking ones in Open MPI) unless DDP_MPI_COLLECTIVES=nonblocking;
// every other group runs them nonblocking (so two groups never wait on each other). Decided
// from the name and the environment only: the same on every rank, as MPI needs.
enum class CollectivesSetting { kBlocking, kNonblocking };  // DDP_MPI_COLLECTIVES' choices, in order
static_assert(settings::choices_are(settings::kMpiCollectives, "blocking|nonblocking"));
bool blocking_collectives(const GroupSetup& s) {
  return settings::choice_as<CollectivesSetting>(settings::kMpiCollectives) ==
             CollectivesSetting::kBlocking &&
         s.name == "world";
}

// The collectives small enough for MpiRuntime::run_here (settings::kMpiCallerBytes). Below Open
// MPI's shared-memory eager limit its nonblocking algorithms cost less than a thread hand-off;
// past it the nonblocking call waits for a rendezvous: half the limit leaves room.
size_t caller_bytes() { return static_cast<size_t>(settings::int_value(settings::kMpiCallerBytes)); }

// The all_reduces run as our own point-to-point rounds (mpi_p2p_allreduce.h) instead of MPI's
// all_reduce, starting on the caller's thread when they can (settings::kMpiP2pBytes; at most
// INT_MAX, its messages being MPI counts of bytes). Default: every size in a group of a power of
// two ranks, where large buffers halve; 64 KiB in others, where halving first folds the extra
// ranks' whole buffers in and out (docs/backends.md).
size_t p2p_bytes(int size) {
  const bool pow2 = std::has_single_bit(static_cast<unsigned>(size));
  return static_cast<size_t>(settings::int_or(settings::kMpiP2pBytes, pow2 ? INT_MAX : 65536));
}

// Our all_reduce rounds halve and double (Rabenseifner) from this many bytes up, below it double
// (each round the whole buffer): settings::kMpiHalvingBytes, where the two measured even.
size_t halving_bytes() { return static_cast<size_t>(settings::int_value(settings::kMpiHalvingBytes)); }

bool is_identity(const GroupSetup& s) {
  for (size_t i = 0; i < s.global_ranks.size(); ++i) {
    if (s.global_ranks[i] != static_cast<int>(i)) return false;
  }
  return true;
}

// Runs on the MPI thread: the group's communicator, its ranks in the setup's order.
MPI_Comm make_comm(MpiRuntime& rt, const GroupSetup& s) {
  const std::string what =
      "mpi group '" + s.name + "' (rank " + std::to_string(s.rank) + "/" + std::to_string(s.size) + ")";
  MPI_Comm comm = MPI_COMM_NULL;
  if (is_identity(s) && s.size == rt.world_size()) {
    // Every MPI rank builds the world: split keyed by our rank makes MPI ranks follow ours.
    check_rc(MPI_Comm_split(MPI_COMM_WORLD, 0, s.rank, &comm), what + ": MPI_Comm_split");
    if (rt.world_comm() == MPI_COMM_WORLD) {
      MPI_Comm world = MPI_COMM_NULL;
      check_rc(MPI_Comm_dup(comm, &world), what + ": MPI_Comm_dup");
      rt.set_world_comm(world);
    }
  } else {
    MPI_Comm parent = rt.world_comm();
    int parent_size = 0;
    MPI_Comm_size(parent, &parent_size);
    for (int g : s.global_ranks) {
      if (g < 0 || g >= parent_size) {
        DDP_THROW(BackendError, what, ": world rank ", g, " is not an MPI rank (MPI world of ", parent_size,
                  "; start every rank with mpirun -np <world>)");
      }
    }
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm_group(parent, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(s.global_ranks.size()), s.global_ranks.data(), &group);
    const int tag = static_cast<int>(std::hash<std::string>{}(s.name) % 30000);
    int rc = MPI_Comm_create_group(parent, group, tag, &comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    check_rc(rc, what + ": MPI_Comm_create_group");
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = -1, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank != s.rank || size != s.size) {
    MPI_Comm_free(&comm);
    DDP_THROW(BackendError, what, ": MPI made this rank ", rank, " of ", size,
              " (start exactly one MPI process per rank: mpirun -np <world>)");
  }
  return comm;
}

}  // namespace

MpiProcessGroup::MpiProcessGroup(const GroupSetup& setup)
    : ProcessGroup(setup.rank, setup.size, setup.options),
      runtime_((check_launch_environment(setup), MpiRuntime::instance())),
      name_(setup.name) {
  if (setup.size > runtime_.world_size()) {
    DDP_THROW(BackendError, "mpi group '", setup.name, "' of ", setup.size, " ranks, but the MPI world has ",
              runtime_.world_size(), " process(es): start every rank with mpirun -np ", setup.size);
  }
  GroupSetup s = setup;
  if (s.global_ranks.empty()) {
    for (int r = 0; r < s.size; ++r) s.global_ranks.push_back(r);
  }
  MpiRuntime& rt = runtime_;
  settings::check(settings::Section::kMpi);  // before MPI is touched: a bad variable leaks nothing
  const bool blocking = blocking_collectives(setup);
  caller_bytes_ = caller_bytes();
  p2p_bytes_ = p2p_bytes(s.size);
  halving_bytes_ = halving_bytes();
  p2p_scratch_ = std::make_shared<P2pScratchPool>();
  where_ = detail::str(" in group '", name_, "' (rank ", rank(), "/", size(), ")");
  comm_ = runtime_.call([&rt, &s] { return make_comm(rt, s); });
  p2p_comm_ = runtime_.call([this] {
    MPI_Comm dup = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(comm_, &dup);
    // The eager piece every rank uses: the smallest any rank reads (libraries could differ).
    unsigned long piece = eager_piece_bytes(mpi_eager_limit());
    if (rc == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
      rc = MPI_Allreduce(MPI_IN_PLACE, &piece, 1, MPI_UNSIGNED_LONG, MPI_MIN, dup);
    }
    if (rc != MPI_SUCCESS) {  // nothing of the group's is left behind
      if (dup != MPI_COMM_NULL) MPI_Comm_free(&dup);
      MPI_Comm_free(&comm_);
      check_rc(rc,
               "mpi group '" + name_ + "': its point-to-point communicator (MPI_Comm_dup, MPI_Allreduce)");
    }
    eager_piece_ = piece;
    return dup;
  });
  channel_ = runtime_.open_channel(blocking);
}

MpiProcessGroup::~MpiProcessGroup() {
  MPI_Comm comm = comm_;
  MPI_Comm p2p = p2p_comm_;
  try {
    // Freed on the MPI thread once the group's ops are done (never, if one timed out).
    runtime_.close_channel(channel_, [comm, p2p]() mutable {
      MPI_Comm_free(&p2p);
      MPI_Comm_free(&comm);
    });
  } catch (...) {
  }
}

// Later ops only: see the header (ops MPI already runs cannot be cancelled).
void MpiProcessGroup::do_abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  aborted_ = reason;
}

void MpiProcessGroup::check_device(const char* op, const Buffer& b) const {
  ProcessGroup::check_device(op, b);
  if (b.count > static_cast<size_t>(INT_MAX)) {
    DDP_THROW(InvalidArgument, "mpi ", op, ": ", b.count, " elements exceed MPI's int count (", INT_MAX, ")");
  }
}

int MpiProcessGroup::mpi_tag(const char* op, int tag) const {
  // Our tags may be negative (library-reserved); MPI's are 0..MPI_TAG_UB: fold the halves.
  const int half = runtime_.tag_ub() / 2;
  if (tag >= half || tag < -half) {
    DDP_THROW(InvalidArgument, "mpi ", op, ": tag ", tag, " is outside [", -half, ", ", half, ")");
  }
  return tag >= 0 ? tag : runtime_.tag_ub() + tag + 1;
}

MpiProcessGroup::Spec MpiProcessGroup::collective(const char* name, Millis timeout,
                                                  const std::optional<Buffer>& share) {
  Spec s;
  s.name = name;
  s.timeout = timeout;
  s.local = share && share->count == 0;
  s.bytes = share ? share->bytes() : 0;
  return s;
}

MpiProcessGroup::Spec MpiProcessGroup::p2p(const char* name, Millis timeout, const Buffer& buf,
                                           std::string detail) {
  Spec s;
  s.name = name;
  s.timeout = timeout;
  s.local = buf.count == 0;
  s.bytes = buf.bytes();
  s.detail = std::move(detail);
  s.cancellable = true;
  return s;
}

WorkPtr MpiProcessGroup::submit(const Spec& spec, Start start, std::function<void()> done) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  const uint64_t seq = next_seq_++;
  // Every op names itself (errors, Work's description): appended pieces, not a stream, since a
  // small op takes about a microsecond in all; and only when its Work is made: a small op that
  // finishes on the caller's thread needs none (run_here).
  auto make_work = [&]() -> WorkPtr {
    std::string what;
    what.reserve(32 + where_.size() + spec.detail.size());
    what.append("mpi ")
        .append(spec.name)
        .append(" #")
        .append(std::to_string(seq))
        .append(where_)
        .append(spec.detail);
    return std::make_shared<MpiWork>(runtime_, std::move(what));
  };
  if (spec.local || aborted_) {
    WorkPtr work = make_work();
    if (aborted_) {
      work->finish(std::make_exception_ptr(
          Aborted(work->description() + ": aborted: " + *aborted_, __FILE__, __LINE__)));
    } else {
      work->finish();
    }
    return work;
  }
  MpiOp op;
  op.timeout = spec.timeout;  // resolved by ProcessGroup
  if (spec.p2p_all_reduce) {
    P2pAllReduceSpec steps = *spec.p2p_all_reduce;
    steps.comm = p2p_comm_;
    steps.first_tag = static_cast<int>(next_p2p_op_++ % kP2pTagSlots) * kP2pTagsPerOp;
    steps.piece_bytes = eager_piece_;
    steps.halving_bytes = halving_bytes_;
    // The group's last one when that one ran start to end on a caller's thread (under
    // issue_mu_, as this does): nothing else ever held it. One the MPI thread had is not
    // given back (its release would not be ordered before this thread's reuse). Moved, not
    // copied: a copy and its release are two locked instructions per op.
    if (p2p_spare_) {
      p2p_spare_->reset(steps);
    } else {
      p2p_spare_ = std::make_shared<P2pAllReduce>(steps, p2p_scratch_);
    }
    op.steps = std::move(p2p_spare_);
  } else {
    MPI_Comm comm = comm_;
    op.start = [comm, start = std::move(start)](MPI_Request* req) { return start(comm, req); };
  }
  op.done = std::move(done);
  op.cancellable = spec.cancellable;
  const bool small =
      spec.p2p_all_reduce || (!spec.cancellable && caller_bytes_ > 0 && spec.bytes <= caller_bytes_);
  // Every collective has a blocking form; send/recv, and small collectives, stay nonblocking.
  op.can_block = !spec.cancellable && !small;
  if (small) {
    if (WorkPtr work = runtime_.run_here(channel_, op, make_work)) {
      if (op.steps) p2p_spare_ = std::static_pointer_cast<P2pAllReduce>(std::move(op.steps));
      return work;
    }
  }
  op.work = make_work();
  WorkPtr work = op.work;
  runtime_.post(channel_, std::move(op));
  return work;
}

}  // namespace ddp::comm::mpi_backend

namespace ddp::comm {

ProcessGroupPtr make_mpi_group(const GroupSetup& setup) {
  return std::make_shared<mpi_backend::MpiProcessGroup>(setup);
}

}  // namespace ddp::comm
