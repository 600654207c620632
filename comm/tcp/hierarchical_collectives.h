#pragma once
// HierarchicalCollectives: the collectives of a tcp group whose ranks sit L > 1 to a host on
// H > 1 hosts, over two child tcp groups, `local` (this host's ranks: shared memory) and `cross`
// (the ranks with this rank's local index, one per host: sockets), as NCCL, Horovod and Open
// MPI's han do, so that every rank's NIC share carries 1/L of the data.
// - all_reduce: reduce_scatter within the host, all_reduce of that share across hosts, all_gather
//   within the host, in segments; up to Options::small_bytes (hierarchy_calibration.h), whole
//   within then across. Above it the way (split, overlapped, flat) is chosen while the job runs
//   (hierarchy_choice.h). Each share is summed once, in host order: every rank gets the same bits.
// - the others but all_to_all: a step across hosts and a step within (rooted ones across among
//   the ranks with the root's local index); all_to_all flat (route_within_host: hops within a host
//   in shared memory). Children's ops carry the outer op's remaining time; a child's failure is
//   the outer op's error (and breaks the outer group). Called by the group's worker only.
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/tcp/hierarchy_choice.h"
#include "comm/tcp/op.h"
#include "comm/tcp/plan.h"
#include "comm/tcp/routed_links.h"
#include "comm/tcp/socket_collectives.h"

namespace ddp::comm::tcp {

// Where each rank of a group sits: hosts ordered by their lowest rank; a rank's local index is
// its position among its host's ranks, its cross index its position among the ranks with its
// local index (both in rank order: its rank in the two child groups).
struct HostLayout {
  std::vector<int> host_of;   // rank -> host index
  std::vector<int> local_of;  // rank -> local index
  std::vector<int> cross_of;  // rank -> cross index
  int hosts = 0;
  int per_host = 0;  // 0 when hosts hold different numbers of ranks
  // From each rank's same-host key (equal keys: one host).
  static HostLayout of(const std::vector<std::string>& host_keys);
};

// A hierarchical all_reduce begun on the caller's thread (HierarchicalCollectives::start):
// the child op still in flight, and whether it is the step across hosts.
struct HierarchicalStart {
  WorkPtr child;
  bool crossing = false;
};

class TcpProcessGroup;

// The two child groups, typed as made (the hierarchy calls a tcp group's own members).
struct HierarchyChildren {
  std::shared_ptr<TcpProcessGroup> local;      // this host's ranks (shared memory)
  ProcessGroupPtr cross;                       // the ranks with this rank's local index
  std::shared_ptr<TcpProcessGroup> cross_tcp;  // `cross` when it is a tcp group; else null
};

class HierarchicalCollectives {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    HostLayout layout;
    size_t small_bytes = 64 << 10;
    // all_reduce in segments of at least this many bytes (0: one), at most max_segments
    // (pipelined_all_reduce): large enough to be several round trips (a child op's fixed cost)
    // even on fast links, small enough that buffers from 4 MiB overlap their steps.
    size_t segment_bytes = 2 << 20;
    size_t max_segments = 8;
    // Above small_bytes: the ways allowed (flat needs `flat` sockets), measured among them.
    WayPolicy ways;
  };
  HierarchicalCollectives(Options options, HierarchyChildren children, SocketCollectives* flat);

  void run(const OpContext& ctx, const Buffer& in, const Buffer& out);

  // The small all_reduce (whole, at most small_bytes: within the host, then across), and the
  // barrier (the same over a token), may start on the group's caller's thread: start() issues
  // each child op there, polling at most inline_budget each (the children's own inline paths;
  // another engine's op across hosts is issued as it is); true when both completed. Otherwise
  // `s` holds the child op in flight, and the worker calls finish(), which waits for it and
  // issues what is left.
  bool starts_here(const OpDesc& desc, const Buffer& in) const;
  bool start(const OpContext& ctx, const Buffer& buf, std::chrono::microseconds inline_budget,
             HierarchicalStart& s);
  void finish(const OpContext& ctx, const Buffer& buf, HierarchicalStart& s);

  // An all_reduce by one path whatever its size: small (whole within the host, then across) or
  // split (reduce_scatter, across, all_gather; `overlapped`: their steps overlap); and the size
  // up to which all_reduce takes the small one (hierarchy_calibration.h). Called by the thread
  // that runs the group's ops.
  void all_reduce_path(const OpContext& ctx, const Buffer& buf, bool small, bool overlapped = false);
  size_t small_bytes() const { return opt_.small_bytes; }
  // The ways large all_reduces may take, the first where each size starts.
  std::vector<LargeWay> large_ways() const { return opt_.ways.ways(flat_ != nullptr); }
  LargeWay large_way(size_t bytes) const { return large_.preferred(bytes); }  // in use for that size
  void set_small_bytes(size_t bytes) {
    opt_.small_bytes = bytes;
    facts_.hierarchy_small_bytes = bytes;
  }

  // Flat all_reduces and all_to_all from now on run with their
  // hops within this host through `near` (this host's ranks' links, routed_links.h) instead of
  // the group's sockets. Collective.
  void route_within_host(std::unique_ptr<ShmLinks> near);
  bool routed() const { return routed_ != nullptr; }

  const std::shared_ptr<TcpProcessGroup>& local() const { return children_.local; }
  const ProcessGroupPtr& cross() const { return children_.cross; }

 private:
  void all_reduce(const OpContext& ctx, const Buffer& buf);
  void flat_all_reduce(const OpContext& ctx, const Buffer& buf);
  void flat_op(const OpContext& ctx, const Buffer& in, const Buffer& out);
  // After a probe of the other way for ops of `bytes`: every rank's figures summed by the
  // small path, and the way agreed (PathChooser).
  void agree_on_way(const OpContext& ctx, size_t bytes);
  // The step across hosts of a small all_reduce started here, and its end (AVG's division).
  bool start_crossing(const OpContext& ctx, const Buffer& buf, std::chrono::microseconds inline_budget,
                      HierarchicalStart& s);
  void end_small(const OpContext& ctx, const Buffer& buf) const;
  void run_small(const OpContext& ctx, const Buffer& buf);  // both steps, on this thread
  // The buffer of a small all_reduce: the op's own, or a barrier's token.
  Buffer small_buffer(const OpContext& ctx, const Buffer& buf);
  // A pipelined all_reduce's segments: each one's part of the body, and its share of it.
  struct Segment {
    Buffer body, share;
  };
  void pipelined_all_reduce(const OpContext& ctx, const Buffer& body, ReduceOp op, bool overlapped);
  // Step k of every segment, done on one thread and awaited on the other (overlapped_all_reduce).
  class Handoff {
   public:
    explicit Handoff(size_t steps);
    void done(size_t k) { done_[k].set_value(); }
    void fail_from(size_t k, const std::exception_ptr& error);  // steps k and after
    void wait(size_t k) { ready_[k].get(); }                    // rethrows a step's error
   private:
    std::vector<std::promise<void>> done_;
    std::vector<std::future<void>> ready_;
  };
  void overlapped_all_reduce(const OpContext& ctx, const std::vector<Segment>& seg, ReduceOp op);
  std::exception_ptr local_lane(const OpContext& ctx, const std::vector<Segment>& seg, ReduceOp op,
                                Handoff& scattered, Handoff& reduced);
  size_t segments_for(size_t bytes) const;
  size_t overlap_from() const;  // the least bytes cut in more than one segment
  void broadcast(const OpContext& ctx, const Buffer& buf);
  void reduce(const OpContext& ctx, const Buffer& buf);
  void gather(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  size_t leader_block(int rank, int leader_local) const;  // O(1), through cross_at_
  static std::vector<int> cross_at(const HostLayout& l);
  void barrier(const OpContext& ctx);
  void all_gather(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void reduce_scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  size_t block(int rank) const;
  std::vector<char>& scratch(size_t bytes);

  Algorithm algorithm(const OpDesc& d, const Buffer& in) const;  // plan()'s

  Options opt_;
  GroupFacts facts_;  // plan()'s: from opt_
  HierarchyChildren children_;
  TcpProcessGroup& local_;  // children_'s, by their usual names
  ProcessGroup& cross_;
  SocketCollectives* flat_;
  std::unique_ptr<RoutedLinks> routed_;  // route_within_host's
  ByteScratch byte_scratch_;             // the flat all_reduces' over routed_
  PathChooser large_;
  std::vector<char> scratch_;  // shares, arranged blocks (kept between ops)
  int32_t barrier_token_ = 0;  // a barrier's all_reduce (one op at a time: the group's)
  std::vector<int> cross_at_;  // cross_at(opt_.layout)
};

}  // namespace ddp::comm::tcp
