#include "launcher/liveness.h"

#include "common/error.h"

namespace ddp::launcher {

std::string no_answer_message(const std::string& service, Clock::time_point reached, bool joining,
                              Millis lost_after, const std::string& last_error) {
  return detail::str(
      service, ": no answer for ", std::chrono::duration_cast<Millis>(Clock::now() - reached).count(),
      " ms (", joining ? "the join timeout" : "keep_alive_interval x keep_alive_max_attempt", " = ",
      lost_after.count(), " ms): ", last_error.empty() ? "its requests did not complete" : last_error);
}

bool note_lost(const LivenessPeer& peer, bool& is_lost, std::vector<LivenessPeer>& lost) {
  if (is_lost) return false;
  is_lost = true;
  lost.push_back(peer);
  return true;
}

void report_loss(std::unique_lock<std::mutex>& lock, const std::function<void()>& on_loss) {
  if (!on_loss) return;
  lock.unlock();
  on_loss();
  lock.lock();
}

}  // namespace ddp::launcher
