#include "rendezvous/round_outcome.h"

namespace ddp::rdzv {
namespace {

struct Form {
  RoundOutcomeKind kind;
  const char* prefix;  // stored text: prefix + detail
};
constexpr Form kForms[] = {
    {RoundOutcomeKind::kFailed, "failed: "},
    {RoundOutcomeKind::kInterrupted, "interrupted: "},
    {RoundOutcomeKind::kLost, "lost: "},
    {RoundOutcomeKind::kChanged, "changed: "},
};
constexpr const char* kDoneText = "done";

}  // namespace

std::string RoundOutcome::text() const {
  if (kind == RoundOutcomeKind::kDone) return kDoneText;
  for (const auto& f : kForms) {
    if (f.kind == kind) return f.prefix + detail;
  }
  return detail;
}

RoundOutcome RoundOutcome::decode(const std::string& text) {
  if (text == kDoneText) return done();
  for (const auto& f : kForms) {
    if (text.starts_with(f.prefix)) return {f.kind, text.substr(std::string(f.prefix).size())};
  }
  return failed(text);
}

}  // namespace ddp::rdzv
