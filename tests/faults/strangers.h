#pragma once
// Strangers for the fault matrix: connections a job did not ask for, to its listening ports —
// some silent (they connect and hold the connection), some sending garbage (bytes that look
// like nothing the job speaks, then a frame header announcing a huge message). They stay open
// until the Strangers object goes, so the job meets them for as long as it runs. A port that
// refuses (a listener that closed meanwhile) costs at most a second, and ends that port's visit.
// listening_ports(pid) finds a process's TCP listeners (its socket inodes, /proc/<pid>/fd,
// looked up among the LISTEN entries of /proc/net/tcp and tcp6).
#include <sys/socket.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/launch_test_util.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/socket.h"

namespace ddp::test::faults {

inline std::set<int> listening_ports(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(slurp(table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, skip, inode;
      f >> slot >> local >> remote >> state >> skip >> skip >> skip >> skip >> skip >> inode;
      const size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos && inodes.count(inode)) {
        ports.insert(static_cast<int>(std::stoul(local.substr(colon + 1), nullptr, 16)));
      }
    }
  }
  return ports;
}

class Strangers {
 public:
  // `silent` connections that say nothing and `garbage` ones that send junk, to 127.0.0.1:port.
  // Returns how many connected.
  int visit(int port, int silent, int garbage) {
    int connected = 0;
    for (int i = 0; i < silent + garbage; ++i) {
      try {
        Fd fd = net::connect_tcp({"127.0.0.1", static_cast<uint16_t>(port)}, Deadline(Millis(1000)));
        if (i >= silent) send_garbage(fd.get(), i);
        held_.push_back(std::move(fd));
        ++connected;
      } catch (const Error&) {  // the port closed meanwhile: the rest would find nobody either
        break;
      }
    }
    return connected;
  }

 private:
  static void send_garbage(int fd, int seed) {
    std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 200; ++i) junk.push_back(static_cast<char>((i * 37 + seed * 101) & 0xff));
    junk.append("\xff\xff\xff\x7f\x01\x02\x03\x04", 8);  // a length field as big as it gets
    (void)!::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  std::vector<Fd> held_;
};

}  // namespace ddp::test::faults
