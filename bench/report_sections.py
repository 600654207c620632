#!/usr/bin/python3
"""docs/benchmarks.md's section for one run: its tables, from its rows (bench/report.py)."""
import statistics

from report_runs import ELASTIC_PATHS, IMPLS, PEERS, img_name, ratio_label, size_label, time_label

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

    def kb_cell(r):
        return f"{r['store_bytes_per_s'] / 1e3:,.0f} kB/s" if r.get("store_bytes_per_s") is not None else "–"

    def host_cell(r):
        c = cell(r, "store_host_cores", "{:.3f} cores")
        return c + " (etcd)" if r.get("store_host") == "etcd" and c != "–" else c

    def forming_cell(r):
        if r.get("formation_cpu_s") is None:
            return "–"
        host = r.get("formation_host_cpu_s")
        return f"{r['formation_cpu_s']:.1f} s" + (f" + {host:.1f} s" if host is not None else "")

    lines = ["| launcher | backend | nodes | every worker started | CPU to form: launchers + store host or etcd "
             "| steady CPU, every launcher "
             "| the store host's launcher, or etcd | requests/s at the store | bytes/s at the store "
             "| a SIGKILLed launcher: first survivor out | last survivor out "
             "| lost unprovoked | trials (load average) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        who = r["launcher"] + (f" `{r['args']}`" if r.get("args") else "")
        who += f" `--rdzv-conf {r['conf']}`" if r.get("conf") else ""
        trials = f"{r['trials']} ({r['load_avg']})" + (f": {r['note']}" if r.get("note") else "")
        lines.append(f"| {who} | {r['backend']} | {r['nnodes']} | {cell(r, 'formed_s', '{:.2f} s')} | {forming_cell(r)} | "
                     f"{cell(r, 'steady_cores', '{:.3f} cores')} | {host_cell(r)} | "
                     f"{cell(r, 'store_requests_per_s', '{:,.0f}')} | {kb_cell(r)} | {cell(r, 'noticed_s', '{:.1f} s')} | {cell(r, 'ended_s', '{:.1f} s')} | "
                     f"{r.get('lost_in_window', 0)} | {trials} |")
    return lines


def scale_lines(rows, run=None):
    r0 = rows[0]
    lines = ["### Launchers at scale", "",
             "`bench/scale.sh`: N launchers on this machine, one trivial worker each (a shell that notes its "
             "start, then sleeps), a static job (`--nnodes N --nproc-per-node 1`), default options unless the "
             "row names some. Seconds from the first launcher's start (it hosts the store) to the last "
             "worker's start, and the CPU seconds that took (every launcher's since its start; the store "
             "host's launcher's, or etcd's over the same time); the CPU of every launcher together (all threads, from /proc) over "
             f"{r0['window_s']:.0f} s beginning {r0['settle_s']:.0f} s after the job formed, and of the store "
             "host's launcher alone (or of etcd, one local member, where it is the store); requests per second "
             "and bytes per second (in and out) at the store over the same window (counted by our store "
             "server; etcd: its gRPC messages received and its client gRPC bytes); seconds from one launcher's SIGKILL (with its worker) to the first "
             "survivor's exit and the last's (exit 122, naming the lost node); launchers that exited with "
             "nothing killed. Medians of the trials; the load average when the row was written.", ""]
    lines += scale_table(rows) + [""]
    lines += scale_arithmetic_lines(rows)
    if run is not None:
        lines += [f"![formation, steady CPU and detection against the node count](img/{img_name(run, 'scale')})", ""]
    return lines


ARITHMETIC_NODES = 4096


def scale_arithmetic_lines(rows):
    """The steady costs at ARITHMETIC_NODES, scaled linearly from each series' largest N that ran its window."""
    lines = []
    for label, series in scale_series(rows).items():
        done = [r for r in series if r.get("steady_cores") is not None and r.get("store_requests_per_s") is not None]
        if not done:
            continue
        r = done[-1]
        k = ARITHMETIC_NODES / r["nnodes"]
        conf = f" `--rdzv-conf {r['conf']}`" if r.get("conf") else ""
        nbytes = (f"{r['store_bytes_per_s'] * k / 1e6:,.1f} MB/s" if r.get("store_bytes_per_s") is not None
                  else "not measured")
        host = f"{r['store_host_cores'] * k:.2f} cores" if r.get("store_host_cores") is not None else "–"
        lines.append(f"| {label}{conf} | {r['nnodes']} | {r['store_requests_per_s'] * k:,.0f} | {nbytes} | "
                     f"{host} | {r['steady_cores'] * k:.2f} cores |")
    if not lines:
        return []
    head = [f"Arithmetic for {ARITHMETIC_NODES:,} nodes: each series' steady costs at its largest N that ran the "
            f"window, times {ARITHMETIC_NODES:,} / N (every cost here grows linearly with the node count: one "
            "lease or beat per launcher, and nothing read per peer). Bytes: our server's socket payload, or "
            "etcd's client gRPC bytes (its JSON gateway's HTTP, which our client speaks, is larger); in and out "
            "together, TCP/IP headers not counted. The store host's CPU is the part one machine must carry.", "",
            f"| series | from N | requests/s at the store | bytes/s at the store | store host or etcd CPU "
            f"| all launchers' CPU |", "|---|---|---|---|---|---|"]
    return head + lines + [""]


def scale_series(rows):
    """{series label: rows by node count}: one line per launcher, options and backend."""
    out = {}
    for r in rows:
        label = r["launcher"] + (f" {r['args']}" if r.get("args") else "") + (
            f" ({r['backend']})" if r["backend"] != "c10d" else "")
        out.setdefault(label, []).append(r)
    return {k: sorted(v, key=lambda r: r["nnodes"]) for k, v in out.items()}


def launch_lines(rows):
    lines = ["### Launch time", "",
             "`bench/launch.sh`: wall time from start to exit of `ddp-launch --standalone --nproc-per-node N "
             "/bin/true` beside `mpirun -np N /bin/true` (and, where a row says so, ddp-launch built from an older "
             "commit), the commands alternated run by run; median (min–max) of the runs, the load average while "
             "they ran.", "",
             "| file | N | launcher | median | min–max | runs (load average) |", "|---|---|---|---|---|---|"]
    for r in rows:
        spread = f"{r['min_ms']:.1f}–{r['max_ms']:.1f} ms" if r.get("min_ms") is not None else "–"
        hung = f", {r['hung']} hung" if r.get("hung") else ""
        lines.append(f"| `{r['file']}` | {r['nproc']} | {r['launcher']} | {r['median_ms']:.1f} ms | {spread} | "
                     f"{r['runs']}{hung} ({r['load_avg']}) |")
    return lines + [""]


def placement_lines(rows):
    r0 = rows[0]
    lines = ["### Where the workers run", "",
             f"`bench/placement.sh`: a {size_label(r0['bytes'])} all_reduce between {r0['world_size']} ranks "
             f"(`ddp-bench collective`, {r0['iters']} ops per loop, median of {r0['repeats']} loops) under each "
             "placement, the placements in turn round by round; with two jobs at once, the slower job's figure. "
             "Median (min–max) over the rounds, the load average before and after.", "",
             "| placement | jobs at once | median | min–max | rounds (load average) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['placement']} | {r['jobs']} | {time_label(r['median_us'])} | "
                     f"{time_label(r['min_us'])}–{time_label(r['max_us'])} | {r['rounds']} "
                     f"({r['load_avg'][0]}–{r['load_avg'][1]}) |")
    return lines + [""]


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


HOOKS = [("compute", "compute only"), ("plain", "plain"), ("fp16", "fp16"),
         ("powersgd1", "PowerSGD 1"), ("powersgd2", "PowerSGD 2"), ("powersgd4", "PowerSGD 4")]


def hooks_lines(rounds):
    """ddp-bench hooks: each round's median step per hook, and PowerSGD rank 1 against fp16."""
    lines = ["### DDP's comm hooks", "",
             "`ddp-bench hooks`: the median step (the slowest rank's) of each hook, a round being every hook "
             "once in turn; a hook's bytes are what one rank hands its all_reduces a step. Read each hook "
             "against the compute-only step and fp16 of its own round.", "",
             "| file | " + " | ".join(label for _, label in HOOKS) + " | PowerSGD 1 / fp16 |",
             "| --- |" + " ---: |" * (len(HOOKS) + 1)]
    ratios = []
    for name, by_hook in rounds:
        cells = [f"{by_hook[h]['step_ms']:,.0f} ms" if h in by_hook else "–" for h, _ in HOOKS]
        ratio = "–"
        if "powersgd1" in by_hook and "fp16" in by_hook:
            ratios.append(by_hook["powersgd1"]["step_ms"] / by_hook["fp16"]["step_ms"])
            ratio = f"{ratios[-1]:.2f}"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    sent = {}
    for _, by_hook in rounds:
        for h, r in by_hook.items():
            sent.setdefault(h, r["bytes_per_step"])
    lines += ["", "Bytes a step: " + ", ".join(f"{label} {sent[h] / 1e6:.3g} MB" for h, label in HOOKS
                                               if h in sent and h != "compute") + "."]
    if ratios:
        faster = sum(1 for x in ratios if x < 1)
        lines.append(f"PowerSGD rank 1 against fp16: median {statistics.median(ratios):.2f} of fp16's step, "
                     f"faster in {faster} of {len(ratios)} rounds.")
    return lines + [""]


def run_section(run):
    lines = [f"## {run.date}: {run.name}", "",
             f"Machine: {run.machine_line()}. {run.note}", "",
             "Commands: " + "; ".join(f"`{name}`: `{cmd}`" for name, cmd in run.files.items()) + ".", ""]
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
    if run.launch():
        lines += launch_lines(run.launch())
    if run.placement():
        lines += placement_lines(run.placement())
    if run.hooks():
        lines += hooks_lines(run.hooks())
    scale = run.scale()
    if scale:
        lines += scale_lines(scale, run)
    return lines


