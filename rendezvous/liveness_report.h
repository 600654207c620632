#pragma once
// LivenessReport: the heartbeat checker's report for one round, the value of the round's
// "liveness" key (job_keys.h), written by the checker every pass and read by the other nodes of
// the round (launcher/heartbeat.h) and by `ddp-launch --status`.
// Stored as text, "<pass> <all_beat_pass>[ <lost id>...]", as launchers of earlier versions write
// it. An empty or malformed value decodes as no pass yet: the checker's next pass rewrites it.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::rdzv {

struct LivenessReport {
  int64_t pass = 0;               // the checker's passes so far; 0: nothing written yet
  int64_t all_beat_pass = 0;      // the latest pass by which every node not lost had beaten
  std::vector<std::string> lost;  // heartbeat ids of the nodes found lost
  bool operator==(const LivenessReport&) const = default;
};

std::string encode_liveness(const LivenessReport& r);
LivenessReport decode_liveness(const std::string& text);

}  // namespace ddp::rdzv
