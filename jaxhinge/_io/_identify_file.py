"""Telemetry FIT.toml files (a FIT.toml with a `[data]` table): identify parameters from measured time histories.

```toml
scenario = "spacecraft.toml"   # required; initial guesses of the free parameters, known loads, initial state

[data]                         # required (its presence makes this a telemetry fit); or several [[data]] tables
csv = "telemetry.csv"          # required; relative to this file; column t [s] + measured columns
columns = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_p0", "theta_p1"]   # required
sigma = [1e-5, 1e-5, 1e-5, 1e-4, 1e-4]   # required; 1-sigma noise per column (or one number): residual weights
sensors = {"omega_BN_B_1.bias" = 2e-4}   # fixed sensor-model values (or initial guesses of free ones)
scenario = "maneuver2.toml"    # this record's own scenario (initial state, loads; same panels); default: the top one

[fit]                          # required
free = ["p0.k", "p1.k", "p0.c", "p1.c"]  # required; also "p0.thetaInit", "hub.omega_BN_BInit" (3 components),
                               # "hub.omega_BN_BInit[2]" (one), "p0.k = p1.k" (tied), any dispersion name; sensor
                               # models "<column>.bias", "<column>.scale", "time_offset"; "data[k]." + a name:
                               # record k's own (several [[data]] records)
solver = "lm"                  # "lm" (Levenberg-Marquardt, default), "dogleg", "gauss_newton"
max_steps = 100                # solver steps per stage and start
rtol = 1e-8                    # solver termination tolerances
atol = 1e-8
starts = 1                     # multi-start: the guess plus starts-1 random starts, best chi2 kept
spread = 0.3                   # half-width of the random starts in the fitted coordinates (log: factor e^0.3)
seed = 0                       # of the random starts
horizon = "auto"               # growing horizon from the fastest mode; or fractions fitted in turn, e.g. [0.25, 0.5, 1]
max_step = 0.5                 # "lm": largest change of a fitted coordinate per step (0: unbounded optimistix LM)
estimate_initial_state = false # true: also fit each record's hub.omega_BN_BInit and hinge thetaInit, thetaDotInit
ident_rtol = 1e-6              # singular-value ratio below which a combination is undetermined
warn_rtol = 1e-2               # ... below which it is reported as poorly determined

[output]                       # optional
dir = "out"                    # relative to this file (default "out")
plots = true                   # fit.png (data vs fit per column) and residuals.png (residual / sigma)
```

Outputs in `dir`: `result.json`, `fitted_scenario.toml`, `fit.png`, `residuals.png`, written to temporary files
and renamed at the end (a failed run leaves no partial output).
"""

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._analysis._identify import SOLVERS, IdentifyResult, check_identify, identify
from .._analysis._lsq import FitError
from .._model._scenario import Scenario
from ._files import _Checker, least_squares_json, write_json, write_output_files
from ._files import json_number as _num
from ._scenario_file import load_scenario, scenario_toml
from ._telemetry import Telemetry, load_telemetry

_TOP = ("scenario", "data", "fit", "output")
_DATA = ("csv", "columns", "sigma", "sensors", "scenario")
_DATA_REQUIRED = ("csv", "columns", "sigma")
_FIT = ("free", "solver", "max_steps", "rtol", "atol", "starts", "spread", "seed", "horizon", "ident_rtol",
        "warn_rtol", "max_step", "estimate_initial_state")
_OUTPUT = ("dir", "plots")
_ALIASES = {"file": "csv", "path": "csv", "noise": "sigma", "parameters": "free", "method": "solver",
            "iterations": "max_steps", "out": "dir", "plot": "plots", "multistart": "starts"}
_DESCRIPTION = {
    "scenario": "the model's scenario TOML file, relative to this file",
    "csv": "the telemetry CSV file, relative to this file",
    "columns": "the measured columns, e.g. columns = [\"omega_BN_B_3\", \"theta_p0\"]",
    "sigma": "1-sigma noise per column, or one number",
    "free": 'e.g. free = ["p0.k", "p0.c"]',
}
OUTPUT_FILES = ("result.json", "fitted_scenario.toml")
PLOT_FILES = ("fit.png", "residuals.png")


@dataclasses.dataclass(frozen=True)
class Record:
    """One `[[data]]` record: its CSV, telemetry, scenario (the top-level one unless it names its own) and fixed
    sensor values (`sensors`)."""

    csv_path: str
    telemetry: Telemetry
    scenario_path: str
    scenario: Scenario
    sensors: dict[str, float]


@dataclasses.dataclass(frozen=True)
class IdentifySpec:
    """A parsed telemetry FIT.toml: resolved paths, the loaded scenario and telemetry (of the first record),
    `identify`'s keyword arguments (`fit_kwargs`), the output folder, whether to plot, and every record
    (`records`: one for a `[data]` table, several for `[[data]]`)."""

    path: str
    scenario_path: str
    scenario_name: str
    scenario: Scenario
    csv_path: str
    telemetry: Telemetry
    fit_kwargs: dict[str, Any]
    out_dir: str
    plots: bool
    records: tuple[Record, ...] = ()


def load_identify(
    path: str | os.PathLike, data: Mapping | None = None, *, out_dir: str | None = None
) -> IdentifySpec:
    """Read and validate a telemetry FIT.toml (schema: module docstring), its scenario and its CSV; every check,
    the output folder's included, happens here, before any compute.

    **Arguments:** `path` (the file), `data` (its parsed content, when already read), `out_dir` (an output
    folder that replaces `[output] dir`, checked instead of it).

    **Raises:** `FitError` (`TelemetryError` for the data), `ScenarioError`.
    """
    source = os.fspath(path)
    ck = _Checker(source, error=FitError, descriptions=_DESCRIPTION, aliases=_ALIASES)
    if data is None:
        data = ck.read_toml("fit file")
    ck.keys(data, None, _TOP, ("scenario",))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")
    if "data" not in data:
        raise ck.fail(None, "missing required table [data]")
    several = isinstance(data["data"], list)
    if several and not data["data"]:
        raise ck.bad("data", data["data"], "must be a table [data] or a non-empty array of tables [[data]]")
    tables = data["data"] if several else [data["data"]]
    fit_t = ck.section(data, "fit", _FIT, required=True)
    out_t = ck.section(data, "output", _OUTPUT)
    prefix = [f"data[{k + 1}]" if several else "data" for k in range(len(tables))]
    for d, where in zip(tables, prefix):
        ck.table(d, where, "[[data]]" if several else "[data]")
        ck.keys(d, where, _DATA, _DATA_REQUIRED)
    csv_paths = [ck.path(d["csv"], f"{w}.csv", "a CSV file name") for d, w in zip(tables, prefix)]
    rec_scen = [ck.path(d["scenario"], f"{w}.scenario", "a scenario file name") if "scenario" in d else scen_path
                for d, w in zip(tables, prefix)]
    sensors = []
    for d, w in zip(tables, prefix):
        t = ck.table(d.get("sensors", {}), f"{w}.sensors", f"[{w}.sensors]")
        sensors.append({str(k): ck.number(v, f"{w}.sensors.{k}") for k, v in t.items()})
    ck.keys(fit_t, "fit", _FIT, ("free",))
    kwargs: dict[str, Any] = {key: fit_t[key] for key in _FIT if key in fit_t}  # "free" is required
    if "solver" in kwargs:
        ck.choice(kwargs["solver"], "fit.solver", SOLVERS)
    for key in ("max_steps", "starts", "seed"):
        if key in kwargs:
            kwargs[key] = ck.integer(kwargs[key], f"fit.{key}", 0 if key == "seed" else 1)
    for key in ("rtol", "atol", "spread", "ident_rtol", "warn_rtol"):
        if key in kwargs:
            kwargs[key] = ck.finite_positive(kwargs[key], f"fit.{key}")
    if isinstance(kwargs.get("horizon"), str) and kwargs["horizon"] != "auto":
        raise ck.bad("fit.horizon", kwargs["horizon"], 'must be "auto" or increasing fractions in (0, 1] ending '
                     "with 1, e.g. [0.25, 0.5, 1.0]")
    if "max_step" in kwargs:
        kwargs["max_step"] = ck.nonnegative(kwargs["max_step"], "fit.max_step", "(fitted coordinates)")
    if "estimate_initial_state" in kwargs:
        kwargs["estimate_initial_state"] = ck.boolean(kwargs["estimate_initial_state"], "fit.estimate_initial_state")
    plots = ck.boolean(out_t.get("plots", True), "output.plots")
    files = OUTPUT_FILES + (PLOT_FILES if plots else ())
    out_dir = ck.output_folder(out_t, "out", files, out_dir)
    scenario = load_scenario(scen_path)
    records = []
    for d, csv_path, sp, sens in zip(tables, csv_paths, rec_scen, sensors):
        sc = scenario if sp == scen_path else load_scenario(sp)
        records.append(Record(csv_path=csv_path, telemetry=load_telemetry(csv_path, d["columns"], d["sigma"], sc),
                              scenario_path=sp, scenario=sc, sensors=sens))
    # the free list, sensor names and records too: errors before any compute
    check_identify([r.scenario for r in records], [r.telemetry for r in records], kwargs["free"],
                   sensors=_sensors(records), estimate_initial_state=kwargs.get("estimate_initial_state", False))
    return IdentifySpec(path=source, scenario_path=scen_path, scenario_name=data["scenario"], scenario=scenario,
                        csv_path=csv_paths[0], telemetry=records[0].telemetry, fit_kwargs=kwargs, out_dir=out_dir,
                        plots=plots, records=tuple(records))


def _sensors(records: Sequence[Record]) -> dict[str, float]:
    """The records' fixed sensor values as `identify` names them (`"data[k]."`-prefixed for several records)."""
    if len(records) == 1:
        return dict(records[0].sensors)
    return {f"data[{k + 1}].{n}": v for k, r in enumerate(records) for n, v in r.sensors.items()}


def run_identify(spec: IdentifySpec, progress: Callable[[str], None] | None = None) -> IdentifyResult:
    recs = spec.records or (Record(spec.csv_path, spec.telemetry, spec.scenario_path, spec.scenario, {}),)
    if len(recs) == 1:
        return identify(recs[0].scenario, recs[0].telemetry, progress=progress, sensors=_sensors(recs),
                        **spec.fit_kwargs)
    return identify([r.scenario for r in recs], [r.telemetry for r in recs], progress=progress,
                    sensors=_sensors(recs), **spec.fit_kwargs)


def result_dict(result: IdentifyResult, spec: IdentifySpec | None = None) -> dict[str, Any]:
    """The `result.json` content (JSON-safe: non-finite numbers as null)."""
    tel = result.telemetry
    params = {n: {"value": float(v), "sigma": _num(s), "initial": float(x0), "unit": unit,
                  "relative_sigma": _num(s / abs(v)) if v else None}
              for n, v, s, x0, unit in zip(result.names, result.values, result.sigma, result.initial,
                                           result.units)}
    return {
        "kind": "telemetry",
        "fit_file": spec.path if spec else None,
        "scenario": spec.scenario_path if spec else None,
        "parameters": params,
        "chi2": _num(result.chi2),
        "dof": int(result.dof),
        "chi2_per_dof": _num(result.chi2_per_dof),
        "converged": bool(result.converged),
        "status": result.status,
        "message": result.message,
        "iterations": int(result.iterations),
        **least_squares_json(result),
        "sigma_basis": result.sigma_note,
        "data": _data_block(tel, result.residuals, spec.csv_path if spec else tel.source),
        "options": result.options,
        "starts": result.starts,
        "timing_s": {"identify": float(result.wall_s)},
        **({"records": [_data_block(r["telemetry"], r["residuals"],
                                    spec.records[k].csv_path if spec and spec.records else r["telemetry"].source)
                        for k, r in enumerate(result.records)]} if len(result.records) > 1 else {}),
    }


def _data_block(tel: Telemetry, residuals: np.ndarray, csv: str) -> dict[str, Any]:
    """One record's `data` block of result.json."""
    return {"csv": csv, "columns": list(tel.columns), "sigma": [float(s) for s in tel.sigma], "samples": tel.samples,
            "t_span": [float(tel.t[0]), float(tel.t[-1])],
            "rms_residual": {c: float(np.sqrt(np.mean(residuals[:, j] ** 2))) for j, c in enumerate(tel.columns)}}


def plot_identify(result: IdentifyResult, f, kind: str = "fit") -> None:
    """PNG into the file object `f`: `kind="fit"`: data vs fit (and the initial guess) per column;
    `kind="resid"`: residuals / sigma per column (every record's columns, one panel each)."""
    from ._plot import _plt, legend_outside, shown
    from ._telemetry import column_unit

    plt = _plt()
    recs = result.records or [{"telemetry": result.telemetry, "fitted": result.fitted,
                               "residuals": result.residuals, "initial_fitted": result.initial_fitted}]
    panels = [(r, j, c, c if len(recs) == 1 else f"data[{k + 1}] {c}")
              for k, r in enumerate(recs) for j, c in enumerate(r["telemetry"].columns)]
    C = len(panels)
    fig, axes = plt.subplots(C, 1, figsize=(9.5, 1.8 * C + 1), sharex=len(recs) == 1, squeeze=False)
    for i, (r, j, c, label) in enumerate(panels):
        ax, tel = axes[i, 0], r["telemetry"]
        unit = column_unit(c)
        if kind == "fit":
            ax.plot(tel.t, shown(tel.values[:, j], unit)[0], ".", ms=3, color="k", label="data")
            ax.plot(tel.t, shown(r["initial_fitted"][:, j], unit)[0], "--", color="0.6", lw=1, label="initial guess")
            ax.plot(tel.t, shown(r["fitted"][:, j], unit)[0], "-", color="C0", lw=1.2, label="fit")
            ax.set_ylabel(f"{label}\n[{shown(0.0, unit)[1]}]", fontsize=8)
        else:
            ax.plot(tel.t, r["residuals"][:, j], ".", ms=3, color="C3")
            ax.axhline(0, color="k", lw=0.5)
            for s in (-1, 1):
                ax.axhline(s, color="0.6", lw=0.5, ls="--")
            ax.set_ylabel(f"{label}\n(fit-data)/sigma [-]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(("data vs fit" if kind == "fit" else "residuals") + f" (chi2/dof {result.chi2_per_dof:.3g})")
    if kind == "fit":
        legend_outside(axes[0, 0])
    axes[-1, 0].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(f, format="png", dpi=90)
    plt.close(fig)


def write_outputs(result: IdentifyResult, spec: IdentifySpec) -> list[str]:
    """Write result.json, fitted_scenario.toml and the plots into `spec.out_dir` (all or nothing)."""
    data = result_dict(result, spec)
    writers = {
        "result.json": lambda f: write_json(data, f),
        "fitted_scenario.toml": lambda f: f.write(
            scenario_toml(result.scenario, os.path.join(spec.out_dir, "fitted_scenario.toml")).encode("utf-8")
        ),
    }
    if spec.plots:
        writers["fit.png"] = lambda f: plot_identify(result, f, "fit")
        writers["residuals.png"] = lambda f: plot_identify(result, f, "resid")
    return write_output_files(spec.out_dir, writers)


def report_lines(result: IdentifyResult, spec: IdentifySpec, written: list[str]) -> list[str]:
    recs = result.records or [{"telemetry": result.telemetry}]
    what = (f"telemetry: {spec.csv_path}, {result.telemetry.samples} samples x {len(result.telemetry.columns)} columns"
            if len(recs) == 1 else f"{len(recs)} records, {sum(r['telemetry'].values.size for r in recs)} values")
    lines = [f"fit                 {spec.path} ({what})",
             f"status              {result.message}",
             (f"chi2/dof            {result.chi2_per_dof:.4g} (chi2 {result.chi2:.6g}, dof {result.dof}), "
              f"{result.iterations} solver steps"), "",
             f"{'parameter':<28} {'value':>14} {'sigma':>12} {'initial':>14}  unit"]
    for i, n in enumerate(result.names):
        s = result.sigma[i]
        s_s = f"{s:12.4g}" if np.isfinite(s) else f"{'undetermined':>12}"
        lines.append(f"{n:<28} {result.values[i]:14.8g} {s_s} {result.initial[i]:14.8g}  {result.units[i]}")
    for item in result.undetermined:
        lines.append(f"not identifiable    {item['combination']}: {item['description']}")
    for item in result.poorly_determined:
        lines.append(f"poorly determined   {item['combination']}: {item['description']}")
    lines += ["", f"timing              identify {result.wall_s:.2f} s (compilation included)"]
    lines += [f"wrote               {os.path.relpath(w)}" for w in written]
    return lines
