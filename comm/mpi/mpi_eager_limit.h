#pragma once
// The largest message the MPI library sends eagerly (in one go, without a rendezvous), read
// from the library rather than assumed: Open MPI's MCA variables through the MPI tool
// interface (MPI_T), btl_vader_eager_limit within a host and btl_tcp_eager_limit across hosts,
// the smaller of those it has. 0 when unknown (another MPI, no such variable, MPI_T refused).
// Call on the MPI thread, after MPI_Init.
//
// Why it matters (mpi_p2p_allreduce.h): a message just past the limit waits for a rendezvous,
// which costs several times what two eager halves do, so the point-to-point all_reduce sends a
// message that is a few pieces past the limit as eager pieces.
#include <cstddef>

namespace ddp::comm::mpi_backend {

size_t mpi_eager_limit();

// Bytes of an eager piece under a limit: the limit less the library's header allowance (Open
// MPI's shared-memory eager limit counts its 56-byte match header), in 64-byte units; 0 when
// the limit is unknown or too small to matter.
size_t eager_piece_bytes(size_t eager_limit);

}  // namespace ddp::comm::mpi_backend
