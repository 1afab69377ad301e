"""Telemetry FIT.toml files (a FIT.toml with one or more `[data]` tables), read and checked as a file
(`read_identify`: its keys, the `[data]` records' files and sensors, the `[fit]` settings' numbers, the output
folder) into plain values (`IdentifyFile`). The identification job (`_jobs._identify`) loads the scenarios and
telemetry, maps the settings to `identify`'s objects, checks them, runs it and writes the results.

The schema and the outputs: docs/telemetry.md. Errors are `FitError`s naming the file, the field, the value and
the rule, before any compute; `identify`'s own errors (in its argument names) are restated in the file's fields
(`FILE_FIELDS`).
"""

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import FitError
from ._checker import Checker as _Checker

__all__ = ["FILE_FIELDS", "OUTPUT_FILES", "PLOT_FILES", "DataTable", "IdentifyFile", "identify_checker",
           "read_identify"]

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
class DataTable:
    """One `[data]` table as read: its CSV (`csv_path`), the `columns` and `sigma` as written (checked with the
    telemetry), its scenario (`scenario_path`: the top-level one unless it names its own) and its fixed sensor
    values (`sensors`)."""

    csv_path: str
    columns: Any
    sigma: Any
    scenario_path: str
    sensors: dict[str, float]


@dataclasses.dataclass(frozen=True)
class IdentifyFile:
    """A telemetry FIT.toml as read (`read_identify`): its `path`, the top-level `scenario_path` (and its name as
    written, `scenario_name`), the `[data]` tables (`tables`), the `[fit]` settings by the file's names
    (`fit_kwargs`: values and names checked), the output folder and whether to plot."""

    path: str
    scenario_path: str
    scenario_name: str
    tables: tuple[DataTable, ...]
    fit_kwargs: dict[str, Any]
    out_dir: str
    plots: bool


def identify_checker(source: str) -> _Checker:
    """The checker of a telemetry FIT.toml: its errors are `FitError`s in the file's terms."""
    return _Checker(source, error=FitError, descriptions=_DESCRIPTION, aliases=_ALIASES)


def read_identify(path: str | os.PathLike, data: Mapping | None = None, *, out_dir: str | None = None,
                  solvers: Sequence[str], shooting: Sequence[str]) -> IdentifyFile:
    """Read a telemetry FIT.toml and check it as a file (schema: docs/telemetry.md): its keys, the records' files
    and sensors, the `[fit]` values and the output folder. **Arguments:** `path` (the file), `data` (its parsed
    content, when already read), `out_dir` (an output folder that replaces `[output] dir`, checked instead of it),
    and the names the file may give, from `identify`'s tables: `solvers` (`fit.solver`), `shooting`
    (`fit.shooting`).

    **Raises:** `FitError` with a one-line message `FIT.toml: field = value: what is allowed`.
    """
    source = os.fspath(path)
    ck = identify_checker(source)
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
        ck.choice(kwargs["solver"], "fit.solver", solvers)
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
        ck.choice(kwargs["shooting"], "fit.shooting", shooting)
    if "segment" in kwargs and kwargs["segment"] != "auto":
        kwargs["segment"] = ck.finite_positive(kwargs["segment"], "fit.segment")
    if "continuity_rtol" in kwargs:
        r = kwargs["continuity_rtol"]
        if isinstance(r, (int, float)) and not isinstance(r, bool) and not 0 < r < 1:
            raise ck.bad("fit.continuity_rtol", r, "must be a number in (0, 1)")  # (MultipleShooting's rule)
        kwargs["continuity_rtol"] = ck.finite_positive(r, "fit.continuity_rtol")
    if "dt" in kwargs:
        ck.choice(kwargs["dt"], "fit.dt", ("auto",))
    if ("segment" in kwargs or "continuity_rtol" in kwargs) and kwargs.get("shooting") != "multiple":
        key = "segment" if "segment" in kwargs else "continuity_rtol"
        raise ck.bad(f"fit.{key}", kwargs[key], 'applies to shooting = "multiple" (set it too)')
    plots = ck.boolean(out_t.get("plots", True), "output.plots")
    files = OUTPUT_FILES + (PLOT_FILES if plots else ())
    out_dir = ck.output_folder(out_t, "out", files, out_dir)
    recs = tuple(DataTable(c, d["columns"], d["sigma"], sp, sens)
                 for d, c, sp, sens in zip(tables, csv_paths, rec_scen, sensors))
    return IdentifyFile(source, scen_path, data["scenario"], recs, kwargs, out_dir, plots)
