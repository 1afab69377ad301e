"""A sensitivity study (`jaxhinge sensitivity SENS.toml`): the SENS file as read (`_io._sens_file.read_study`) made
ready to run (`load_study`: its scenario loaded, the outputs, parameters and tornado rows checked against it,
before any compute), run (`run_study`) and its outputs written (`write_outputs`: `sensitivity.json`,
`sensitivity.csv`, `tornado.png`; all or nothing)."""

import csv
import dataclasses
import io
import os

from .._analysis._studies._sensitivity import (
    MODES,
    SensitivityResult,
    output_blocks,
    parse_outputs,
    parse_parameters,
    row_names,
    sensitivity,
)
from .._format import did_you_mean as _did_you_mean
from .._format import fmt_value as _fmt
from .._io._scenario_file import load_scenario
from .._io._sens_file import read_study, study_checker
from .._io._writers import write_json, write_output_files
from .._model._scenario import Scenario
from .._report._sensitivity import plot_tornados, sensitivity_csv_rows, sensitivity_json

__all__ = ["Study", "load_study", "run_study", "write_outputs"]


@dataclasses.dataclass(frozen=True)
class Study:
    """A validated SENS file: the scenario, outputs, parameters, mode, tornado rows and output folder."""

    source: str
    scenario_path: str
    scenario: Scenario
    outputs: list
    parameters: list | None
    mode: str
    tornado: tuple[str, ...]
    out_dir: str


def load_study(path: str | os.PathLike, *, out_dir: str | None = None) -> Study:
    """Read and validate a SENS TOML file (schema: docs/sweeps-and-sensitivities.md, `jaxhinge sensitivity
    --help`). Relative paths (`scenario`, `output.dir`) are relative to the SENS file. Everything, the output
    folder included, is checked before any compute.

    **Arguments:** `path` (the file), `out_dir` (an output folder that replaces `[output] dir`, checked
    instead of it).

    **Raises:** `SensitivityError` (`ScenarioError` for its scenario) with a one-line message `SENS.toml: field = value: what is allowed`.
    """
    f = read_study(path, out_dir=out_dir)
    ck = study_checker(f.source)
    mode = ck.choice(f.mode, "mode", MODES)
    scenario = load_scenario(f.scenario_path)
    parse_parameters(scenario, f.parameters, f.source)
    blocks = output_blocks(scenario, parse_outputs(scenario, f.outputs, f.source))
    rows = row_names([b for b in blocks if b.kind != "history"], None)  # what a tornado plot may show
    tornado = rows[:1] if f.tornado is None else f.tornado
    if not isinstance(tornado, list) or not all(isinstance(r, str) for r in tornado):
        raise ck.bad("tornado", tornado, 'must be a list of output row names such as "peak_hub_rate"')
    for j, r in enumerate(tornado):
        if r not in rows:
            allowed = ", ".join(_fmt(x) for x in rows) if rows else "none (request a scalar or modal output)"
            raise ck.bad(
                f"tornado[{j}]", r, f"not a scalar output row{_did_you_mean(r, rows)}; allowed: {allowed}"
            )
    return Study(f.source, f.scenario_path, scenario, list(f.outputs), f.parameters, mode, tuple(tornado),
                 f.out_dir)


def run_study(study: Study) -> SensitivityResult:
    """`sensitivity` with the study's settings."""
    return sensitivity(study.scenario, study.outputs, study.parameters, mode=study.mode)


def write_outputs(result: SensitivityResult, study: Study) -> list[str]:
    """Write `sensitivity.json`, `sensitivity.csv` and `tornado.png` (one panel per tornado row) into
    `study.out_dir`, all or nothing. **Returns:** the paths written."""
    data = {"sensitivity_file": study.source, "scenario": study.scenario_path, **sensitivity_json(result)}

    def write_csv(f):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(sensitivity_csv_rows(result))
        f.write(buf.getvalue().encode())

    files = {"sensitivity.json": lambda f: write_json(data, f, indent=1), "sensitivity.csv": write_csv,
             "tornado.png": lambda f: plot_tornados(result, study.tornado, f)}
    return write_output_files(study.out_dir, files)
