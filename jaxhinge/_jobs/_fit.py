"""A modal fit (`jaxhinge fit` of a FIT.toml with `[modes]`): the file as read (`_io._fit_file.read_fit`) made ready
(`load_fit`: its scenario loaded, what a closed loop or wheels allow checked, the settings mapped to `fit`'s
objects once and checked, before any compute), fitted (`run_fit`), checked by simulation when asked (`measure_modes`), and its results written (`write_outputs`: `result.json`,
`fitted_scenario.toml`, the plot; all or nothing)."""

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._analysis._fitting._fit import SOLVERS, fit
from .._analysis._fitting._fit_options import Acceptance, FeaTargets, ModalTargets, Starts
from .._analysis._fitting._fit_result import FitResult
from .._analysis._fitting._loop import LOOPS
from .._analysis._fitting._solvers import SOLVERS as SOLVER_CLASSES
from .._analysis._fitting._solvers import Adam
from .._analysis._linear._measure import measure_modes
from .._errors import ConfigError, FitError
from .._io._checker import in_file_terms
from .._io._fit_file import FILE_FIELDS, fit_checker, read_fit
from .._io._scenario_file import load_scenario, scenario_toml
from .._io._writers import write_json, write_output_files
from .._model._boundary import BOUNDARIES
from .._model._scenario import Scenario, SimulationConfig
from .._report._fit import fit_json, plot_fit
from .._simulation._memory import check_memory

__all__ = ["FitSpec", "fit_arguments", "load_fit", "run_fit", "write_outputs"]


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """A parsed FIT.toml: paths resolved against the file's folder (`scenario_name`: as written in the file);
    `fit_kwargs` the file's settings by their names (strings as written: `"lm"`, `"clamped"`; reported in
    result.json's `solver_settings`); `arguments` `fit`'s arguments built from them once (`fit_arguments`: the
    targets, boundary, loop, solver, starts and acceptance objects); `check` the `measure_modes` options (`None`:
    no check); `plot` a file name or `None`."""

    path: str
    scenario_path: str
    scenario_name: str
    scenario: Scenario
    targets_hz: list[float] | None  # None: from the FEA modes (`fit_kwargs["fea"]`)
    fit_kwargs: dict[str, Any]
    check: dict[str, Any] | None
    out_dir: str
    plot: str | None
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)


def load_fit(path: str | os.PathLike, data: Mapping | None = None, *, out_dir: str | None = None) -> FitSpec:
    """Read and validate a modal FIT.toml file (schema: docs/modes-and-fea.md) and load its scenario. Every
    check, the output folder's included, happens here, before any compute.

    A FIT.toml with a `[data]` table is a telemetry fit: read any FIT.toml with `jaxhinge.load_fit`
    (`jaxhinge._jobs._fit_files.load_fit_file`), which dispatches.

    **Arguments:**

    - `path`: the FIT.toml file (names the file in errors; relative paths are relative to its folder).
    - `data`: its parsed content, when already read (else `path` is read).
    - `out_dir`: an output folder that replaces `[output] dir` (checked instead of it).

    **Raises:** `FitError` (`file: field = value: rule`) for a bad FIT.toml, `ScenarioError` for a bad scenario.
    """
    f = read_fit(path, data, out_dir=out_dir, loops={n: k.closed for n, k in LOOPS.items()}, solvers=tuple(SOLVERS))
    ck, kw, check, check_t, closed = fit_checker(f.path), f.fit_kwargs, f.check, f.check_table, f.closed
    scenario = load_scenario(f.scenario_path)
    if closed and scenario.control is None:
        raise ck.bad("modes.loop", "closed", f"the scenario {f.scenario_name} has no [control] table (the "
                     "attitude controller the loop is closed with)")
    if closed and check is not None:  # the check measures the open structure's free responses
        if "simulate" in check_t:
            raise ck.bad("check.simulate", check_t["simulate"], "the simulation check measures the open "
                         "structure's free responses; with loop = \"closed\" set it false (the default then)")
        check = None
    if scenario.spacecraft.wheels is not None and check is not None:  # the check starts modes without wheels
        if "simulate" in check_t:
            raise ck.bad("check.simulate", check_t["simulate"], "the simulation check starts each mode of a "
                         "spacecraft without reaction wheels; with [[wheels]] set it false (the default then)")
        check = None
    if check and "periods" in check:  # one run per mode, >= 64 samples per period (`measure_modes`), before the fit
        try:
            n = scenario.spacecraft.panels.count
            check_memory(SimulationConfig(t_end=check["periods"], save_dt=1 / 64), n, n, field="check.periods")
        except ConfigError as e:
            raise ck.bad(e.field, check_t["periods"], e.rule) from None
    try:  # the option objects check their values too, before any compute
        arguments = fit_arguments(f.targets_hz, kw)
    except FitError as e:
        raise in_file_terms(e, f.path, FILE_FIELDS) from None
    return FitSpec(arguments=arguments, path=f.path, scenario_path=f.scenario_path, scenario_name=f.scenario_name,
                   scenario=scenario, targets_hz=f.targets_hz, fit_kwargs=kw, check=check, out_dir=f.out_dir,
                   plot=f.plot)


def fit_arguments(targets_hz, settings: Mapping[str, Any]) -> dict[str, Any]:
    """`fit`'s arguments from a FIT.toml's settings (`FitSpec.fit_kwargs`: the file's names and strings), mapped
    once: the targets (`ModalTargets`, or `FeaTargets` with `fea`), the boundary and loop kinds, the solver with
    its settings, the starts and the acceptance thresholds. Raises `FitError` in `fit`'s argument names."""
    kw = settings
    sig = {k: kw[k] for k in ("frequency_sigma", "damping_sigma") if k in kw}
    if "fea" in kw:
        targets: ModalTargets | FeaTargets = FeaTargets(
            kw["fea"], damping_ratios=kw.get("damping_ratios"), fea_modes=kw.get("fea_modes"),
            mode_numbers=kw.get("mode_numbers"), reference_point=kw.get("reference_point"),
            effective_mass_sigma=kw.get("effective_mass_sigma"), shapes=kw.get("shapes"), **sig)
    else:
        targets = ModalTargets(targets_hz, damping_ratios=kw.get("damping_ratios"),
                               mode_numbers=kw.get("mode_numbers"), **sig)
    kind = SOLVER_CLASSES[kw.get("solver", "lm")]
    solver = kind(**{k: kw[k] for k in ("rtol", "atol", "max_steps") if k in kw},
                  **({"learning_rate": kw["learning_rate"]} if "learning_rate" in kw and kind is Adam else {}))
    return {"targets": targets, "free": kw["free"], "boundary": BOUNDARIES[kw.get("boundary", "free")](),
            "loop": LOOPS[kw.get("loop", "open")](), "solver": solver,
            "starts": Starts(kw.get("starts"), kw.get("bounds")),
            "acceptance": Acceptance(**{k: kw[k] for k in ("reach_rtol", "ident_rtol", "warn_rtol") if k in kw})}


def run_fit(spec: FitSpec, progress: Callable[[str], None] | None = None) -> tuple[FitResult, dict[str, float]]:
    """Fit a loaded `FitSpec` and, when asked, run the simulation check. FitErrors name the file.

    **Returns:** `(result, timing)`, `timing = {"check": seconds}` when the check ran."""
    try:
        result = fit(spec.scenario, check=False, progress=progress, **(spec.arguments or fit_arguments(
            spec.targets_hz, spec.fit_kwargs)))
    except FitError as e:
        raise in_file_terms(e, spec.path, FILE_FIELDS) from None
    timing: dict[str, float] = {}
    if spec.check is not None:
        if progress:
            progress("fit: independent check: simulating the fitted nonlinear model, one free response per mode...")
        t0 = time.perf_counter()
        measured = measure_modes(result.scenario, result.boundary, **spec.check)
        result = dataclasses.replace(result, check=measured)
        timing["check"] = time.perf_counter() - t0
        if progress:
            progress(f"fit: check done in {timing['check']:.1f} s")
    return result, timing


def write_outputs(result: FitResult, spec: FitSpec, extra: dict | None = None) -> list[str]:
    """Write result.json, fitted_scenario.toml and the plot into `spec.out_dir` (all or nothing)."""
    data = fit_json(result, spec)
    if extra:
        data["timing_s"].update(extra)
    writers = {
        "result.json": lambda f: write_json(data, f),
        "fitted_scenario.toml": lambda f: f.write(scenario_toml(result.scenario, os.path.join(spec.out_dir, "fitted_scenario.toml")).encode("utf-8")),
    }
    if spec.plot:
        fmt = os.path.splitext(spec.plot)[1].lstrip(".").lower()
        writers[spec.plot] = lambda f: plot_fit(result, f, fmt=fmt, title=f"{spec.path} (scenario {spec.scenario_name})")
    return write_output_files(spec.out_dir, writers)
