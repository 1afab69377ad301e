"""SENS files (`jaxhinge sensitivity SENS.toml`): a sensitivity study of a scenario, and its outputs
(`sensitivity.json`, `sensitivity.csv`, `tornado.png`; all or nothing).

The schema: docs/sweeps-and-sensitivities.md. Errors are `SensitivityError`s naming the file, the field, the
value and the rule, before any compute.
"""

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
from .._errors import SensitivityError
from .._format import did_you_mean as _did_you_mean
from .._format import fmt_value as _fmt
from .._model._scenario import Scenario
from .._report._sensitivity import plot_tornados, sensitivity_csv_rows, sensitivity_json
from ._checker import Checker as _Checker
from ._scenario_file import load_scenario
from ._writers import write_json, write_output_files

_STUDY_KEYS = ("scenario", "outputs", "parameters", "mode", "tornado", "output")
_OUTPUT_KEYS = ("dir",)
_ALIASES = {"output_names": "outputs", "params": "parameters", "out": "dir"}
_DESCRIPTION = {
    "scenario": "the scenario TOML file, relative to this file",
    "outputs": 'output names or tables, e.g. outputs = ["peak_hub_rate"]',
}
OUTPUT_FILES = ("sensitivity.json", "sensitivity.csv", "tornado.png")


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
    source = os.fspath(path)
    ck = _Checker(source, error=SensitivityError, descriptions=_DESCRIPTION, aliases=_ALIASES)
    data = ck.read_toml("sensitivity file")
    ck.keys(data, None, _STUDY_KEYS, ("scenario", "outputs"))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")
    mode = ck.choice(data.get("mode", "auto"), "mode", MODES)
    out = ck.section(data, "output", _OUTPUT_KEYS)
    default_dir = os.path.splitext(os.path.basename(source))[0] + "_out"
    out_dir = ck.output_folder(out, default_dir, OUTPUT_FILES, out_dir)
    scenario = load_scenario(scen_path)
    params = data.get("parameters")
    parse_parameters(scenario, params, source)
    blocks = output_blocks(scenario, parse_outputs(scenario, data["outputs"], source))
    rows = row_names([b for b in blocks if b.kind != "history"], None)  # what a tornado plot may show
    tornado = data.get("tornado", rows[:1])
    if isinstance(tornado, str):
        tornado = [tornado]
    if not isinstance(tornado, list) or not all(isinstance(r, str) for r in tornado):
        raise ck.bad("tornado", tornado, 'must be a list of output row names such as "peak_hub_rate"')
    for j, r in enumerate(tornado):
        if r not in rows:
            allowed = ", ".join(_fmt(x) for x in rows) if rows else "none (request a scalar or modal output)"
            raise ck.bad(
                f"tornado[{j}]", r, f"not a scalar output row{_did_you_mean(r, rows)}; allowed: {allowed}"
            )
    return Study(source, scen_path, scenario, list(data["outputs"]), params, mode, tuple(tornado), out_dir)


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
