#!/usr/bin/python3
"""The plots of docs/benchmarks.md and the README (docs/img/*.png), drawn with matplotlib (bench/report.py)."""
from report_runs import img_name, size_label
from report_sections import columns, scale_series

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


