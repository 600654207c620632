// etcd's v3 JSON gateway answers (rendezvous/etcd_response.h): every parser on every input, and
// base64 both ways. Anything may come back from an endpoint; the parsers must answer with a
// struct or a StoreError, never crash, hang or throw anything else. Links only the parser and
// ddp_common: no libcurl.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "rendezvous/etcd_response.h"

namespace {

void expect_store_error_or_value(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ddp::StoreError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace etcd = ddp::rdzv::etcd;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz";
  expect_store_error_or_value([&] { etcd::parse_error(text, source); });
  expect_store_error_or_value([&] { etcd::parse_range(text, source); });
  expect_store_error_or_value([&] { etcd::parse_put(text, source); });
  expect_store_error_or_value([&] { etcd::parse_delete_range(text, source); });
  expect_store_error_or_value([&] { etcd::parse_txn(text, source); });
  expect_store_error_or_value([&] { etcd::parse_lease_grant(text, source); });
  expect_store_error_or_value([&] { etcd::parse_lease_keepalive(text, source); });
  expect_store_error_or_value([&] { etcd::parse_lease_time_to_live(text, source); });
  expect_store_error_or_value([&] { etcd::parse_header_only(text, source); });
  expect_store_error_or_value([&] { etcd::parse_authenticate(text, source); });
  expect_store_error_or_value([&] { etcd::parse_watch_chunk(text, source); });
  // base64: whatever decodes re-encodes to the same text; whatever is encoded decodes back.
  try {
    const std::string bytes = etcd::base64_decode(text, source);
    if (etcd::base64_encode(std::string_view(bytes)) != text) std::abort();
  } catch (const ddp::StoreError&) {
  }
  if (etcd::base64_decode(etcd::base64_encode(text), source) != text) std::abort();
  return 0;
}
