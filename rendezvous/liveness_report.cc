#include "rendezvous/liveness_report.h"

#include <sstream>

namespace ddp::rdzv {

std::string encode_liveness(const LivenessReport& r) {
  std::string out = std::to_string(r.pass) + " " + std::to_string(r.all_beat_pass);
  for (const auto& id : r.lost) out += " " + id;
  return out;
}

LivenessReport decode_liveness(const std::string& text) {
  LivenessReport r;
  std::istringstream in(text);
  if (!(in >> r.pass >> r.all_beat_pass)) return LivenessReport{};
  for (std::string id; in >> id;) r.lost.push_back(id);
  return r;
}

}  // namespace ddp::rdzv
