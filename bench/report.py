#!/usr/bin/python3
"""Writes docs/benchmarks.md, its plots (docs/img/*.png) and the README's headline block from the
result files committed under bench/results/. `make benchmarks` runs it; bench_report_test runs it
with --check.

  /usr/bin/python3 bench/report.py [--check] [--no-plots] [--plots-to DIR]

Inputs, one folder per run (bench/results/<run>/):
  run.json          {"date", "note", "files": {"<file>.jsonl": "<the command that wrote it>"}}
  collective*.jsonl the JSON rows of `ddp-bench collective` (one per implementation and size)
  torch.jsonl       the two rows of `ddp-bench torch` (ours, pytorch)
  floors.jsonl      the rows of `ddp-bench floors` (optional)
  elastic.jsonl     the rows of bench/elastic.sh (OUT=...): recovery times of elastic jobs
  scale.jsonl       the rows of bench/scale.sh (OUT=...): N launchers' formation, CPU, detection
  etcd_recovery*.jsonl bench/etcd_recovery.sh's rows: recovery from the first node's loss
and bench/results/history.md, carried into the page verbatim. The newest run (by date, then
name) gives the README's headline table and plot.

--check writes nothing: it exits 1 (with a diff) when docs/benchmarks.md or the README's block
differs from what the results give. --plots-to DIR draws the plots there (to exercise the
plotting); without matplotlib it says so and exits 77 once the check has passed. Plotting needs
Debian's python3-matplotlib; --no-plots leaves docs/img alone.
"""
import argparse
import difflib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"
README = ROOT / "README.md"
BEGIN = "<!-- headline: written by bench/report.py from bench/results/; edit those, not this -->"
END = "<!-- headline end -->"

# Implementations in the order of the tables' columns, with their names there.
IMPLS = [
    (("tcp", "host"), "ours (tcp)"),
    (("tcp", "group"), "ours, group memory"),
    (("mpi", "host"), "ours (mpi backend)"),
    (("gloo", "host"), "ours (gloo backend)"),
    (("mpi-direct", "host"), "Open MPI"),
    (("gloo-direct", "host"), "Gloo"),
]
PEERS = {"mpi-direct", "gloo-direct"}


class ResultError(Exception):
    """A result file that cannot be read as promised (named, with what is wrong)."""


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def time_label(us):
    if us >= 1000:
        ms = us / 1000
        return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
    return f"{us:.3g} µs" if us < 100 else f"{us:.0f} µs"


def ratio_label(x):
    return f"{x:.0f}×" if x >= 100 else f"{x:.3g}×"


def read_jsonl(path):
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ResultError(f"{path.relative_to(ROOT)}:{i}: not JSON ({e.msg})") from e
    if not rows:
        raise ResultError(f"{path.relative_to(ROOT)}: no rows")
    return rows


class Run:
    """One folder of bench/results: its run.json and its rows."""

    def __init__(self, folder):
        self.name = folder.name
        self.folder = folder
        meta_path = folder / "run.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ResultError(f"{meta_path.relative_to(ROOT)}: {e}") from e
        for key in ("date", "note", "files"):
            if key not in meta:
                raise ResultError(f"{meta_path.relative_to(ROOT)}: no \"{key}\"")
        self.date, self.note, self.files = meta["date"], meta["note"], meta["files"]
        self.short_note = meta.get("short_note", self.note)  # the README's
        self.rows = {}
        for name in self.files:
            path = folder / name
            if not path.is_file():
                raise ResultError(f"{meta_path.relative_to(ROOT)} names {name}, which is not in {folder.name}/")
            self.rows[name] = read_jsonl(path)
        for path in sorted(folder.glob("*.jsonl")):
            if path.name not in self.files:
                raise ResultError(f"{path.relative_to(ROOT)}: not named in run.json (what command wrote it?)")
        self.machine = self._machine()

    def _machine(self):
        seen = None
        for name, rows in self.rows.items():
            for row in rows:
                m = row.get("machine")
                if m is None:
                    raise ResultError(f"{self.name}/{name}: a row without \"machine\"")
                key = {k: m.get(k) for k in ("cpu", "online_cpus", "l1d_bytes", "l2_bytes", "l3_bytes")}
                if seen is None:
                    seen = key
                elif key != seen:
                    raise ResultError(f"{self.name}/{name}: rows from two machines ({seen} and {key})")
        return seen

    def machine_line(self):
        m = self.machine
        parts = [f"{m['cpu']}, {m['online_cpus']} CPUs"]
        for label, key in (("L1d", "l1d_bytes"), ("L2", "l2_bytes"), ("L3", "l3_bytes")):
            if m.get(key):
                parts.append(f"{label} {size_label(m[key])}")
        return ", ".join(parts)

    def collective(self):
        """{(op, world): {(backend, memory): {bytes: row}}} over every collective*.jsonl."""
        out = {}
        for name, rows in self.rows.items():
            if not name.startswith("collective"):
                continue
            for row in rows:
                if row.get("correct") is not True:
                    raise ResultError(f"{self.name}/{name}: a row not checked correct: {row}")
                memory = row.get("memory", "host")
                if row["backend"] in PEERS:
                    memory = "host"
                impl = (row["backend"], memory)
                cell = out.setdefault((row["op"], row["world_size"]), {}).setdefault(impl, {})
                if row["bytes"] in cell:
                    raise ResultError(f"{self.name}/{name}: two rows for {impl} at {row['bytes']} bytes")
                cell[row["bytes"]] = row
        return out

    def torch(self):
        rows = self.rows.get("torch.jsonl")
        if not rows:
            return None
        systems = {r["system"]: r for r in rows}
        if set(systems) != {"ours", "pytorch"}:
            raise ResultError(f"{self.name}/torch.jsonl: want rows for ours and pytorch, got {sorted(systems)}")
        return systems

    def floors(self):
        return self.rows.get("floors.jsonl")

    def elastic(self):
        """{launcher: {scenario: row}} of elastic.jsonl, launchers in the order of ELASTIC_PATHS."""
        rows = self.rows.get("elastic.jsonl")
        if not rows:
            return None
        out = {}
        for r in rows:
            if r.get("launcher") not in ELASTIC_PATHS:
                raise ResultError(f"{self.name}/elastic.jsonl: unknown launcher {r.get('launcher')!r}")
            out.setdefault(r["launcher"], {})[r["scenario"]] = r
        return {k: out[k] for k in ELASTIC_PATHS if k in out}

    def etcd_recovery(self):
        """bench/etcd_recovery.sh's rows, every etcd_recovery*.jsonl (one per --rdzv-conf)."""
        return [r for name, rows in self.rows.items() if name.startswith("etcd_recovery") for r in rows]

    def scale(self):
        """bench/scale.sh's rows (every scale*.jsonl, in run.json's order), by node count within a file."""
        out = []
        for name, rows in self.rows.items():
            if not name.startswith("scale"):
                continue
            for r in rows:
                for key in ("launcher", "backend", "nnodes", "trials"):
                    if key not in r:
                        raise ResultError(f"{self.name}/{name}: a row without \"{key}\"")
            out += sorted(rows, key=lambda r: (r["backend"], r["nnodes"]))
        return out or None


def load_runs():
    runs = [Run(d) for d in sorted(RESULTS.iterdir()) if d.is_dir()]
    runs.sort(key=lambda r: (r.date, r.name))
    return runs


def columns(by_impl):
    return [(impl, label) for impl, label in IMPLS if impl in by_impl]


def collective_table(by_impl):
    cols = columns(by_impl)
    sizes = sorted({b for cells in by_impl.values() for b in cells})
    ours = cols[0][0]
    peers = [c for c in cols if c[0][0] in PEERS]
    head = ["bytes"] + [label for _, label in cols] + [f"{label} / ours" for _, label in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in sizes:
        cells = [size_label(b)]
        for impl, _ in cols:
            row = by_impl[impl].get(b)
            cells.append(time_label(row["median_us"]) if row else "–")
        for impl, _ in peers:
            mine, theirs = by_impl[ours].get(b), by_impl[impl].get(b)
            cells.append(ratio_label(theirs["median_us"] / mine["median_us"]) if mine and theirs else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def spread_note(by_impl):
    """The widest min-max spread of the medians' loops, as a share of the median."""
    worst = 0.0
    for cells in by_impl.values():
        for row in cells.values():
            if row["median_us"] > 0:
                worst = max(worst, (row["max_us"] - row["min_us"]) / row["median_us"])
    return worst


def torch_table(systems):
    lines = ["| | step without communication | DDP step | DDP / local | rounds (DDP step, ms) |",
             "|---|---|---|---|---|"]
    for key, label in (("ours", "ours (LibTorch, tcp)"), ("pytorch", "PyTorch DDP (gloo)")):
        r = systems[key]
        per_round = ", ".join(f"{v:.0f}" for v in r["ddp_ms_per_round"])
        lines.append(f"| {label} | {time_label(r['local_ms'] * 1e3)} | {time_label(r['ddp_ms'] * 1e3)} | "
                     f"{r['overhead']:.3f} | {per_round} |")
    return lines


# bench/elastic.sh's launchers (paths), in the table's order, with what each runs.
ELASTIC_PATHS = {
    "in-place": "C++ probe, in place (`ddp/elastic.h`)",
    "cpp-restart": "the same C++ probe, restarted",
    "cnn-in-place": "the demo CNN (LibTorch), in place (`--elastic-in-place`)",
    "cnn-restart": "the demo CNN (LibTorch), restarted from its checkpoint",
    "ddp-launch": "a PyTorch job (gloo), restarted",
    "torchrun": "the same PyTorch job under torchrun 1.13",
}
ELASTIC_SCENARIOS = ("node-lost", "node-joined", "worker-killed")


def elastic_table(by_launcher):
    lines = ["| program, path | node lost | node joined | worker killed (static) |", "|---|---|---|---|"]
    for launcher, scenarios in by_launcher.items():
        cells = []
        for sc in ELASTIC_SCENARIOS:
            r = scenarios.get(sc)
            if r is None or r.get("median_s") is None:
                cells.append("–" if r is None else "failed: " + r.get("note", "no trial"))
                continue
            cell = f"{r['median_s']:.1f} s ({r['min_s']:.1f}–{r['max_s']:.1f})"
            if len(r["trials"]) < 5 or r.get("note"):
                cell += f", {len(r['trials'])} trials" + (f": {r['note']}" if r.get("note") else "")
            cells.append(cell)
        lines.append(f"| {ELASTIC_PATHS[launcher]} | " + " | ".join(cells) + " |")
    return lines


# bench/etcd_recovery.sh's paths, in the table's order.
ETCD_PATHS = {
    "in-place": "ddp-launch, etcd (v3): C++ probe, in place",
    "restart": "ddp-launch, etcd (v3): PyTorch job (gloo), restarted",
    "torchrun-etcd-v2": "torchrun 1.13, etcd-v2: the same PyTorch job",
    "torchrun-c10d": "torchrun 1.13, c10d (store on the first node): the same PyTorch job",
}


def etcd_recovery_lines(rows):
    lines = ["### Recovery from the first node's loss, etcd", "",
             "`bench/etcd_recovery.sh`: " + rows[0]["setup"] + f" ({rows[0]['etcd']}); the first launcher "
             "and its worker SIGKILLed. Seconds to the survivors' first step at world 2, median (min–max).", "",
             "| launcher, path | `--rdzv-conf` | first node lost | trials |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (list(ETCD_PATHS).index(r["path"]), len(r["conf"]))):
        cell = (f"{r['median_s']:.1f} s ({r['min_s']:.1f}–{r['max_s']:.1f})" if r["median_s"] is not None
                else "no recovery: " + r["notes"][0])
        ok = f"{len(r['trials'])} of " if r["median_s"] is not None and len(r["trials"]) < len(r["notes"]) else ""
        lines.append(f"| {ETCD_PATHS[r['path']]} | `{r['conf']}` | {cell} | {ok}{len(r['notes'])} |")
    return lines + [""]


def scale_table(rows):
    def cell(r, key, fmt):
        return fmt.format(r[key]) if r.get(key) is not None else "–"

    def host_cell(r):
        c = cell(r, "store_host_cores", "{:.3f} cores")
        return c + " (etcd)" if r.get("store_host") == "etcd" and c != "–" else c

    lines = ["| launcher | backend | nodes | every worker started | steady CPU, every launcher "
             "| the store host's launcher, or etcd | requests/s at the store "
             "| a SIGKILLed launcher: first survivor out | last survivor out "
             "| lost unprovoked | trials (load average) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        who = r["launcher"] + (f" `{r['args']}`" if r.get("args") else "")
        who += f" `--rdzv-conf {r['conf']}`" if r.get("conf") else ""
        trials = f"{r['trials']} ({r['load_avg']})" + (f": {r['note']}" if r.get("note") else "")
        lines.append(f"| {who} | {r['backend']} | {r['nnodes']} | {cell(r, 'formed_s', '{:.2f} s')} | "
                     f"{cell(r, 'steady_cores', '{:.3f} cores')} | {host_cell(r)} | "
                     f"{cell(r, 'store_requests_per_s', '{:,.0f}')} | {cell(r, 'noticed_s', '{:.1f} s')} | {cell(r, 'ended_s', '{:.1f} s')} | "
                     f"{r.get('lost_in_window', 0)} | {trials} |")
    return lines


def scale_lines(rows, run=None):
    r0 = rows[0]
    lines = ["### Launchers at scale", "",
             "`bench/scale.sh`: N launchers on this machine, one trivial worker each (a shell that notes its "
             "start, then sleeps), a static job (`--nnodes N --nproc-per-node 1`), default options unless the "
             "row names some. Seconds from the first launcher's start (it hosts the store) to the last "
             "worker's start; the CPU of every launcher together (all threads, from /proc) over "
             f"{r0['window_s']:.0f} s beginning {r0['settle_s']:.0f} s after the job formed, and of the store "
             "host's launcher alone (or of etcd, one local member, where it is the store); requests per second "
             "at the store over the same window (counted by our store server; etcd: its gRPC messages "
             "received); seconds from one launcher's SIGKILL (with its worker) to the first "
             "survivor's exit and the last's (exit 122, naming the lost node); launchers that exited with "
             "nothing killed. Medians of the trials; the load average when the row was written.", ""]
    lines += scale_table(rows) + [""]
    if run is not None:
        lines += [f"![formation, steady CPU and detection against the node count](img/{img_name(run, 'scale')})", ""]
    return lines


def scale_series(rows):
    """{series label: rows by node count}: one line per launcher, options and backend."""
    out = {}
    for r in rows:
        label = r["launcher"] + (f" {r['args']}" if r.get("args") else "") + (
            f" ({r['backend']})" if r["backend"] != "c10d" else "")
        out.setdefault(label, []).append(r)
    return {k: sorted(v, key=lambda r: r["nnodes"]) for k, v in out.items()}


def plot_scale(run, outdir, plt):
    figures = (("formed_s", "every worker started (s)"), ("steady_cores", "steady CPU, every launcher (cores)"),
               ("noticed_s", "SIGKILLed launcher: first survivor out (s)"))
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.4))
    for ax, (key, title) in zip(axes, figures):
        for i, (label, rows) in enumerate(scale_series(run.scale()).items()):
            pts = [(r["nnodes"], r[key]) for r in rows if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=label, color=f"C{i}")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("launchers (nodes)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"bench/scale.sh: {run.machine['cpu']}, {run.date}", fontsize=9)
    return save(fig, outdir / img_name(run, "scale"))


def floors_lines(rows):
    out = []
    for r in rows:
        bits = [f"{size_label(r['bytes'])}:"]
        for key, label in (("copy_us", "a copy of what the other core wrote"),
                           ("pass_us", "a 2-thread `a += b` pass"),
                           ("cma_us", "the cross-process (CMA) floor")):
            if r.get(key) is not None:
                bits.append(f"{label} {time_label(r[key])};")
        out.append("- " + " ".join(bits).rstrip(";"))
    return out


def img_name(run, what):
    return f"{run.name}-{what}.png"


def run_section(run):
    lines = [f"## {run.date}: {run.name}", "",
             f"Machine: {run.machine_line()}. {run.note}", "", "Commands:", ""]
    lines += [f"- `{name}`: `{cmd}`" for name, cmd in run.files.items()]
    lines.append("")
    for (op, world), by_impl in sorted(run.collective().items()):
        lines += [f"### {op}, {world} ranks, float32", ""]
        lines += collective_table(by_impl)
        lines += ["", f"Medians of the loops; the widest spread between a size's fastest and slowest loop "
                      f"is {spread_note(by_impl):.0%} of its median.", ""]
        if op == "all_reduce":
            lines += [f"![{op}, {world} ranks: bandwidth against size](img/{img_name(run, f'{op}-{world}')})", ""]
    systems = run.torch()
    if systems:
        p = systems["ours"]["params"]
        lines += ["### DDP step against PyTorch's", "",
                  f"`ddp-bench torch`: 6 × (Linear(2048, 2048) + ReLU), {p:,} parameters, batch 32 per rank, "
                  "2 ranks, one thread each; our LibTorch `DistributedDataParallel` and PyTorch's "
                  "(`torch.nn.parallel.DistributedDataParallel` over gloo) in alternating rounds, medians over "
                  "rounds of each round's median step (the slowest rank's).", ""]
        lines += torch_table(systems)
        lines += ["", f"![DDP step time, ours against PyTorch's](img/{img_name(run, 'ddp-step')})", ""]
    floors = run.floors()
    if floors:
        lines += ["### The machine's floors", "", "`ddp-bench floors`, right after the runs above:", ""]
        lines += floors_lines(floors)
        lines.append("")
    if run.etcd_recovery():
        lines += etcd_recovery_lines(run.etcd_recovery())
    elastic = run.elastic()
    if elastic:
        ours = [r for k, sc in elastic.items() if k != "torchrun" for r in sc.values()]
        conf = ours[0]["setup"].rpartition("--rdzv-conf ")[2] if ours else "last_call_timeout=1"
        lines += ["### Recovery of elastic jobs", "",
                  "`bench/elastic.sh`: 2 launchers on localhost, one worker each, c10d rendezvous, "
                  f"`--monitor-interval 1`, ddp-launch's `--rdzv-conf {conf}`"
                  + (" (torchrun's `last_call_timeout=1`)" if "torchrun" in elastic else "") + ". Seconds from a node's SIGKILL to the first step of "
                  "the smaller world (`--nnodes 1:2`), from a new node's start to the first step of the larger "
                  "one, and from a worker's SIGKILL to the first step of the restarted round (`--nnodes 2`, "
                  "`--max-restarts 1`); medians (min–max) of the trials. In place, no worker is restarted, so "
                  "it has no worker-killed row. Compare paths of the same program: the PyTorch rows start "
                  "Python and import torch, the C++ probe starts in milliseconds, and the demo loads LibTorch, "
                  "the data set and its checkpoint.", ""]
        lines += elastic_table(elastic)
        lines.append("")
    scale = run.scale()
    if scale:
        lines += scale_lines(scale, run)
    return lines


def page(runs):
    lines = ["# Benchmarks", "",
             "<!-- Generated by bench/report.py from bench/results/ (`make benchmarks`); edit those, "
             "not this page. -->", "",
             "Every figure here comes from a result file under `bench/results/`: the JSON rows that "
             "`ddp-bench` prints, each with the machine it ran on. `make benchmarks` (bench/report.py) "
             "writes this page, its plots and the README's headline table from them; "
             "`bench_report_test` fails when they differ.", "",
             "How `ddp-bench` measures (docs/design.md): every peer in the same run, interleaved, by the "
             "same harness; an op's time is the slowest rank's per-op time over a loop of `--iters` ops; "
             "each figure is the median of `--repeats` loops; every result is checked, and a wrong one "
             "is an error, never a row. Open MPI's `MPI_Allreduce` and Gloo's own algorithms are called "
             "directly (`--compare mpi,gloo`), not through our backends.", "",
             "Runs, newest first:", ""]
    newest_first = list(reversed(runs))
    lines += [f"- [{r.date}: {r.name}](#{anchor(r)}): {r.machine_line()}" for r in newest_first]
    lines += ["- [History](#history): earlier measurements on six machines, as they were recorded", ""]
    for r in newest_first:
        lines += run_section(r)
    history = RESULTS / "history.md"
    if history.is_file():
        lines += ["## History", "",
                  "Carried over verbatim from `bench/results/history.md`: measurements recorded in the "
                  "README and docs/tcp.md before this page existed, each with its date and machine. "
                  "They describe the code of their day; git has the code.", ""]
        lines += history.read_text().rstrip("\n").splitlines()
    return "\n".join(lines).rstrip("\n") + "\n"


def anchor(run):
    text = f"{run.date}: {run.name}".lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def headline(run):
    """The README's block: one table, each of ours against its peer, the machine named."""
    if run is None:
        return [BEGIN, "No run under `bench/results/` yet: [docs/benchmarks.md](docs/benchmarks.md) "
                "holds the earlier measurements.", END]
    coll = run.collective().get(("all_reduce", 2))
    systems = run.torch()
    note = run.short_note.rstrip(".")
    lines = [BEGIN,
             f"{run.machine['cpu']}, {run.machine['online_cpus']} CPUs, {run.date}: {note[:1].lower() + note[1:]}. "
             "Every run, its machine and command: [docs/benchmarks.md](docs/benchmarks.md).", "",
             "| 2 ranks, one host | ours | Open MPI | Gloo |" + (" PyTorch |" if systems else ""),
             "|---|---|---|---|" + ("---|" if systems else "")]
    if coll:
        ours = coll.get(("tcp", "host"), {})
        for b in sorted(ours):
            cells = [f"all_reduce {size_label(b)}", time_label(ours[b]["median_us"])]
            for impl in (("mpi-direct", "host"), ("gloo-direct", "host")):
                row = coll.get(impl, {}).get(b)
                cells.append(time_label(row["median_us"]) if row else "–")
            if systems:
                cells.append("–")
            lines.append("| " + " | ".join(cells) + " |")
    if systems:
        o, p = systems["ours"], systems["pytorch"]
        lines.append(f"| DDP step, 6 × Linear(2048, 2048) | {time_label(o['ddp_ms'] * 1e3)} (LibTorch) | – | – | "
                     f"{time_label(p['ddp_ms'] * 1e3)} (DDP over gloo) |")
    if coll:
        lines += ["", f"![all_reduce bandwidth against size: ours, Open MPI, Gloo](docs/img/{img_name(run, 'all_reduce-2')})"]
    lines += [END]
    return lines


def with_headline(readme_text, block):
    head, sep, rest = readme_text.partition(BEGIN)
    if not sep:
        raise ResultError(f"README.md: no line '{BEGIN}' to put the headline after")
    _, sep, tail = rest.partition(END)
    if not sep:
        raise ResultError(f"README.md: no '{END}' after the headline's start")
    return head + "\n".join(block) + tail


def plot(runs, outdir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for run in runs:
        for (op, world), by_impl in run.collective().items():
            if op != "all_reduce":
                continue
            fig, ax = plt.subplots(figsize=(6.4, 3.8))
            for impl, label in columns(by_impl):
                cells = by_impl[impl]
                sizes = sorted(cells)
                ax.plot(sizes, [cells[b]["algbw_GBps"] for b in sizes], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            sizes = sorted({b for cells in by_impl.values() for b in cells})
            ax.set_xticks(sizes, [size_label(b) for b in sizes], fontsize=8, rotation=30)
            ax.set_xlabel("buffer")
            ax.set_ylabel("buffer bytes / time (GB/s)")
            ax.set_title(f"all_reduce, {world} ranks, float32: {run.machine['cpu']}, {run.date}", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8)
            written.append(save(fig, outdir / img_name(run, f"{op}-{world}")))
        systems = run.torch()
        if systems:
            fig, ax = plt.subplots(figsize=(6.4, 3.6))
            names = [("ours", "ours (LibTorch)"), ("pytorch", "PyTorch DDP (gloo)")]
            for i, (key, label) in enumerate(names):
                r = systems[key]
                ax.barh([i + 0.2], [r["ddp_ms"]], height=0.4, color="C0" if key == "ours" else "C1",
                        label="DDP step" if i == 0 else None)
                ax.barh([i - 0.2], [r["local_ms"]], height=0.4, color="0.7",
                        label="step without communication" if i == 0 else None)
                ax.plot(r["ddp_ms_per_round"], [i + 0.2] * len(r["ddp_ms_per_round"]), "k.", markersize=4)
            ax.set_yticks(range(len(names)), [label for _, label in names])
            ax.set_xlabel("ms per step (median over rounds; dots: each round)")
            ax.set_title(f"DDP step, 6 x Linear(2048, 2048), 2 ranks: {run.machine['cpu']}, {run.date}",
                         fontsize=9)
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2)
            written.append(save(fig, outdir / img_name(run, "ddp-step")))
        if run.scale():
            written.append(plot_scale(run, outdir, plt))
    return written


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def differs(path, want):
    have = path.read_text() if path.is_file() else ""
    if have == want:
        return False
    diff = difflib.unified_diff(have.splitlines(), want.splitlines(), str(path.relative_to(ROOT)),
                                "generated", lineterm="", n=1)
    print("\n".join(list(diff)[:60]))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page or README differ")
    ap.add_argument("--no-plots", action="store_true", help="leave docs/img alone")
    ap.add_argument("--plots-to", type=pathlib.Path, help="draw the plots into this folder instead")
    args = ap.parse_args()
    try:
        runs = load_runs()
        text = page(runs)
        collective_runs = [r for r in runs if r.collective()]  # the headline's (an elastic-only run has none)
        readme = with_headline(README.read_text(), headline(collective_runs[-1] if collective_runs else None))
    except (ResultError, KeyError, TypeError) as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 1
    if args.check:
        stale = [p for p, want in ((PAGE, text), (README, readme)) if differs(p, want)]
        if stale:
            print(f"report.py: {', '.join(str(p.relative_to(ROOT)) for p in stale)} differ from bench/results/: "
                  "run `make benchmarks` and commit", file=sys.stderr)
            return 1
    else:
        PAGE.write_text(text)
        README.write_text(readme)
    outdir = args.plots_to or (None if args.check or args.no_plots else IMG)
    if outdir is None:
        return 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("report.py: no matplotlib (Debian's python3-matplotlib): plots not drawn", file=sys.stderr)
        return 77
    for path in plot(runs, outdir):
        print(f"report.py: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
