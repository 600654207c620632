#include "ddp/host_collectives.h"

#include "ddp/device_ops.h"

namespace ddp {
namespace {

// A copy of a host view on `device`, or the view itself when `device` is the host.
struct Staged {
  Staged(const comm::Buffer& host, const comm::Device& device, bool copy_in) : host_view(host), view(host) {
    if (!device.is_cuda() || host.count == 0) return;
    memory = DeviceMemory(host.bytes(), device);
    view = memory.view(host.count, host.dtype);
    if (copy_in) copy_buffer(view, host);
  }
  void copy_out() const {
    if (view.data != host_view.data) copy_buffer(host_view, view);
  }
  comm::Buffer host_view;
  DeviceMemory memory;
  comm::Buffer view;
};

}  // namespace

void all_reduce_host(comm::ProcessGroup& group, const comm::Buffer& values, comm::ReduceOp op) {
  Staged io(values, group.buffer_device(), true);
  group.all_reduce(io.view, {op})->wait();
  io.copy_out();
}

void all_gather_host(comm::ProcessGroup& group, const comm::Buffer& input, const comm::Buffer& output) {
  const comm::Device device = group.buffer_device();
  Staged in(input, device, true), out(output, device, false);
  group.all_gather(in.view, out.view)->wait();
  out.copy_out();
}

void broadcast_host(comm::ProcessGroup& group, const comm::Buffer& values, int root) {
  Staged io(values, group.buffer_device(), group.rank() == root);
  group.broadcast(io.view, {root})->wait();
  io.copy_out();
}

}  // namespace ddp
