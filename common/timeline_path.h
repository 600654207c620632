#pragma once
// The file each rank's DDP timeline goes to (ddp/timeline.h), shared with the launcher that
// merges them (ddp-launch --timeline): PATH with ".rank<R>" before a ".json" ending, else
// ".rank<R>.json" appended — trace.json -> trace.rank0.json, out/t -> out/t.rank0.json.
#include <string>

namespace ddp {

inline std::string timeline_rank_path(const std::string& path, int rank) {
  const std::string suffix = ".json";
  const bool json =
      path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string stem = json ? path.substr(0, path.size() - suffix.size()) : path;
  return stem + ".rank" + std::to_string(rank) + suffix;
}

}  // namespace ddp
