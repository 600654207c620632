#include "comm/tcp/chooser.h"

#include <algorithm>
#include <bit>
#include <string>

#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::tcp {
namespace {

// The lesser of two figures, 0 standing for none.
double least(double a, double b) {
  if (a <= 0) return b;
  return b > 0 ? std::min(a, b) : a;
}

}  // namespace

const char* Chooser::name(Way way) const { return names_[way] != nullptr ? names_[way] : "?"; }

void log_choice(const ChoicePolicy& policy, const ChoiceLine& l) {
  const std::string_view sep = l.who.empty() ? "" : ": ";
  if (l.to.empty()) {
    logger("tcp")->debug("{}{}{}, {}: {} holds ({} {:.4g}, probed {:.4g}; {})", l.who, sep, policy.name,
                         l.what, l.from, l.from, l.from_figure, l.to_figure, policy.unit);
  } else {
    logger("tcp")->debug("{}{}{}, {}: {} -> {} ({} {:.4g}, {} {:.4g}; {})", l.who, sep, policy.name, l.what,
                         l.from, l.to, l.from, l.from_figure, l.to, l.to_figure, policy.unit);
  }
}

Chooser::Chooser(const ChoicePolicy& policy, std::span<const Way> order, std::span<const char* const> names)
    : policy_(policy) {
  if (order.empty() || order.size() > kMaxWays || names.size() > kMaxWays)
    DDP_THROW(InvalidArgument, "Chooser: 1 to ", kMaxWays, " ways");
  if (policy.counted < 1 || policy.counted > SizeClass{}.recent.size() || policy.first_probe < 1)
    DDP_THROW(InvalidArgument, "Chooser: ", policy.name,
              ": 1 to 8 counted ops, a first probe after 1 op or more");
  for (Way w : order) allow(w);
  for (size_t i = 0; i < names.size(); ++i) names_[i] = names[i];
}

void Chooser::add(Way way) {
  if (way >= kMaxWays) DDP_THROW(InvalidArgument, "Chooser: way ", int{way}, " out of range");
  if (std::find(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(ways_), way) ==
      order_.begin() + static_cast<std::ptrdiff_t>(ways_))
    order_[ways_++] = way;
}

void Chooser::allow(Way way) {
  add(way);
  allowed_[way] = true;
}

void Chooser::force(Way way) {
  add(way);
  allowed_.fill(false);
  allowed_[way] = true;
  for (SizeClass& c : classes_) {
    c.way = way;
    c.probing = 0;
    c.forced_probe = false;
  }
}

void Chooser::withdraw(Way way) {
  if (way >= kMaxWays) return;
  const bool was = allowed_[way];
  allowed_[way] = false;
  if (std::count(allowed_.begin(), allowed_.end(), true) == 0) allowed_[order_[0]] = true;
  for (size_t cls = 0; cls < classes_.size(); ++cls) {
    SizeClass& c = classes_[cls];
    if (c.interval == 0) continue;  // not yet used
    if (!allowed_in(cls, c.way)) c.way = first_of(cls);
    if (c.probe_way == way) {  // a probe of it in flight: its remaining ops are not run
      c.probing = 0;
      c.forced_probe = false;
    }
  }
  if (was && !allowed_[way])
    logger("tcp")->debug("{}: {} withdrawn (it cannot run here)", policy_.name, name(way));
}

void Chooser::same_below(Way way, size_t bytes, Way instead) {
  if (sames_ == same_.size()) DDP_THROW(InvalidArgument, "Chooser: too many same_below rules");
  same_[sames_++] = {way, instead, bytes};
}

size_t Chooser::class_of(size_t bytes) const {
  const int log2 = bytes == 0 ? 0 : static_cast<int>(std::bit_width(bytes)) - 1;
  return log2 < policy_.min_class_log2 ? 0 : std::min<size_t>(log2 - policy_.min_class_log2, kClasses - 1);
}

size_t Chooser::ways_of(size_t cls, std::array<Way, kMaxWays>& out) const {
  const size_t smallest = size_t{1} << (cls + static_cast<size_t>(policy_.min_class_log2));
  size_t n = 0;
  for (size_t i = 0; i < ways_; ++i) {
    Way w = order_[i];
    if (!allowed_[w]) continue;
    for (size_t k = 0; k < sames_; ++k) {
      if (same_[k].way == w && smallest < same_[k].below) w = same_[k].instead;
    }
    if (std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), w) ==
        out.begin() + static_cast<std::ptrdiff_t>(n))
      out[n++] = w;
  }
  return n;
}

Chooser::Way Chooser::first_of(size_t cls) const {
  std::array<Way, kMaxWays> ways{};
  ways_of(cls, ways);
  return ways[0];
}

bool Chooser::allowed_in(size_t cls, Way way) const {
  std::array<Way, kMaxWays> ways{};
  const size_t n = ways_of(cls, ways);
  return std::find(ways.begin(), ways.begin() + static_cast<std::ptrdiff_t>(n), way) !=
         ways.begin() + static_cast<std::ptrdiff_t>(n);
}

Chooser::SizeClass& Chooser::at(size_t bytes) {
  const size_t cls = class_of(bytes);
  SizeClass& c = classes_[cls];
  if (c.interval == 0) {  // first use
    c.way = c.probe_way = first_of(cls);
    c.until_probe = policy_.first_probe;
    c.interval = policy_.first_interval;
  }
  return c;
}

// The class's ways after the last one probed, in turn, never the way in use.
Chooser::Way Chooser::next_probe(size_t cls, const SizeClass& c) const {
  std::array<Way, kMaxWays> ways{};
  const size_t n = ways_of(cls, ways);
  size_t from = n;
  for (size_t i = 0; i < n; ++i) {
    if (ways[i] == c.probe_way) from = i + 1;
  }
  if (from == n) {  // the last probed is gone: start after its place in the order
    size_t at = 0;
    while (at < ways_ && order_[at] != c.probe_way) ++at;
    for (size_t k = 1; k <= ways_ && from == n; ++k) {
      const Way w = order_[(at + k) % ways_];
      for (size_t i = 0; i < n; ++i) {
        if (ways[i] == w) from = i;
      }
    }
  }
  for (size_t k = 0; k < n; ++k) {
    const Way w = ways[(from + k) % n];
    if (w != c.way) return w;
  }
  return c.way;
}

Chooser::Way Chooser::next(size_t bytes) {
  const size_t cls = class_of(bytes);
  std::array<Way, kMaxWays> ways{};
  if (ways_of(cls, ways) == 1) return ways[0];
  SizeClass& c = at(bytes);
  if (c.probing > 0) return c.probe_way;
  if (c.until_probe > 0) {
    --c.until_probe;
    return c.way;
  }
  if (!c.forced_probe) c.probe_way = next_probe(cls, c);
  c.forced_probe = false;
  c.probing = policy_.counted + 1;
  c.probe = 0;
  c.probe_cold = true;
  return c.probe_way;
}

double Chooser::in_use_figure(const SizeClass& c) const {
  if (policy_.figure != Figure::kLeastOfRecent) return c.cost[c.way];
  double in_use = 0;
  for (size_t i = 0; i < policy_.counted; ++i) in_use = least(in_use, c.recent[i]);
  return in_use;
}

void Chooser::count_in_use(SizeClass& c, double figure) {
  if (policy_.figure == Figure::kLeastOfRecent) {
    c.recent[c.recent_next++ % policy_.counted] = figure;
    return;
  }
  double& mine = c.cost[c.way];
  mine = mine == 0 ? figure : (mine + figure) / 2;
  if (!policy_.reprobe_when_slower) return;
  // Slower now than another way's last figure: the machine may have changed; look again, there.
  for (size_t i = 0; i < ways_; ++i) {
    const Way w = order_[i];
    if (allowed_[w] && w != c.way && c.cost[w] > 0 && c.cost[w] * policy_.margin < mine) {
      c.until_probe = 0;
      c.probe_way = w;
      c.forced_probe = true;
    }
  }
}

bool Chooser::record(size_t bytes, Way way, double figure) {
  const size_t cls = class_of(bytes);
  std::array<Way, kMaxWays> ways{};
  if (ways_of(cls, ways) == 1 || !allowed_in(cls, way)) return false;
  SizeClass& c = at(bytes);
  if (!c.seen) {  // a class's first op touches its buffers first (page faults): no figure
    c.seen = true;
    return false;
  }
  if (way == c.way) {
    count_in_use(c, figure);
    return false;
  }
  if (c.probing == 0 || way != c.probe_way) return false;
  // A probe: its first op finds the caches as the way in use left them (not counted).
  if (!c.probe_cold) c.probe = least(c.probe, figure);
  c.probe_cold = false;
  if (--c.probing > 0) return false;
  c.cost[c.probe_way] = c.probe;
  if (policy_.decider == Decider::kSumOfRanks) return true;
  decide(bytes, figures(bytes));
  return false;
}

Chooser::Figures Chooser::figures(size_t bytes) const {
  const SizeClass& c = classes_[class_of(bytes)];
  return {in_use_figure(c), c.probe};
}

Chooser::Way Chooser::probed(size_t bytes) const { return classes_[class_of(bytes)].probe_way; }

Chooser::Way Chooser::decide(size_t bytes, const Figures& figures, std::string_view who) {
  SizeClass& c = at(bytes);
  const Way was = c.way;
  if (figures[0] <= 0 || figures[1] * policy_.margin < figures[0]) {
    c.way = c.probe_way;
    if (policy_.figure == Figure::kLeastOfRecent) {
      c.recent = {c.probe};  // this rank's figure for the way now in use
      c.recent_next = 1;
    }
    c.interval = policy_.first_interval;
  }
  if (was != c.way || policy_.decider == Decider::kSumOfRanks) {
    const size_t cls = class_of(bytes);
    const size_t lo = size_t{1} << (cls + static_cast<size_t>(policy_.min_class_log2));
    const std::string what = cls == 0 ? detail::str("ops under ", 2 * lo, " bytes")
                                      : detail::str("ops of ", lo, " to ", 2 * lo - 1, " bytes");
    log_choice(policy_, {who, what, name(was), was != c.way ? name(c.way) : "", figures[0], figures[1]});
  }
  c.until_probe = c.interval;  // the next gap doubles while the choice holds
  c.interval = std::min(c.interval * 2, policy_.max_interval);
  return c.way;
}

Chooser::Way Chooser::preferred(size_t bytes) const {
  const size_t cls = class_of(bytes);
  std::array<Way, kMaxWays> ways{};
  if (ways_of(cls, ways) == 1) return ways[0];
  return classes_[cls].interval != 0 ? classes_[cls].way : ways[0];
}

}  // namespace ddp::comm::tcp
