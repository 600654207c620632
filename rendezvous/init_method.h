#pragma once
// Init-method URLs, parsed in one place (init_process_group, the launcher, the tools):
//   env://                                  rank, size and store from the environment
//   file:///abs/path[?rank=R&world_size=N]   a FileStore at /abs/path
//   tcp://host:port[?rank=R&world_size=N]    a TCPStore at host:port ([v6]:port for IPv6)
//   tcp://group:port?world_size=N&group_name=NAME[&rank=R&ttl=T&interface=IF&timeout=S]
//                                           IP multicast discovery (224.0.0.0/4, ff00::/8; IPv6
//                                           in brackets): see multicast_rendezvous.h
// Unknown query parameters are kept in `params` for the caller. Every error is an
// InvalidArgument that quotes the URL and says what is wrong with it.
#include <map>
#include <optional>
#include <string>

namespace ddp::rdzv {

enum class InitScheme { kEnv, kFile, kTcp };

struct InitMethod {
  InitScheme scheme = InitScheme::kEnv;
  std::string url;    // as given
  std::string host;   // tcp: host name or IP literal (IPv6 without brackets)
  uint16_t port = 0;  // tcp
  std::string path;   // file: absolute path (percent-decoded)
  std::optional<int> rank;
  std::optional<int> world_size;
  std::map<std::string, std::string> params;  // every query parameter, rank/world_size included
  // tcp:// to a multicast group: discovery instead of a store at host:port.
  bool multicast = false;
  std::string group_name = "default";  // ?group_name=: jobs with different names never mix
  int ttl = 1;                         // ?ttl=: 1..255
  std::string interface;               // ?interface=: name or IPv4 address; empty: the kernel's choice
  std::optional<int> timeout_s;        // ?timeout=: seconds to wait for every participant
};

InitMethod parse_init_method(const std::string& url);

// True for IPv4 224.0.0.0/4 and IPv6 ff00::/8 literals.
bool is_multicast_address(const std::string& host);

}  // namespace ddp::rdzv
