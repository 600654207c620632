// Inflight (mpi_runtime_state.h): one op in flight, whether it is one MPI request or steps of
// its own (MpiOp::steps), started, tested and given up the same way by the MPI thread and by a
// caller running it (run_here).
#include "comm/mpi/mpi_runtime_state.h"

namespace ddp::comm::mpi_backend {

int Inflight::begin() { return op.steps ? op.steps->start() : op.start(&request); }

int Inflight::test() {
  if (op.steps) return op.steps->test(done);
  int flag = 0;
  const int rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) request = MPI_REQUEST_NULL;  // an erroneous request is released by MPI
  done = rc == MPI_SUCCESS && flag;
  return rc;
}

void Inflight::abandon(std::vector<Zombie>& zombies) {
  if (done) return;
  if (op.steps) {
    for (MPI_Request r : op.steps->abandon()) zombies.push_back({r, op.steps});
    return;
  }
  if (request == MPI_REQUEST_NULL) return;
  if (op.cancellable) MPI_Cancel(&request);  // completes the request, cancelled
  zombies.push_back({request, nullptr});
  request = MPI_REQUEST_NULL;
}

}  // namespace ddp::comm::mpi_backend
