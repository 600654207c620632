// init_probe URL: a worker started without ddp-launch. Joins through
// ddp::init_process_group({.init_method = URL}), all_reduces its rank + 1, prints
// "rank R of N: sum S" and leaves; exits 1 with the error otherwise.
#include <cstdio>

#include "comm/init.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: init_probe INIT_METHOD\n");
    return 2;
  }
  try {
    ddp::InitOptions o;
    o.init_method = argv[1];
    auto pg = ddp::init_process_group(o);
    float x = static_cast<float>(pg->rank() + 1);
    pg->all_reduce(ddp::comm::view(&x, 1))->wait();
    std::printf("rank %d of %d: sum %g\n", pg->rank(), pg->size(), static_cast<double>(x));
    ddp::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "init_probe: %s\n", e.what());
    return 1;
  }
}
