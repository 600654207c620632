#!/usr/bin/python3
"""The result files under bench/results/, read and checked: one Run per folder (bench/report.py)."""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

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
        self.superseded_by = meta.get("superseded_by")  # a newer run that measures it again: one line
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


    def launch(self):
        """bench/launch.sh's rows (launch*.jsonl): wall time of N trivial workers, per launcher."""
        rows = [dict(r, file=name) for name, rows in self.rows.items() if name.startswith("launch") for r in rows]
        return sorted(rows, key=lambda r: (r["file"], r["nproc"], r["launcher"])) or None

    def placement(self):
        """bench/placement.sh's rows (placement*.jsonl): one all_reduce size per placement."""
        return [r for name, rows in self.rows.items() if name.startswith("placement") for r in rows] or None

    def hooks(self):
        """ddp-bench hooks' rounds (hooks*.jsonl): [(file, {hook: row})], a round from each "compute" row on."""
        rounds = []
        for name, rows in self.rows.items():
            if not name.startswith("hooks"):
                continue
            for r in (r for r in rows if "hook" in r):
                if r["hook"] == "compute" or not rounds or rounds[-1][0] != name:
                    rounds.append((name, {}))
                if r["hook"] in rounds[-1][1]:
                    raise ResultError(f"{self.name}/{name}: hook {r['hook']!r} twice in one round")
                rounds[-1][1][r["hook"]] = r
        return rounds or None


# bench/elastic.sh's launchers (paths), in the table's order, with what each runs.
ELASTIC_PATHS = {
    "in-place": "C++ probe, in place (`ddp/elastic.h`)",
    "cpp-restart": "the same C++ probe, restarted",
    "cnn-in-place": "the demo CNN (LibTorch), in place (`--elastic-in-place`)",
    "cnn-restart": "the demo CNN (LibTorch), restarted from its checkpoint",
    "ddp-launch": "a PyTorch job (gloo), restarted",
    "torchrun": "the same PyTorch job under torchrun 1.13",
}

def load_runs():
    runs = [Run(d) for d in sorted(RESULTS.iterdir()) if d.is_dir()]
    runs.sort(key=lambda r: (r.date, r.name))
    return runs


def img_name(run, what):
    return f"{run.name}-{what}.png"

