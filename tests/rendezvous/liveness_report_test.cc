// The heartbeat checker's report (rendezvous/liveness_report.h): a wire format, spelled out.
#include "rendezvous/liveness_report.h"

#include <doctest/doctest.h>

using namespace ddp::rdzv;

TEST_CASE("a report survives its text, which is '<pass> <all_beat_pass>[ <lost id>...]'") {
  const LivenessReport r{12, 10, {"h2-7", "h4-9"}};
  CHECK(encode_liveness(r) == "12 10 h2-7 h4-9");
  CHECK(decode_liveness("12 10 h2-7 h4-9") == r);
  CHECK(decode_liveness(encode_liveness(LivenessReport{3, 3, {}})) == LivenessReport{3, 3, {}});
}

TEST_CASE("an empty or malformed report reads as no pass yet") {
  CHECK(decode_liveness("") == LivenessReport{});
  CHECK(decode_liveness("7") == LivenessReport{});
  CHECK(decode_liveness("x 1 h1") == LivenessReport{});
}
