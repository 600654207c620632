// An outside program built against the installed libddp: hosts a TCPStore, writes through a
// second client and a PrefixStore, reads it back through a HashStore-free path, and prints it.
#include <cstdio>
#include <memory>

#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_store.h"

int main() {
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
  return server->get_string("app/greeting") == "hello from libddp" && n == 42 ? 0 : 1;
}
