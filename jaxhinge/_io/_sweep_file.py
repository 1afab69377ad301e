"""SWEEP files (`jaxhinge sweep SWEEP.toml`): a Monte Carlo or grid sweep of a scenario, and its outputs.

```toml
scenario = "spacecraft.toml"   # required; the nominal scenario, relative to this file
members = 200                  # required; integer > 0
seed = 0                       # integer >= 0 (default 0): jax.random seed of the draws
chunk_size = 256               # integer > 0 (default 256): members per compiled call

[[dispersions]]                # one or more; keys as in `jaxhinge._analysis._batch` (check_dispersions)
param = "p0.k"
dist = "uniform"
low = 80.0
high = 120.0

[output]                       # optional
dir = "out"                    # relative to this file (default "<sweep file name>_out"); created if missing
```

Outputs in `dir`: `sweep.npz` (sampled parameters, per-member success and trajectories), `summary.json`
(counts, failures, parameter and output statistics), `envelopes.png`, `histograms.png`; written to temporary
files and renamed at the end (`write_output_files`). The sampling and the batched runs are
`jaxhinge._analysis._batch`'s.
"""

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._analysis._batch import check_dispersions, failure_reasons
from .._model._params import resolve
from .._model._scenario import Scenario
from .._simulation._simulate import Trajectory
from ._files import _Checker, write_json, write_output_files
from ._scenario_file import load_scenario

_SWEEP_KEYS = ("scenario", "members", "seed", "chunk_size", "dispersions", "output")
_OUTPUT_KEYS = ("dir",)
_ALIASES = {
    "n": "members",
    "samples": "members",
    "runs": "members",
    "chunk": "chunk_size",
    "dispersion": "dispersions",
    "out": "dir",
}
_DESCRIPTION = {
    "scenario": "the nominal scenario TOML file, relative to this file",
    "members": "number of dispersed runs, an integer > 0",
    "dispersions": "one or more [[dispersions]] tables",
}
OUTPUT_FILES = ("sweep.npz", "summary.json", "envelopes.png", "histograms.png")


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A validated SWEEP file: the nominal scenario, dispersions, member count, seed, chunk size, output dir."""

    source: str
    scenario_path: str
    scenario: Scenario
    dispersions: list
    members: int
    seed: int
    chunk_size: int
    out_dir: str


def load_sweep(path: str | os.PathLike, *, out_dir: str | None = None) -> Sweep:
    """Read and validate a SWEEP TOML file (schema: this module's docstring; `jaxhinge sweep --help`).
    Relative paths (`scenario`, `output.dir`) are relative to the SWEEP file. Everything, the output folder
    included, is checked before any compute.

    **Arguments:** `path` (the file), `out_dir` (an output folder that replaces `[output] dir`, checked
    instead of it).

    **Raises:** `ScenarioError` with a one-line message `SWEEP.toml: field = value: what is allowed`.
    """
    source = os.fspath(path)
    ck = _Checker(source, descriptions=_DESCRIPTION, aliases=_ALIASES)
    data = ck.read_toml("sweep file")
    ck.keys(data, None, _SWEEP_KEYS, ("scenario", "members", "dispersions"))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")
    members = ck.integer(data["members"], "members")
    seed = ck.integer(data.get("seed", 0), "seed", 0)
    chunk_size = ck.integer(data.get("chunk_size", 256), "chunk_size")
    out = ck.section(data, "output", _OUTPUT_KEYS)
    default_dir = os.path.splitext(os.path.basename(source))[0] + "_out"
    out_dir = ck.output_folder(out, default_dir, OUTPUT_FILES, out_dir)
    disp = data["dispersions"]
    if not isinstance(disp, list) or not disp:
        raise ck.bad("dispersions", disp, "must be one or more [[dispersions]] tables")
    scenario = load_scenario(scen_path)
    check_dispersions(scenario, disp, members, source=source)
    return Sweep(source, scen_path, scenario, disp, members, seed, chunk_size, out_dir)


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


def sweep_summary(sweep: Sweep, params: Mapping[str, np.ndarray], traj: Trajectory, wall_s: float) -> dict:
    """The `summary.json` contents: counts, failures (index, reason), parameter statistics, and statistics
    over successful members of peak $|\\omega_{BN}|$, final/peak $|\\theta|$ per panel."""
    ok = np.asarray(traj.success)
    names = sweep.scenario.spacecraft.panels.labels
    omega = np.linalg.norm(np.asarray(traj.omega_BN_B)[ok], axis=-1)
    theta = np.asarray(traj.theta)[ok]
    stats = {"peak_abs_omega_BN_B [rad/s]": _stats(omega.max(axis=1) if omega.size else omega)}
    for i, n in enumerate(names):
        stats[f"final_theta[{n}] [rad]"] = _stats(theta[:, -1, i] if theta.size else theta)
        stats[f"peak_abs_theta[{n}] [rad]"] = _stats(
            np.abs(theta[:, :, i]).max(axis=1) if theta.size else theta
        )
    return {
        "sweep": sweep.source,
        "scenario": sweep.scenario_path,
        "members": sweep.members,
        "seed": sweep.seed,
        "succeeded": int(ok.sum()),
        "failed": int((~ok).sum()),
        "failures": [{"member": m, "reason": r} for m, r in failure_reasons(traj, sweep.scenario.simulation)],
        "wall_s": wall_s,
        "dispersions": [
            {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
            for d in sweep.dispersions
        ],
        "parameters": {k: _stats(np.asarray(v).reshape(len(v), -1)[ok].ravel()) for k, v in params.items()},
        "statistics (successful members)": stats,
    }


def plot_envelopes(summary: Mapping[str, Any], panel_names: Sequence[str], f, fmt: str = "png") -> None:
    """Hub rate and hinge angle envelopes: min-max band, percentile band, median (from `summarize`)."""
    from ._plot import _plt, legend_outside, shown

    plt = _plt()
    t = summary["t"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for ax, key, labels, unit in (
        (axes[0], "omega_BN_B", [f"omega_BN_B_{j + 1}" for j in range(3)], "rad/s"),
        (axes[1], "theta", list(panel_names), "rad"),
    ):
        s = summary[key]
        mid = len(s["percentiles"]) // 2
        for j, lab in enumerate(labels):
            (line,) = ax.plot(t, shown(s["percentiles"][mid][:, j], unit)[0], label=f"{lab} median")
            col = line.get_color()
            ax.fill_between(t, shown(s["min"][:, j], unit)[0], shown(s["max"][:, j], unit)[0], color=col,
                            alpha=0.15, lw=0)
            ax.fill_between(t, shown(s["percentiles"][0][:, j], unit)[0], shown(s["percentiles"][-1][:, j], unit)[0],
                            color=col, alpha=0.35, lw=0)
        ax.set_ylabel(f"{'hub rate ' if key == 'omega_BN_B' else 'hinge angle '}{key} [{shown(0.0, unit)[1]}]")
        legend_outside(ax)
        ax.grid(alpha=0.3)
    p = summary["percentiles"]
    axes[0].set_title(
        f"{summary['succeeded']}/{summary['members']} members: min-max (light), "
        f"p{p[0]:g}-p{p[-1]:g} (dark), median"
    )
    axes[1].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(f, format=fmt)
    plt.close(fig)


def plot_histograms(
    params: Mapping[str, np.ndarray], traj: Trajectory, panel_names: Sequence[str], f, fmt: str = "png",
    units: Mapping[str, str] | None = None,
) -> None:
    """Histograms of the sampled parameters (first component of vectors; `units` by name, from the registry) and
    of peak $|\\omega|$ and final $\\theta$ (successful members), angles in deg."""
    from ._plot import _plt, shown

    plt = _plt()
    ok = np.asarray(traj.success)
    units = units or {}
    items = [(k + ("[1]" if np.ndim(v) > 1 else ""), *shown(np.asarray(v).reshape(len(v), -1)[:, 0], units.get(k, "")))
             for k, v in params.items()]
    if ok.any():
        items.append(("peak |omega_BN_B|", *shown(
            np.linalg.norm(np.asarray(traj.omega_BN_B)[ok], axis=-1).max(axis=1), "rad/s")))
        for i, n in enumerate(panel_names):
            items.append((f"final theta_{n}", *shown(np.asarray(traj.theta)[ok][:, -1, i], "rad")))
    ncol = 3
    nrow = math.ceil(len(items) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(11, 2.9 * nrow), squeeze=False)
    for ax, (name, x, unit) in zip(axes.flat, items):
        ax.hist(x, bins=max(5, min(50, int(np.sqrt(len(x))))))
        ax.set_xlabel(f"{name} [{unit}]", fontsize=9)
        ax.set_ylabel("members [-]", fontsize=9)
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(f, format=fmt)
    plt.close(fig)


def write_outputs(
    sweep: Sweep,
    params: Mapping[str, np.ndarray],
    traj: Trajectory,
    summary: Mapping[str, Any],
    envelopes: Mapping[str, Any],
    out_dir: str | None = None,
) -> list[str]:
    """Write `sweep.npz`, `summary.json`, `envelopes.png` and `histograms.png` into `out_dir` (default
    `sweep.out_dir`), all or nothing. `summary` is `sweep_summary`'s, `envelopes` `summarize`'s.
    **Returns:** the paths written."""
    names = sweep.scenario.spacecraft.panels.labels
    units = {k: resolve(sweep.scenario, k).unit for k in params}
    arrays = {f"param_{k}": np.asarray(v) for k, v in params.items()}
    arrays.update(
        param_names=np.array(list(params), dtype=str), panel_names=np.array(names, dtype=str),
        success=np.asarray(traj.success), result=np.asarray(traj.result),
        t=np.asarray(traj.t)[0], theta=np.asarray(traj.theta), thetaDot=np.asarray(traj.thetaDot),
        omega_BN_B=np.asarray(traj.omega_BN_B), sigma_BN=np.asarray(traj.sigma_BN),
    )
    files = {
        "sweep.npz": lambda f: np.savez(f, **arrays),
        "summary.json": lambda f: write_json(summary, f),
        "envelopes.png": lambda f: plot_envelopes(envelopes, names, f),
        "histograms.png": lambda f: plot_histograms(params, traj, names, f, units=units),
    }
    return write_output_files(sweep.out_dir if out_dir is None else out_dir, files)
