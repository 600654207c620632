#!/usr/bin/python3
"""scripts/check_docs.py: the tree's docs pass; planted figures and broken links are found, named
by file and line; generated pages and the README's generated block may carry figures."""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_docs.py"
README_OK = """# x

<!-- headline: written by bench/report.py from bench/results/; edit those, not this -->
AMD EPYC, 2 CPUs, 2026-11-29: the machine otherwise idle.
<!-- headline end -->

[launcher](docs/launcher.md#exit-codes)
"""
LAUNCHER_OK = """# ddp-launch

## Exit codes

A node is lost after 5 s (`keep_alive_interval` 1 x 5); 64 KiB; a lease of 2 s.

## Rounds

[codes](#exit-codes), [events](launcher.md#event-log), [bench](benchmarks.md#recovery-of-elastic-jobs-1)

## Event log
"""
BENCH = """# Benchmarks

## 2026-12-02: run b

### Recovery of elastic jobs

AMD EPYC, 5 trials.

## 2026-11-29: run a

### Recovery of elastic jobs
"""


def run(root):
    p = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)
    return p.returncode, p.stdout


def tree(pages):
    d = pathlib.Path(tempfile.mkdtemp())
    (d / "docs").mkdir()
    for rel, text in pages.items():
        (d / rel).write_text(text)
    return d


def expect(pages, code, *needles):
    rc, out = run(tree(pages))
    assert rc == code, f"want exit {code}, got {rc}:\n{out}"
    for n in needles:
        assert n in out, f"'{n}' not in:\n{out}"


def main():
    rc, out = run(ROOT)
    assert rc == 0, f"the tree's docs:\n{out}"
    base = {"README.md": README_OK, "docs/launcher.md": LAUNCHER_OK, "docs/benchmarks.md": BENCH}
    expect(base, 0)  # figures on the generated page and in the README's block; a contract's numbers
    for line, what in (("measured 2026-11-29: 1.6 s", "a date"), ("on an AMD EPYC: 1.6 s", "a machine's name"),
                       ("1.6 s (Zen 4)", "a machine's name"), ("1.6 s, 3 trials", "a count of trials"),
                       ("medians of 11 runs", "a count of trials"), ("72-133 s at load 5-11", "a load average")):
        expect(dict(base, **{"docs/launcher.md": LAUNCHER_OK + "\n" + line + "\n"}), 1, f"docs/launcher.md:13: {what}")
    expect(dict(base, **{"README.md": README_OK + "on an AMD EPYC, 2026-11-29\n"}), 1, "README.md:8: a date",
           "README.md:8: a machine's name")
    expect(dict(base, **{"docs/environment.md": "# Env\n\nmeasured 2026-11-29\n"}), 0)
    expect(dict(base, **{"docs/launcher.md": LAUNCHER_OK.replace("#event-log", "#events")}), 1,
           "docs/launcher.md:9: link 'launcher.md#events': no heading 'events'")
    expect(dict(base, **{"docs/launcher.md": LAUNCHER_OK.replace("elastic-jobs-1", "elastic-jobs-2")}), 1,
           "no heading 'recovery-of-elastic-jobs-2' in benchmarks.md")
    expect(dict(base, **{"README.md": README_OK.replace("docs/launcher.md", "docs/launch.md")}), 1,
           "README.md:7: link 'docs/launch.md#exit-codes': no such file")
    print("check_docs_test: passed")


if __name__ == "__main__":
    main()
