#pragma once
// RoundOutcome: how a round ended, the value of its "outcome" key (job_keys.h), written once by
// the first node to announce one (launcher/node_round.h) and read by every launcher and by the
// workers that recover in place (ddp/elastic/elastic.h): only kChanged moves them.
// Stored as text: "done", "failed: <who>: <why>", "interrupted: <who> got SIGINT", "lost: <why>",
// "changed: <why>"; launchers of earlier versions read and write the same.
#include <string>

namespace ddp::rdzv {

enum class RoundOutcomeKind {
  kDone,         // every node's workers succeeded
  kFailed,       // a node's workers failed (a restart may follow)
  kInterrupted,  // a node was stopped by a signal: no restart
  kLost,         // nodes were lost (no heartbeat, or never at the exit barrier): no new round
  kChanged,      // elastic: nodes were lost or are waiting to join: a new round, not a restart
};

struct RoundOutcome {
  RoundOutcomeKind kind = RoundOutcomeKind::kDone;
  std::string detail;  // who and why; empty for kDone

  static RoundOutcome done() { return {RoundOutcomeKind::kDone, ""}; }
  static RoundOutcome failed(std::string detail) { return {RoundOutcomeKind::kFailed, std::move(detail)}; }
  static RoundOutcome interrupted(std::string detail) {
    return {RoundOutcomeKind::kInterrupted, std::move(detail)};
  }
  static RoundOutcome lost(std::string detail) { return {RoundOutcomeKind::kLost, std::move(detail)}; }
  static RoundOutcome changed(std::string detail) { return {RoundOutcomeKind::kChanged, std::move(detail)}; }

  // A restart cannot help: the job stops on every node.
  bool final() const { return kind == RoundOutcomeKind::kInterrupted || kind == RoundOutcomeKind::kLost; }
  // A membership change: the only outcome that moves workers in place.
  bool membership_change() const { return kind == RoundOutcomeKind::kChanged; }
  std::string text() const;  // the stored form, also what messages show
  // Text written by any launcher; an unknown form is a kFailed whose detail is the text.
  static RoundOutcome decode(const std::string& text);
  bool operator==(const RoundOutcome&) const = default;
};

}  // namespace ddp::rdzv
