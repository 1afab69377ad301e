"""Reports of a sweep: `summary.json` (`sweep_summary`), the console lines (`sweep_report_lines`) and the figures
`envelopes.png` (`plot_envelopes`) and `histograms.png` (`plot_histograms`)."""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._analysis._studies._outputs import OUTPUTS
from .._analysis._studies._stats import summary_metrics
from .._simulation._trajectory import Trajectory, failure_reason
from ._plot import pyplot, shown

__all__ = ["plot_envelopes", "plot_histograms", "sweep_report_lines", "sweep_summary"]


def _stats(x: np.ndarray) -> dict[str, float]:
    if x.size == 0:
        return {}
    p = np.percentile(x, [5, 50, 95])
    return {
        "min": float(x.min()),
        "p5": float(p[0]),
        "p50": float(p[1]),
        "p95": float(p[2]),
        "max": float(x.max()),
        "mean": float(x.mean()),
        "std": float(x.std()),
    }


MAX_LISTED_FAILURES = 1000  # summary.json lists at most this many failed members (all are counted)


def sweep_summary(sweep, params: Mapping[str, np.ndarray], metrics: Mapping[str, np.ndarray], success: np.ndarray,
                  result: np.ndarray, wall_s: float, labels: Mapping[str, tuple] | None = None) -> dict:
    """The `summary.json` contents of a sweep (a `Sweep`, `_jobs._sweep.load_sweep`): counts, failures (index, reason;
    the first `MAX_LISTED_FAILURES`), parameter statistics, and the statistics over successful members of every
    metric (`metrics`: `{name: (members, ...)}`; `labels`: `{name: (component labels, unit)}`, default the
    summary's own: peak hub rate, final and peak hinge angle per panel)."""
    ok = np.asarray(success, dtype=bool)
    labels = labels or _summary_labels(sweep.scenario.spacecraft.panels.labels)
    stats = {}
    for name, v in metrics.items():
        comps, unit = labels[name]
        x = np.asarray(v)[ok].reshape(int(ok.sum()), -1)
        for i, lab in enumerate(comps or [None]):
            stats[f"{name}{'' if lab is None else f'[{lab}]'} [{unit}]"] = _stats(x[:, i])
    failed = np.flatnonzero(~ok)
    codes = np.asarray(result)
    return {
        "sweep": sweep.source,
        "scenario": sweep.scenario_path,
        "members": sweep.members,
        "seed": sweep.seed,
        "succeeded": int(ok.sum()),
        "failed": int(failed.size),
        "failures": [{"member": int(m), "reason": failure_reason(int(codes[m]), sweep.scenario.simulation)}
                     for m in failed[:MAX_LISTED_FAILURES]],
        "wall_s": wall_s,
        "dispersions": [
            {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
            for d in sweep.dispersions
        ],
        "parameters": {k: _stats(np.asarray(v).reshape(len(v), -1)[ok].ravel()) for k, v in params.items()},
        "statistics (successful members)": stats,
    }


def _summary_labels(panels: Sequence[str]) -> dict:
    """`{name: (component labels, unit)}` of the summary's metrics, from their declarations."""
    return {n: (tuple(panels) if OUTPUTS[n].kind == "vector" else (), OUTPUTS[n].unit)
            for n in ("peak_hub_rate", "final_theta", "peak_abs_theta")}


MAX_HISTOGRAMS = 15  # panels of histograms.png


def plot_envelopes(summary: Mapping[str, Any], panel_names: Sequence[str], f, fmt: str = "png") -> None:
    """Envelopes of the hub rate components and the hinge angles over the members (from `summarize`, or a
    campaign's `envelopes`, whose bands are at the times `t_bands`), one axis per channel so that no band hides
    another: min-max (light), the percentile bands from the outside in (p1-p99, p5-p95: darker), the median."""
    plt = pyplot()
    t = summary["t"]
    channels = [("omega_BN_B", j, f"omega_BN_B_{j + 1}", "rad/s") for j in range(3)]
    channels += [("theta", i, f"theta_{n}", "rad") for i, n in enumerate(panel_names)]
    ncol = 3
    nrow = math.ceil(len(channels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(12, 2.6 * nrow + 0.8), sharex=True, squeeze=False)
    p = summary["percentiles"]
    mid = len(p) // 2
    tb = summary.get("t_bands", t)
    for ax, (key, j, label, unit) in zip(axes.flat, channels):
        s = summary[key]
        col = "C0" if key == "omega_BN_B" else "C1"
        ax.fill_between(t, shown(s["min"][:, j], unit)[0], shown(s["max"][:, j], unit)[0], color=col, alpha=0.15,
                        lw=0, label="min-max")
        for k in range(mid):
            ax.fill_between(tb, shown(s["percentiles"][k][:, j], unit)[0],
                            shown(s["percentiles"][-1 - k][:, j], unit)[0], color=col, alpha=0.4 * (k + 1) / mid,
                            lw=0, label=f"p{p[k]:g}-p{p[-1 - k]:g}")
        ax.plot(tb, shown(s["percentiles"][mid][:, j], unit)[0], color=col, lw=1.2, label=f"median (p{p[mid]:g})")
        ax.set_title(label, fontsize="small")
        ax.set_ylabel(f"[{shown(0.0, unit)[1]}]", fontsize="small")
        ax.grid(alpha=0.3)
    spare = list(axes.flat)[len(channels):]
    for ax in spare:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    fig.suptitle(f"hub rates and hinge angles over {summary['succeeded']} of {summary['members']} members")
    # the legend off the bands: in a spare cell of the grid, or below the grid
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if spare:
        spare[0].legend(handles, labels, loc="center", fontsize="small", title="over the members")
        fig.tight_layout()
    else:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="small")
        fig.tight_layout(rect=(0.0, 0.4 / fig.get_figheight(), 1.0, 1.0))
    fig.savefig(f, format=fmt)
    plt.close(fig)


def plot_histograms(
    params: Mapping[str, np.ndarray], outcomes: Trajectory | Mapping[str, np.ndarray], panel_names: Sequence[str], f,
    fmt: str = "png", units: Mapping[str, str] | None = None, success: np.ndarray | None = None,
    labels: Mapping[str, tuple] | None = None,
) -> None:
    """Histograms of the sampled parameters (first component of vectors; `units` by name, from the registry) and
    of the outcomes over the successful members (at most `MAX_HISTOGRAMS` in all), angles in deg. `outcomes`: a
    batched `Trajectory` (its peak $|\\omega|$ and final $\\theta$), or metrics `{name: (members, ...)}` with their
    `success` and `labels` (`{name: (component labels, unit)}`, default the summary's)."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    if isinstance(outcomes, Trajectory):
        success, outcomes = np.asarray(outcomes.success), summary_metrics(outcomes)
        outcomes = {"peak_hub_rate": outcomes["peak_hub_rate"], "final_theta": outcomes["final_theta"]}
    labels = labels or _summary_labels(panel_names)
    first = next(iter(outcomes.values()), np.zeros(0))
    ok = np.ones(len(first), dtype=bool) if success is None else np.asarray(success, dtype=bool)
    units = units or {}
    # (name, a member's values (members,), the members shown (None: all), unit): each panel's values selected and
    # converted as it is drawn, so that one of them is in memory at a time (a million members: 8 MB each)
    items = [(k + ("[1]" if np.ndim(v) > 1 else ""), np.asarray(v).reshape(len(v), -1)[:, 0], None, units.get(k, ""))
             for k, v in params.items()]
    if ok.any():
        for name, v in outcomes.items():
            comps, unit = labels[name]
            x = np.asarray(v).reshape(len(ok), -1)
            for i, lab in enumerate(comps or [None]):
                items.append((name if lab is None else f"{name}[{lab}]", x[:, i], ok, unit))
    shown_of = f"; the first {MAX_HISTOGRAMS} of {len(items)} panels" if len(items) > MAX_HISTOGRAMS else ""
    items = items[:MAX_HISTOGRAMS]
    ncol = 3
    nrow = math.ceil(len(items) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(11, 2.9 * nrow), squeeze=False)
    for ax, (name, values, which, unit) in zip(axes.flat, items):
        x, unit = shown(values if which is None else values[which], unit)
        ax.hist(x, bins=max(5, min(50, int(np.sqrt(len(x))))))
        ax.ticklabel_format(axis="x", useOffset=False)  # (an offset text would sit on the axis label)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.set_xlabel(f"{name} [{unit}]", fontsize=9)
        ax.set_ylabel("members [-]", fontsize=9)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    fig.suptitle(f"dispersed parameters ({len(ok)} members) and outcomes ({int(ok.sum())} successful members)"
                 + shown_of)
    fig.tight_layout()
    fig.savefig(f, format=fmt)
    plt.close(fig)


def sweep_report_lines(path: str, sweep, summary, wall_s: float) -> list[str]:
    """The console report of `jaxhinge sweep`: counts and wall time, the 5/50/95 % points of each statistic."""
    lines = [(f"sweep               {path}: {sweep.members} members, {summary['succeeded']} succeeded, "
              f"{summary['failed']} failed, {wall_s:.2f} s wall (incl. compilation)")]
    for key, st in summary["statistics (successful members)"].items():
        if st:
            lines.append(f"{key:<36} p5 {st['p5']: .6e}  p50 {st['p50']: .6e}  p95 {st['p95']: .6e}")
    lines.append(f"output              {sweep.out_dir}")
    return lines
