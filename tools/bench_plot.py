"""PNG plots of a suite run (``nnhal bench --plot DIR``); needs matplotlib (``[plot]``).

- ``latency_<workload>.png``: median latency against iterations, one line per way;
- ``breakdown.png``: the per-operation profile per workload, as shares of one
  execution stacked by role (condition, body, branch, main, control);
- ``compare.png``: per-iteration cost of every way per workload (log scale).
"""

from __future__ import annotations

import os


def write_plots(doc: dict, directory: str) -> list[str]:
    """The files written; MissingDependency (``nnhal.tools.optional``) without matplotlib."""
    from nnhal.tools.optional import require

    matplotlib = require("matplotlib", "--plot", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(directory, exist_ok=True)
    written: list[str] = []
    for w in doc["workloads"]:
        fig, ax = plt.subplots(figsize=(6, 4))
        ways = sorted({c["way"] for c in w["cases"]})
        for way in ways:
            pts = sorted(
                (c["iterations"] or 0, c["stats"]["p50"]) for c in w["cases"] if c["way"] == way
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=way)
        ax.set_xlabel("WHILE iterations")
        ax.set_ylabel("median latency (µs)")
        ax.set_title(w["name"])
        ax.legend(fontsize=7)
        path = os.path.join(directory, f"latency_{w['name'].replace(':', '_')}.png")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)

    profiled = [w for w in doc["workloads"] if w.get("profile")]
    if profiled:
        fig, ax = plt.subplots(figsize=(7, 4))
        roles = ["condition", "body", "branch", "main", "control"]
        bottom = [0.0] * len(profiled)
        for role in roles:  # shares of each execution (workloads differ by 100x in µs)
            values = [
                100 * w["profile"]["roles_us"].get(role, 0.0) / max(w["profile"]["wall_us"], 1e-9)
                for w in profiled
            ]
            ax.bar([w["name"] for w in profiled], values, bottom=bottom, label=role)
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_ylabel("% of one execution (generic executor)")
        ax.legend(fontsize=7)
        path = os.path.join(directory, "breakdown.png")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)

    fig, ax = plt.subplots(figsize=(8, 4))
    ways = sorted({way for w in doc["workloads"] for way, f in w["fit"].items() if f})
    width = 0.8 / max(1, len(ways))
    for k, way in enumerate(ways):
        xs, ys = [], []
        for i, w in enumerate(doc["workloads"]):
            fit = w["fit"].get(way)
            if fit and not fit.get("noisy") and fit["per_iteration_us"] > 0:
                xs.append(i + k * width)
                ys.append(fit["per_iteration_us"])
        ax.bar(xs, ys, width=width, label=way)
    ax.set_xticks([i + 0.4 for i in range(len(doc["workloads"]))])
    ax.set_xticklabels([w["name"] for w in doc["workloads"]], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("µs per iteration")
    ax.legend(fontsize=7)
    path = os.path.join(directory, "compare.png")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    written.append(path)
    return written
