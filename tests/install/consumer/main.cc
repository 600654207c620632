// An outside program built against the installed libddp: hosts a TCPStore, writes through a
// second client and a PrefixStore, reads it back; then a world of one: init_process_group, an
// all_reduce, one engine step (what a worker program does), and an exception of the library
// caught by its type. Headers as installed: <ddp/module/x.h>, nothing but <prefix>/include.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ddp/comm/init.h>
#include <ddp/common/error.h>
#include <ddp/ddp_c.h>
#include <ddp/engine.h>
#include <ddp/rendezvous/hash_store.h>
#include <ddp/rendezvous/prefix_store.h>
#include <ddp/rendezvous/tcp_store.h>

namespace {

// The shared libraries of other backends' dependencies this process has mapped.
std::string foreign_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::string out;
  for (std::string line; std::getline(maps, line);) {
    for (const char* lib : {"libmpi.so", "libgloo.so", "libnccl.so", "libcudart.so"}) {
      if (line.find(lib) != std::string::npos && out.find(lib) == std::string::npos)
        out += std::string(lib) + " ";
    }
  }
  return out;
}

}  // namespace

int run(const std::string& backend) {
  using namespace ddp::rdzv;
  TCPStoreOptions server_opts;
  server_opts.is_server = true;
  server_opts.job_token = "consumer";
  auto server = std::make_shared<TCPStore>(server_opts);
  TCPStoreOptions client_opts;
  client_opts.port = server->port();
  client_opts.job_token = "consumer";
  auto client = std::make_shared<TCPStore>(client_opts);
  PrefixStore scoped("app", client);
  scoped.set("greeting", "hello from libddp");
  HashStore local;
  local.set("n", "40");
  int64_t n = local.add("n", 2);
  std::printf("consumer: %s, %lld\n", server->get_string("app/greeting").c_str(), static_cast<long long>(n));
  if (server->get_string("app/greeting") != "hello from libddp" || n != 42) return 1;

  ddp::InitOptions init;
  init.backend = backend;
  init.rank = 0;
  init.world_size = 1;
  auto group = ddp::init_process_group(init);
  std::vector<float> x{1.0f, 2.0f};
  group->all_reduce(ddp::comm::view(x.data(), x.size()))->wait();
  std::vector<float> w{0.5f}, g{4.0f};
  {
    ddp::Engine engine(group);
    engine.register_param(
        {"w", ddp::comm::view(w.data(), w.size()), ddp::comm::view(g.data(), g.size()), {}});
    engine.finalize();
    engine.finish_backward();  // average over one rank: unchanged
  }
  // The library's exceptions cross into the program as their own types (their typeinfo is
  // exported): a second default group is an InvalidArgument.
  bool caught = false;
  try {
    ddp::init_process_group(init);
  } catch (const ddp::InvalidArgument&) {
    caught = true;
  }
  ddp::destroy_process_group();
  if (backend == "tcp" && !foreign_libraries().empty()) {
    std::printf("consumer: a tcp program loaded %s\n", foreign_libraries().c_str());
    return 1;
  }
  if (!caught) {
    std::printf("consumer: InvalidArgument did not arrive as its type\n");
    return 1;
  }
  std::printf("consumer: %s all_reduce %g %g, averaged gradient %g\n", group->backend_name().c_str(), x[0],
              x[1], g[0]);
  return x[0] == 1.0f && x[1] == 2.0f && g[0] == 4.0f ? 0 : 1;
}

// usage: consumer [backend]   (default tcp; another backend is loaded as libddp's plugin)
int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "tcp");
  } catch (const std::exception& e) {
    std::printf("consumer: error: %s\n", e.what());
    return 1;
  }
}
