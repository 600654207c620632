#pragma once
// The collectives but all_reduce (byte_all_reduce.h) and barrier, written once over a
// ByteTransport (byte_transport.h): each direct, every peer at once (broadcast and scatter
// from the root, reduce and gather to it, all_gather, reduce_scatter and all_to_all among all);
// the reductions in chunks of the transport's chunk_bytes(), each reduced as it lands.
// A reduction combines the peers' values in rank order: every rank gets the same bits. Buffers
// as ProcessGroup defines them (in place where it allows). Errors: the transport's.
#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/byte_transport.h"

namespace ddp::comm::tcp {

// `scratch`: kept between ops by the transport's owner (the reductions' incoming chunks).
void run_direct(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& in,
                const Buffer& out);

}  // namespace ddp::comm::tcp
