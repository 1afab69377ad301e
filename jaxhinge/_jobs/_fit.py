"""A modal fit (`jaxhinge fit` of a FIT.toml with `[modes]`): the loaded `FitSpec` (`_io._fit_file.load_fit`) fitted
(`fit`), checked by simulation when asked (`measure_modes`), and its results written (`write_outputs`:
`result.json`, `fitted_scenario.toml`, the plot; all or nothing)."""

import dataclasses
import os
import time
from collections.abc import Callable

from .._analysis._fitting._fit import fit
from .._analysis._fitting._fit_result import FitResult
from .._analysis._linear._measure import measure_modes
from .._errors import FitError
from .._io._checker import in_file_terms
from .._io._fit_file import FILE_FIELDS, FitSpec, fit_arguments
from .._io._scenario_file import scenario_toml
from .._io._writers import write_json, write_output_files
from .._report._fit import fit_json, plot_fit

__all__ = ["run_fit", "write_outputs"]


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
