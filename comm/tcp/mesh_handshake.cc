#include "comm/tcp/mesh_handshake.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/socket.h"

namespace ddp::comm::tcp {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'T', 'C', 'P', '0', '2'};
constexpr size_t kHelloFixed = sizeof(kMagic) + 12;  // magic, rank, size, group length
constexpr size_t kChallengeSize = auth::kNonceSize + auth::kDigestSize;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

template <typename A>
void put(std::string& out, const A& a) {
  out.append(reinterpret_cast<const char*>(a.data()), a.size());
}

template <typename A>
A take(const char* p) {
  A a{};
  std::memcpy(a.data(), p, a.size());
  return a;
}

std::string verdict(uint32_t status, const std::string& message) {
  std::string out;
  put_u32(out, status);
  put_u32(out, static_cast<uint32_t>(message.size()));
  return out + message;
}

}  // namespace

void connect_handshake(int fd, const HandshakeIdentity& o, int peer, const Deadline& deadline) {
  const std::string what =
      detail::str("tcp backend: handshake with rank ", peer, " of group '", o.group, "'");
  const auth::Nonce nonce = auth::random_nonce();
  std::string hello(kMagic, sizeof(kMagic));
  put_u32(hello, static_cast<uint32_t>(o.rank));
  put_u32(hello, static_cast<uint32_t>(o.size));
  put_u32(hello, static_cast<uint32_t>(o.group.size()));
  hello += o.group;
  put(hello, nonce);
  net::send_all(fd, hello.data(), hello.size(), deadline, what);
  char challenge[kChallengeSize];
  net::recv_all(fd, challenge, sizeof(challenge), deadline, what);
  const auto acceptor_nonce = take<auth::Nonce>(challenge);
  const auto proof = take<auth::Digest>(challenge + auth::kNonceSize);
  if (!auth::equal(proof, auth::prove(o.job_token, kAcceptorLabel, nonce, acceptor_nonce))) {
    DDP_THROW(
        NetworkError, what, ": rank ", peer,
        " could not prove it holds this job token (the job tokens differ, or another program listens on "
        "its port); the connection was refused");
  }
  std::string mine;
  put(mine, auth::prove(o.job_token, kConnectorLabel, nonce, acceptor_nonce));
  net::send_all(fd, mine.data(), mine.size(), deadline, what);
  char head[8];
  net::recv_all(fd, head, sizeof(head), deadline, what);
  const uint32_t status = get_u32(head), len = get_u32(head + 4);
  if (len > kMaxGroupName) DDP_THROW(NetworkError, what, ": malformed verdict from rank ", peer);
  std::string message(len, '\0');
  if (len) net::recv_all(fd, message.data(), len, deadline, what);
  if (status != 0) DDP_THROW(NetworkError, what, ": rank ", peer, " refused the connection: ", message);
}

AcceptorHandshake::AcceptorHandshake(const HandshakeIdentity& self, const std::vector<bool>* have)
    : self_(self), have_(have) {}

size_t AcceptorHandshake::wanted() const {
  switch (state_) {
    case State::kHello:
      return (buf_.size() < kHelloFixed ? kHelloFixed : kHelloFixed + group_len_ + auth::kNonceSize) -
             buf_.size();
    case State::kProof: return auth::kDigestSize - buf_.size();
    default: return 0;
  }
}

std::string AcceptorHandshake::feed(const uint8_t* data, size_t size) {
  if (size > wanted())
    DDP_THROW(InvalidArgument, "tcp backend handshake: fed ", size, " bytes, wanted ", wanted());
  buf_.append(reinterpret_cast<const char*>(data), size);
  if (state_ == State::kHello && buf_.size() == kHelloFixed) {
    if (std::memcmp(buf_.data(), kMagic, sizeof(kMagic)) != 0) {
      DDP_THROW(InvalidArgument, "tcp backend handshake: not a ddp tcp hello (version 2)");
    }
    group_len_ = get_u32(buf_.data() + 16);
    if (group_len_ > kMaxGroupName) {
      DDP_THROW(InvalidArgument, "tcp backend handshake: group name of ", group_len_, " bytes exceeds ",
                kMaxGroupName);
    }
  }
  if (wanted() > 0) return {};
  return state_ == State::kHello ? on_hello() : on_proof();
}

std::string AcceptorHandshake::on_hello() {
  peer_rank_ = static_cast<int>(get_u32(buf_.data() + 8));
  peer_size_ = static_cast<int>(get_u32(buf_.data() + 12));
  peer_group_ = buf_.substr(kHelloFixed, group_len_);
  connector_nonce_ = take<auth::Nonce>(buf_.data() + kHelloFixed + group_len_);
  acceptor_nonce_ = auth::random_nonce();
  buf_.clear();
  state_ = State::kProof;
  std::string out;
  put(out, acceptor_nonce_);
  put(out, auth::prove(self_.job_token, kAcceptorLabel, connector_nonce_, acceptor_nonce_));
  return out;
}

std::string AcceptorHandshake::on_proof() {
  const auto proof = take<auth::Digest>(buf_.data());
  buf_.clear();
  if (!auth::equal(proof, auth::prove(self_.job_token, kConnectorLabel, connector_nonce_, acceptor_nonce_))) {
    refusal_ = "job token does not match";
  } else if (peer_group_ != self_.group || peer_size_ != self_.size) {
    refusal_ = detail::str("peer belongs to group '", peer_group_, "' of size ", peer_size_, ", expected '",
                           self_.group, "' of size ", self_.size);
  } else if (peer_rank_ <= self_.rank || peer_rank_ >= self_.size || (have_ && (*have_)[peer_rank_])) {
    refusal_ = detail::str("unexpected rank ", peer_rank_);
  }
  state_ = refusal_.empty() ? State::kAccepted : State::kRefused;
  return verdict(refusal_.empty() ? 0 : 1, refusal_);
}

}  // namespace ddp::comm::tcp
