// The multicast rendezvous datagram decoder. A stranger's bytes cannot carry a valid MAC, so
// half the inputs are signed here first (the body the fuzzer wrote, then its correct
// HMAC-SHA256): the parser behind the MAC check is fuzzed too. Oracles: decode never crashes
// or reads past the buffer; what it accepts re-encodes and decodes to the same announcement.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/error.h"
#include "rendezvous/multicast_datagram.h"

namespace mcast = ddp::rdzv::mcast;

namespace {

constexpr std::string_view kToken = "fuzz-token";

std::vector<uint8_t> signed_body(const uint8_t* data, size_t size) {
  std::vector<uint8_t> out(data, data + size);
  std::string text = "ddp multicast rendezvous v1";
  text += '\0';
  text.append(reinterpret_cast<const char*>(data), size);
  auto mac = ddp::auth::hmac_sha256(kToken, text);
  out.insert(out.end(), mac.begin(), mac.end());
  return out;
}

bool same(const mcast::Announcement& a, const mcast::Announcement& b) {
  return a.job_id == b.job_id && a.host == b.host && a.instance == b.instance && a.seq == b.seq &&
         a.time_ms == b.time_ms && a.world == b.world && a.requested_rank == b.requested_rank &&
         a.store_port == b.store_port && a.addresses == b.addresses;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> bytes =
      (data[0] & 1) ? signed_body(data + 1, size - 1) : std::vector<uint8_t>(data + 1, data + size);
  mcast::Decoded d = mcast::decode(bytes, kToken);
  if (d.status != mcast::DecodeStatus::kOk) return 0;
  try {
    mcast::Decoded again = mcast::decode(mcast::encode(d.announcement, kToken), kToken);
    if (again.status != mcast::DecodeStatus::kOk || !same(again.announcement, d.announcement))
      __builtin_trap();
  } catch (const ddp::InvalidArgument&) {
    __builtin_trap();  // decode accepted what encode refuses: the two disagree on the rules
  }
  return 0;
}
