#!/usr/bin/python3
"""Renders a DDP timeline (a Chrome trace from DDP_TIMELINE or ddp-launch --timeline) to a PNG.

    scripts/timeline_png.py trace.json timeline.png [--steps 1:3] [--title TEXT]

One row per rank and track: each rank's "step" row (forward, backward, the wait for the buckets,
the optimizer step) and one row per bucket (its ready instant as a tick, its collective as a bar,
the copies in and out around it). --steps FIRST:LAST keeps those steps (default: all). Times are
milliseconds from the first event shown. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import sys

COLOURS = {
    "forward": "#4c78a8",
    "backward": "#f58518",
    "forward and backward": "#f58518",
    "wait for buckets": "#e45756",
    "optimizer step": "#54a24b",
    "collective": "#b279a2",
    "copy in": "#9d755d",
    "copy out": "#bab0ac",
}


def load(path):
    """The events of a trace file; an array left unclosed (a killed rank) is closed here."""
    text = open(path, encoding="utf-8").read().strip()
    if isinstance(text, str) and not text.endswith("]"):
        text = text.rstrip(",") + "]"
    data = json.loads(text)
    return data["traceEvents"] if isinstance(data, dict) else data


def colour(name):
    return COLOURS.get(name, COLOURS.get(name.split(" (")[0], "#72b7b2"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--steps", default="", help="FIRST:LAST, e.g. 1:3 (default: every step)")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    first, last = 1, 1 << 62
    if args.steps:
        a, _, b = args.steps.partition(":")
        first, last = int(a), int(b or a)

    events = [e for e in load(args.trace) if e.get("ph") in ("X", "i")]
    events = [e for e in events if first <= e.get("args", {}).get("step", 0) <= last]
    if not events:
        sys.exit(f"timeline_png: no events in {args.trace} for steps {args.steps or 'all'}")
    t0 = min(e["ts"] for e in events)
    rows = sorted({(e["pid"], e["tid"]) for e in events})
    index = {row: i for i, row in enumerate(rows)}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(14, 0.45 * len(rows) + 1.6))
    seen = {}
    for e in events:
        y = len(rows) - 1 - index[(e["pid"], e["tid"])]
        start = (e["ts"] - t0) / 1000.0
        if e["ph"] == "X":
            ax.broken_barh([(start, max(e.get("dur", 0) / 1000.0, 0.002))], (y - 0.35, 0.7),
                           facecolors=colour(e["name"]), edgecolor="none")
            seen.setdefault(e["name"].split(" (")[0], colour(e["name"]))
        else:
            ax.plot([start, start], [y - 0.4, y + 0.4], color="black", linewidth=1)
            seen.setdefault("bucket ready", "black")
    labels = []
    for pid, tid in rows:
        labels.append(f"rank {pid} " + ("step" if tid == 0 else f"bucket {tid - 1}"))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(list(reversed(labels)), fontsize=8)
    ax.set_xlabel("ms")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in seen.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.12 if len(rows) > 4 else -0.25), ncol=len(seen), fontsize=8, frameon=False)
    title = args.title or f"DDP timeline: {args.trace}" + (f", steps {args.steps}" if args.steps else "")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"timeline_png: {len(events)} events, {len(rows)} rows -> {args.png}")


if __name__ == "__main__":
    main()
