"""Telemetry FIT.toml files (a FIT.toml with one or more `[data]` tables): identify parameters from measured
time histories: read and checked (`load_identify`); the identification job (`_jobs._identify`) runs it and
writes the results (`result.json`, `fitted_scenario.toml`, `fit.png`, `residuals.png`; all or nothing).

The schema and the outputs: docs/telemetry.md. Every check happens in `load_identify`, before any compute;
`identify`'s own errors (in its argument names) are restated in the file's fields (`FILE_FIELDS`).
"""

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._analysis._fitting._fit_options import Acceptance, RandomStarts
from .._analysis._fitting._identify import SOLVERS, check_identify
from .._analysis._fitting._shooting import SHOOTING, MultipleShooting
from .._analysis._fitting._solvers import SOLVERS as SOLVER_CLASSES
from .._analysis._fitting._solvers import LevenbergMarquardt
from .._errors import FitError
from .._model._scenario import Scenario
from .._model._telemetry import Telemetry
from ._checker import Checker as _Checker
from ._checker import in_file_terms
from ._scenario_file import load_scenario
from ._telemetry_file import load_telemetry

_TOP = ("scenario", "data", "fit", "output")
_DATA = ("csv", "columns", "sigma", "sensors", "scenario")
_DATA_REQUIRED = ("csv", "columns", "sigma")
_FIT = ("free", "solver", "max_steps", "rtol", "atol", "starts", "spread", "seed", "horizon", "ident_rtol",
        "warn_rtol", "max_step", "estimate_initial_state", "shooting", "segment", "continuity_rtol", "dt")
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
# `identify`'s arguments -> the FIT.toml fields they come from (its errors are restated in the file's terms)
FILE_FIELDS = {**{k: f"fit.{k}" for k in _FIT}, "sensors": "data.sensors", "columns": "data.columns",
               "telemetry": "data"}
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
    """A parsed telemetry FIT.toml: resolved paths, the loaded scenario and telemetry (of the first record), the
    `[fit]` settings by the file's names (`fit_kwargs`; `identify`'s arguments: `identify_arguments`), the output
    folder, whether to plot, and every record (`records`: one for a `[data]` table, several for `[[data]]`)."""

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
    """Read and validate a telemetry FIT.toml (schema: docs/telemetry.md), its scenario and its CSV; every check,
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
    if "shooting" in kwargs:
        ck.choice(kwargs["shooting"], "fit.shooting", ("auto", *SHOOTING))
    if "segment" in kwargs and kwargs["segment"] != "auto":
        kwargs["segment"] = ck.finite_positive(kwargs["segment"], "fit.segment")
    if "continuity_rtol" in kwargs:
        kwargs["continuity_rtol"] = ck.finite_positive(kwargs["continuity_rtol"], "fit.continuity_rtol")
    if "dt" in kwargs:
        ck.choice(kwargs["dt"], "fit.dt", ("auto",))
    if ("segment" in kwargs or "continuity_rtol" in kwargs) and kwargs.get("shooting") != "multiple":
        key = "segment" if "segment" in kwargs else "continuity_rtol"
        raise ck.bad(f"fit.{key}", kwargs[key], 'applies to shooting = "multiple" (set it too)')
    plots = ck.boolean(out_t.get("plots", True), "output.plots")
    files = OUTPUT_FILES + (PLOT_FILES if plots else ())
    out_dir = ck.output_folder(out_t, "out", files, out_dir)
    scenario = load_scenario(scen_path)
    records = []
    for d, csv_path, sp, sens in zip(tables, csv_paths, rec_scen, sensors):
        sc = scenario if sp == scen_path else load_scenario(sp)
        records.append(Record(csv_path=csv_path, telemetry=load_telemetry(csv_path, d["columns"], d["sigma"], sc),
                              scenario_path=sp, scenario=sc, sensors=sens))
    # the option objects, the free list, sensor names and records too: errors before any compute
    try:
        identify_arguments(kwargs)
        check_identify([r.scenario for r in records], [r.telemetry for r in records], kwargs["free"],
                       sensors=record_sensors(records), estimate_initial_state=kwargs.get("estimate_initial_state", False),
                       shooting=identify_arguments(kwargs).get("shooting", "auto"))
    except FitError as e:
        raise in_file_terms(e, source, FILE_FIELDS) from None
    return IdentifySpec(path=source, scenario_path=scen_path, scenario_name=data["scenario"], scenario=scenario,
                        csv_path=csv_paths[0], telemetry=records[0].telemetry, fit_kwargs=kwargs, out_dir=out_dir,
                        plots=plots, records=tuple(records))


def identify_arguments(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`identify`'s keyword arguments from a telemetry FIT.toml's `[fit]` settings (the file's names and strings),
    mapped once: the solver with its settings, the starts, the acceptance thresholds, the horizon and the initial
    state switch. Raises `FitError` in `identify`'s argument names."""
    kw = settings
    kind = SOLVER_CLASSES[kw.get("solver", "lm")]
    solver = kind(**{k: kw[k] for k in ("rtol", "atol", "max_steps") if k in kw},
                  **({"max_step": kw["max_step"]} if "max_step" in kw and kind is LevenbergMarquardt else {}))
    starts = RandomStarts(**{k: kw[v] for k, v in (("count", "starts"), ("spread", "spread"), ("seed", "seed"))
                             if v in kw})
    out = {"free": kw["free"], "solver": solver, "starts": starts,
           "acceptance": Acceptance(**{k: kw[k] for k in ("ident_rtol", "warn_rtol") if k in kw})}
    out.update({k: kw[k] for k in ("horizon", "estimate_initial_state", "dt") if k in kw})
    if "shooting" in kw:
        opts = {k: kw[k] for k in ("segment", "continuity_rtol") if k in kw}
        out["shooting"] = MultipleShooting(**opts) if kw["shooting"] == "multiple" else kw["shooting"]
    return out


def record_sensors(records: Sequence[Record]) -> dict[str, float]:
    """The records' fixed sensor values as `identify` names them (`"data[k]."`-prefixed for several records)."""
    if len(records) == 1:
        return dict(records[0].sensors)
    return {f"data[{k + 1}].{n}": v for k, r in enumerate(records) for n, v in r.sensors.items()}
