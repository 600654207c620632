#pragma once
// Two network namespaces joined by a veth pair (netns_pair.sh: A has 10.77.0.1, B 10.77.0.2),
// removed even when the test fails; names unique per test run, leftovers of killed runs swept.
// can_use_netns(): root and iproute2 present (tests skip otherwise).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ddp::test {

inline bool can_use_netns() { return ::geteuid() == 0 && ::system("command -v ip > /dev/null 2>&1") == 0; }

class NetnsPair {
 public:
  NetnsPair() {
    static int n = 0;
    a_ = "ddpA" + std::to_string(::getpid()) + "x" + std::to_string(n);
    b_ = "ddpB" + std::to_string(::getpid()) + "x" + std::to_string(n++);
    (void)::system((script() + " sweep").c_str());
    ok_ = ::system((script() + " up " + a_ + " " + b_).c_str()) == 0;
  }
  ~NetnsPair() { (void)::system((script() + " down " + a_ + " " + b_).c_str()); }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;
  bool ok() const { return ok_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  static std::string script() {
    std::string beside = std::filesystem::path(__FILE__).parent_path().string() + "/netns_pair.sh";
    if (std::filesystem::exists(beside)) return "sh " + beside;
    const char* d = std::getenv("DDP_SOURCE_DIR");
    return "sh " + std::string(d ? d : ".") + "/tests/netns/netns_pair.sh";
  }
  std::string a_, b_;
  bool ok_ = false;
};

}  // namespace ddp::test
