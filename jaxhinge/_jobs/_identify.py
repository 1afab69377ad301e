"""Identification from telemetry (`jaxhinge fit` of a FIT.toml with `[data]`): the file as read
(`_io._identify_file.read_identify`) made ready (`load_identify`: its scenarios and telemetry loaded, its settings
mapped to `identify`'s objects once and checked with the records, before any compute), identified
(`run_identify`, `identify`'s errors restated in the file's terms) and its results written (`write_outputs`:
`result.json`, `fitted_scenario.toml`, the plots; all or nothing)."""

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._analysis._fitting._fit_options import Acceptance, RandomStarts
from .._analysis._fitting._identify import SOLVERS, IdentifyResult, check_identify, identify
from .._analysis._fitting._shooting import SHOOTING, MultipleShooting
from .._analysis._fitting._solvers import SOLVERS as SOLVER_CLASSES
from .._analysis._fitting._solvers import LevenbergMarquardt
from .._errors import FitError
from .._io._checker import in_file_terms
from .._io._identify_file import FILE_FIELDS, read_identify
from .._io._scenario_file import load_scenario, scenario_toml
from .._io._telemetry_file import load_telemetry
from .._io._writers import write_json, write_output_files
from .._model._scenario import Scenario
from .._model._telemetry import Telemetry
from .._report._identify import identify_json, plot_identify

__all__ = ["IdentifySpec", "Record", "identify_arguments", "load_identify", "record_sensors", "run_identify",
           "write_outputs"]


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
    f = read_identify(path, data, out_dir=out_dir, solvers=tuple(SOLVERS), shooting=("auto", *SHOOTING))
    kwargs = f.fit_kwargs
    scenario = load_scenario(f.scenario_path)
    records = []
    for d in f.tables:
        sc = scenario if d.scenario_path == f.scenario_path else load_scenario(d.scenario_path)
        records.append(Record(csv_path=d.csv_path, telemetry=load_telemetry(d.csv_path, d.columns, d.sigma, sc),
                              scenario_path=d.scenario_path, scenario=sc, sensors=d.sensors))
    # the option objects, the free list, sensor names and records too: errors before any compute
    try:
        arguments = identify_arguments(kwargs)
        check_identify([r.scenario for r in records], [r.telemetry for r in records], kwargs["free"],
                       sensors=record_sensors(records), estimate_initial_state=kwargs.get("estimate_initial_state", False),
                       shooting=arguments.get("shooting", "auto"))
    except FitError as e:
        raise in_file_terms(e, f.path, FILE_FIELDS) from None
    return IdentifySpec(path=f.path, scenario_path=f.scenario_path, scenario_name=f.scenario_name, scenario=scenario,
                        csv_path=records[0].csv_path, telemetry=records[0].telemetry, fit_kwargs=kwargs,
                        out_dir=f.out_dir, plots=f.plots, records=tuple(records))


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


def run_identify(spec: IdentifySpec, progress: Callable[[str], None] | None = None) -> IdentifyResult:
    """`identify` with the file's records and settings; its errors restated in the file's terms."""
    recs = spec.records or (Record(spec.csv_path, spec.telemetry, spec.scenario_path, spec.scenario, {}),)
    try:
        if len(recs) == 1:
            return identify(recs[0].scenario, recs[0].telemetry, progress=progress, sensors=record_sensors(recs),
                            **identify_arguments(spec.fit_kwargs))
        return identify([r.scenario for r in recs], [r.telemetry for r in recs], progress=progress,
                        sensors=record_sensors(recs), **identify_arguments(spec.fit_kwargs))
    except FitError as e:
        raise in_file_terms(e, spec.path, FILE_FIELDS) from None


def write_outputs(result: IdentifyResult, spec: IdentifySpec) -> list[str]:
    """Write result.json, fitted_scenario.toml and the plots into `spec.out_dir` (all or nothing)."""
    data = identify_json(result, spec)
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


