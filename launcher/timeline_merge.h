#pragma once
// ddp-launch --timeline FILE: the workers' per-rank DDP timelines (ddp/timeline.h, named by
// common/timeline_path.h: FILE's stem + ".rank<R>.json") merged into FILE at exit — one Chrome
// trace with every rank as its own process, ranks in order. Only files written during this job
// (modified since `since`) are taken; an unclosed rank file (a killed worker) is closed.
// FILE is replaced atomically (written beside it, then renamed). Throws SystemError naming the
// file when it cannot be written.
#include <filesystem>
#include <string>
#include <vector>

namespace ddp::launcher {

// The ranks merged, in order (empty: no rank wrote a timeline; FILE is then left alone).
std::vector<int> merge_timelines(const std::string& path, std::filesystem::file_time_type since);

}  // namespace ddp::launcher
