"""Identification from telemetry (`jaxhinge fit` of a FIT.toml with `[data]`): the loaded `IdentifySpec`
(`_io._identify_file.load_identify`) identified (`identify`, its errors restated in the file's terms) and its
results written (`write_outputs`: `result.json`, `fitted_scenario.toml`, the plots; all or nothing)."""

import os
from collections.abc import Callable

from .._analysis._fitting._identify import IdentifyResult, identify
from .._errors import FitError
from .._io._checker import in_file_terms
from .._io._identify_file import FILE_FIELDS, IdentifySpec, Record, identify_arguments, record_sensors
from .._io._scenario_file import scenario_toml
from .._io._writers import write_json, write_output_files
from .._report._identify import identify_json, plot_identify

__all__ = ["run_identify", "write_outputs"]


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


