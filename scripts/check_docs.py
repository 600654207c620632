#!/usr/bin/python3
"""The docs carry no measured figure by hand, and their links land.

usage: check_docs.py [--root DIR]

Every figure on a docs page comes from bench/results/ through bench/report.py, which writes
docs/benchmarks.md and the README's headline block; docs/environment.md is generated from the
settings table. Everywhere else in docs/*.md and README.md a measurement is recognised by what
travels with one, and is a finding:
  - a date (2026-11-29): a figure of that day's code and machine;
  - a machine's name (EPYC, Xeon, Zen 4, H100, ...): a figure of that machine;
  - trials, runs and load averages (`5 trials`, `medians of 11 runs`, `at load 5`).
A contract's own numbers (defaults, bounds: `5 s`, `64 KiB`) are none of these and pass.
Links: every relative link to a page (`launcher.md#event-log`, `#exit-codes`) names a file that
exists and a heading of it, anchors spelt as GitHub spells them (duplicates take -1, -2, ...).
Prints each finding as FILE:LINE: what; exits 1 when there is one. The ctest docs_figures_test
(label docs) runs it.
"""
import argparse
import pathlib
import re
import sys

# Pages written by a program, with it: their figures are generated.
GENERATED = {"docs/benchmarks.md": "bench/report.py", "docs/environment.md": "ddp-launch --print-settings"}
# The README's block that bench/report.py writes.
README_BLOCK = ("<!-- headline: written by bench/report.py", "<!-- headline end -->")
FIGURE_SIGNS = [
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), "a date"),
    (re.compile(r"\b(EPYC|Xeon|Ryzen|Zen ?\d|Graviton|H100|H200|A100|V100)\b"), "a machine's name"),
    (re.compile(r"\b\d+ trials\b|\bmedians? of \d+ runs\b|\b\d+ runs each\b"), "a count of trials"),
    (re.compile(r"\bat load \d|\bload average \d"), "a load average"),
]
LINK = re.compile(r"\]\(([^()\s]*)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, out, fenced = {}, set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def checked_lines(rel, text):
    """(line number, line) of what is written by hand: all of a page but a generated block."""
    if rel in GENERATED:
        return []
    lines, out, inside = text.splitlines(), [], False
    for i, line in enumerate(lines, 1):
        if rel == "README.md" and line.startswith(README_BLOCK[0]):
            inside = True
        if not inside:
            out.append((i, line))
        if line.startswith(README_BLOCK[1]):
            inside = False
    return out


def findings(root):
    pages = sorted((root / "docs").glob("*.md")) + [root / "README.md"]
    out = []
    for path in pages:
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        for i, line in checked_lines(rel, text):
            for pattern, what in FIGURE_SIGNS:
                m = pattern.search(line)
                if m:
                    out.append(f"{rel}:{i}: {what} ('{m.group(0)}'): a measured figure typed by hand; "
                               "put the run under bench/results/ and link docs/benchmarks.md instead")
        for i, line in enumerate(text.splitlines(), 1):
            for target in LINK.findall(line):
                problem = broken(path, target)
                if problem:
                    out.append(f"{rel}:{i}: link '{target}': {problem}")
    return out


def broken(page, target):
    if re.match(r"^[a-z]+:", target):
        return None  # https:, mailto:
    file_part, _, anchor = target.partition("#")
    dest = (page.parent / file_part).resolve() if file_part else page
    if not dest.exists():
        return "no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"no heading '{anchor}' in {dest.name}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent.parent)
    args = ap.parse_args()
    out = findings(args.root)
    for line in out:
        print(line)
    if out:
        print(f"check_docs.py: {len(out)} finding(s)", file=sys.stderr)
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
