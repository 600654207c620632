#include "rendezvous/init_method.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "common/error.h"
#include "common/socket.h"

namespace ddp::rdzv {
namespace {

[[noreturn]] void bad(const std::string& url, const std::string& why) {
  DDP_THROW(InvalidArgument, "init method '", url, "': ", why);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(const std::string& url, const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) bad(url, "bad percent escape in '" + s + "'");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

int parse_int_param(const std::string& url, const std::string& name, const std::string& text, int min) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    bad(url, name + "='" + text + "' is not an integer");
  }
  if (v < min) bad(url, name + "=" + text + " must be >= " + std::to_string(min));
  return v;
}

void parse_query(const std::string& url, const std::string& query, InitMethod* m) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string item = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    start = amp == std::string::npos ? query.size() + 1 : amp + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) bad(url, "query item '" + item + "' is not name=value");
    std::string name = percent_decode(url, item.substr(0, eq));
    std::string value = percent_decode(url, item.substr(eq + 1));
    if (m->params.count(name)) bad(url, "query parameter '" + name + "' given twice");
    m->params[name] = value;
  }
  if (auto it = m->params.find("rank"); it != m->params.end())
    m->rank = parse_int_param(url, "rank", it->second, 0);
  if (auto it = m->params.find("world_size"); it != m->params.end()) {
    m->world_size = parse_int_param(url, "world_size", it->second, 1);
  }
  if (m->rank && m->world_size && *m->rank >= *m->world_size) {
    bad(url,
        "rank " + std::to_string(*m->rank) + " is not below world_size " + std::to_string(*m->world_size));
  }
}

void parse_tcp(const std::string& url, const std::string& authority, InitMethod* m) {
  if (authority.empty()) bad(url, "missing host:port after tcp://");
  if (authority.find('@') != std::string::npos) bad(url, "user info is not supported");
  net::Endpoint ep;
  try {
    ep = net::parse_endpoint(authority);
  } catch (const InvalidArgument& e) {
    bad(url, e.message());
  }
  bool bracketed = authority[0] == '[';
  size_t colons = std::count(authority.begin(), authority.end(), ':');
  if (!bracketed && colons > 1) bad(url, "IPv6 addresses need brackets: tcp://[addr]:port");
  bool has_port = bracketed ? authority.find("]:") != std::string::npos : colons == 1;
  if (!has_port) bad(url, "missing port (tcp://host:port)");
  if (ep.port == 0) bad(url, "port 0 is not a port a peer can reach");
  m->host = ep.host;
  m->port = ep.port;
  if (!is_multicast_address(ep.host)) return;
  m->multicast = true;
  if (auto it = m->params.find("group_name"); it != m->params.end()) {
    if (it->second.empty() || it->second.size() > 255) bad(url, "group_name must have 1 to 255 characters");
    m->group_name = it->second;
  }
  if (auto it = m->params.find("ttl"); it != m->params.end()) {
    m->ttl = parse_int_param(url, "ttl", it->second, 1);
    if (m->ttl > 255) bad(url, "ttl=" + it->second + " must be <= 255");
  }
  if (auto it = m->params.find("interface"); it != m->params.end()) m->interface = it->second;
  if (auto it = m->params.find("timeout"); it != m->params.end())
    m->timeout_s = parse_int_param(url, "timeout", it->second, 1);
}

}  // namespace

bool is_multicast_address(const std::string& host) {
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 28) == 0xE;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return v6.s6_addr[0] == 0xff;
  return false;
}

InitMethod parse_init_method(const std::string& url) {
  InitMethod m;
  m.url = url;
  size_t sep = url.find("://");
  if (sep == std::string::npos) bad(url, "expected scheme://... (env://, file:///path or tcp://host:port)");
  std::string scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  size_t q = rest.find('?');
  std::string body = rest.substr(0, q);
  if (q != std::string::npos) parse_query(url, rest.substr(q + 1), &m);
  if (body.find('#') != std::string::npos) bad(url, "fragments ('#') are not supported");

  if (scheme == "env") {
    m.scheme = InitScheme::kEnv;
    if (!body.empty()) bad(url, "env:// takes no host or path, got '" + body + "'");
  } else if (scheme == "file") {
    m.scheme = InitScheme::kFile;
    // file:///abs/path (empty authority) or file://localhost/abs/path.
    if (body.rfind("localhost/", 0) == 0) body = body.substr(9);
    if (body.empty() || body[0] != '/') bad(url, "expected an absolute path: file:///path/to/file");
    m.path = percent_decode(url, body);
    if (m.path.back() == '/') bad(url, "the path names a directory, not a file");
  } else if (scheme == "tcp") {
    m.scheme = InitScheme::kTcp;
    if (!body.empty() && body.back() == '/') body.pop_back();
    if (body.find('/') != std::string::npos) bad(url, "tcp:// takes host:port only, no path");
    parse_tcp(url, body, &m);
  } else {
    bad(url, "unknown scheme '" + scheme + "' (expected env, file or tcp)");
  }
  return m;
}

}  // namespace ddp::rdzv
