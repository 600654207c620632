#pragma once
// Chooser: how the tcp backend tunes, per power-of-two size class, what a plan (plan.h) leaves
// open: ways of running an op whose speed depends on the machine (hierarchy_choice.h's split,
// overlapped or flat; shm_store_choice.h's cached or streaming stores or cross-memory attach).
// Ops take the way in use; now and then a probe runs another way (its first op cold, not
// counted), and the way switches when the probe's figure beats the way in use's by the margin.
// A ChoicePolicy says who decides (every rank's figures summed, or one rank whose choice the
// caller pushes to the others), how figures are taken, the margin and the re-probe period; a
// setting that names a way fixes it (force()). Each switch is one debug log line, and so is
// each decision of the ranks together. Called by one thread at a time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ddp::comm::tcp {

// Who decides a switch. kSumOfRanks: record() says when a probe ended; every rank sums its
// figures() with the others' and passes the sums to decide(), so every rank switches alike.
// kOneRank: this rank's own figures decide at once; its caller pushes the choice to the others.
enum class Decider : uint8_t { kSumOfRanks, kOneRank };
// How a way is figured: the least of its last `counted` ops, or a running mean (each op weighs
// half); a probe's figure is the least of its counted ops either way.
enum class Figure : uint8_t { kLeastOfRecent, kRunningMean };

struct ChoicePolicy {
  std::string_view name;  // what is chosen, for the log line
  std::string_view unit;  // of the figures, for the log line
  Decider decider = Decider::kSumOfRanks;
  Figure figure = Figure::kLeastOfRecent;
  uint32_t counted = 3;         // counted ops of a probe (after its cold one)
  uint32_t first_probe = 4;     // ops of a class before its first probe (the first one cold)
  uint32_t first_interval = 8;  // ops between probes after a switch, doubling while a choice holds
  uint32_t max_interval = 64;
  double margin = 1.15;              // a probe must be lower by this factor to switch
  bool reprobe_when_slower = false;  // kOneRank: the way in use got slower than another's last figure
  int min_class_log2 = 0;            // sizes under 2^this share the first size class
};

// The policies, side by side. A hierarchical group's large all_reduce (hierarchy_choice.h):
// split and flat exchange different messages, so the ranks' summed figures decide, and a
// switch costs (idle connections restart slow), so probes are longer and rarer.
inline constexpr ChoicePolicy kLargeWayPolicy{.name = "hierarchical all_reduce",
                                              .unit = "us, every rank's summed",
                                              .decider = Decider::kSumOfRanks,
                                              .figure = Figure::kLeastOfRecent,
                                              .counted = 3,
                                              .first_probe = 4,
                                              .first_interval = 8,
                                              .max_interval = 64,
                                              .margin = 1.15};
// Shared-memory stores (shm_store_choice.h): what streaming saves falls to the readers, so rank
// 0's busy time decides for all (ShmChannel::begin_stores), and a way that got slower than
// another's last figure is probed at once (a VM's vCPUs moved apart).
inline constexpr ChoicePolicy kStorePolicy{.name = "shared-memory stores",
                                           .unit = "ns per byte, rank 0's",
                                           .decider = Decider::kOneRank,
                                           .figure = Figure::kRunningMean,
                                           .counted = 1,
                                           .first_probe = 2,
                                           .first_interval = 8,
                                           .max_interval = 256,
                                           .margin = 1.15,
                                           .reprobe_when_slower = true,
                                           .min_class_log2 = 10};
// (The hierarchical small path's limit is measured once, at creation, not by a Chooser: its
// small side must take no extra step to agree. hierarchy_calibration.h.)

// Logs a decision (debug level): `who` names the group (or nothing), `what` the sizes it
// applies to; `to` empty: `from` holds.
struct ChoiceLine {
  std::string_view who, what, from, to;
  double from_figure = 0, to_figure = 0;
};
void log_choice(const ChoicePolicy& policy, const ChoiceLine& line);

class Chooser {
 public:
  static constexpr int kMaxWays = 4;
  using Way = uint8_t;
  using Figures = std::array<double, 2>;  // the way in use, the way probed

  // `order`: the ways allowed, each size class starting at the first; probes take the others
  // in this order, in turn (ways allowed later come after). `names`: each way's name (by Way,
  // 0 to kMaxWays - 1), for the log.
  Chooser(const ChoicePolicy& policy, std::span<const Way> order, std::span<const char* const> names);

  void allow(Way way);     // adds a way to weigh
  void force(Way way);     // the only way from now on (a setting that names it)
  void withdraw(Way way);  // never chosen again; with none left, the order's first
  // For size classes whose smallest buffer is under `bytes`, `way` is taken as `instead`.
  void same_below(Way way, size_t bytes, Way instead);

  Way next(size_t bytes);  // the way for the next op of `bytes`
  // That op's figure (lower is better). kSumOfRanks: true when a probe just ended, and the
  // ranks must now sum figures(bytes) and pass the sums to decide().
  bool record(size_t bytes, Way way, double figure);
  Figures figures(size_t bytes) const;
  Way probed(size_t bytes) const;  // the way the last probe of `bytes` took
  // Switches when figures[1] (the probe's) beats figures[0] by the margin. Logs a switch, and
  // under kSumOfRanks every decision (every rank logs the same line), `who` naming the group.
  Way decide(size_t bytes, const Figures& figures, std::string_view who = {});
  Way preferred(size_t bytes) const;  // the way ops of `bytes` take between probes
  const ChoicePolicy& policy() const { return policy_; }

 private:
  static constexpr int kClasses = 40;
  struct SizeClass {
    bool seen = false;  // its first op was recorded (cold, not counted)
    Way way = 0;
    std::array<double, kMaxWays> cost{};  // each way's last figure (0: none)
    std::array<double, 8> recent{};       // kLeastOfRecent: the way in use's last ops (0: none)
    size_t recent_next = 0;
    uint32_t until_probe = 0;
    uint32_t interval = 0;      // the gap after the next probe
    uint32_t probing = 0;       // probe ops left to run
    Way probe_way = 0;          // the way probed now, or last
    bool forced_probe = false;  // the next probe takes probe_way (it got faster than the way in use)
    bool probe_cold = true;     // the probe's next op is its first
    double probe = 0;           // the least of the probe's counted ops (0: none yet)
  };
  size_t class_of(size_t bytes) const;
  SizeClass& at(size_t bytes);
  // The ways a class may take, in order (after same_below), and their count.
  size_t ways_of(size_t cls, std::array<Way, kMaxWays>& out) const;
  Way first_of(size_t cls) const;
  bool allowed_in(size_t cls, Way way) const;
  Way next_probe(size_t cls, const SizeClass& c) const;
  double in_use_figure(const SizeClass& c) const;
  void count_in_use(SizeClass& c, double figure);
  void add(Way way);  // to the order, at its end
  const char* name(Way way) const;

  ChoicePolicy policy_;
  std::array<Way, kMaxWays> order_{};
  size_t ways_ = 0;
  std::array<const char*, kMaxWays> names_{};
  std::array<bool, kMaxWays> allowed_{};
  struct Same {
    Way way = 0, instead = 0;
    size_t below = 0;
  };
  std::array<Same, kMaxWays> same_{};
  size_t sames_ = 0;
  std::array<SizeClass, kClasses> classes_{};
};

// A Chooser whose ways are the values of the enum `E` (PathChooser, StoreChooser): the calls
// every such chooser makes, in `E`.
template <typename E>
class EnumChooser {
 public:
  E next(size_t bytes) { return way(chooser_.next(bytes)); }                  // the way for the next op
  E preferred(size_t bytes) const { return way(chooser_.preferred(bytes)); }  // between probes

 protected:
  EnumChooser(const ChoicePolicy& policy, std::span<const Chooser::Way> order,
              std::span<const char* const> names)
      : chooser_(policy, order, names) {}
  static Chooser::Way index(E e) { return static_cast<Chooser::Way>(e); }
  static E way(Chooser::Way w) { return static_cast<E>(w); }

  Chooser chooser_;
};

}  // namespace ddp::comm::tcp
