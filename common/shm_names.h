#pragma once
// Names of the tcp backend's POSIX shared-memory segments, in one place, because two parties
// need the rule: comm/tcp/shm_segment.cc, which creates "/ddp-tcp-<pid>-<16 hex digits>" (pid:
// the creating process), and the launcher, which removes the segments of workers it reaped —
// a worker killed during the group's set-up, before every rank mapped and unlinked the
// segment, would otherwise leave it in /dev/shm until reboot.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::shm_names {

// "/ddp-tcp-<creator>-<nonce as 16 hex digits>", for shm_open.
std::string tcp_segment(pid_t creator, uint64_t nonce);

// The creator pid of a /dev/shm entry name (no leading '/') that follows the rule, else -1.
pid_t tcp_segment_creator(const std::string& entry);

// Unlinks every tcp segment in /dev/shm created by one of `creators` and owned by this user
// (never anyone else's, never a non-file); returns how many. Never throws.
size_t remove_tcp_segments(const std::vector<pid_t>& creators) noexcept;

}  // namespace ddp::shm_names
