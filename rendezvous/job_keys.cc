#include "rendezvous/job_keys.h"

namespace ddp::rdzv {

RoundKeys::RoundKeys(const std::string& run_id, int round)
    : round_(round), prefix_(run_id + "/round/" + std::to_string(round) + "/") {}

}  // namespace ddp::rdzv
