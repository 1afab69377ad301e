"""SENS files (`jaxhinge sensitivity SENS.toml`): a sensitivity study of a scenario, read and checked as a file
(`read_study`: its keys and output folder) into plain values (`StudyFile`). The
study job (`_jobs._sensitivity`) checks the mode, loads the scenario, checks the outputs, parameters and tornado
rows against it,
runs it and writes `sensitivity.json`, `sensitivity.csv` and `tornado.png` (all or nothing).

The schema: docs/sweeps-and-sensitivities.md. Errors are `SensitivityError`s naming the file, the field, the
value and the rule, before any compute (`study_checker` names them for the checks the job makes).
"""

import dataclasses
import os
from typing import Any

from .._errors import SensitivityError
from ._checker import Checker as _Checker

__all__ = ["OUTPUT_FILES", "StudyFile", "read_study", "study_checker"]

_STUDY_KEYS = ("scenario", "outputs", "parameters", "mode", "tornado", "output")
_OUTPUT_KEYS = ("dir",)
_ALIASES = {"output_names": "outputs", "params": "parameters", "out": "dir"}
_DESCRIPTION = {
    "scenario": "the scenario TOML file, relative to this file",
    "outputs": 'output names or tables, e.g. outputs = ["peak_hub_rate"]',
}
OUTPUT_FILES = ("sensitivity.json", "sensitivity.csv", "tornado.png")


@dataclasses.dataclass(frozen=True)
class StudyFile:
    """A SENS file as read (`read_study`): its `source`, the `scenario_path`, `outputs` and `parameters` as written
    (None: not given), the `mode` as written (default `auto`), the `tornado` rows (None: not given) and the output folder `out_dir`."""

    source: str
    scenario_path: str
    outputs: Any  # (as written: the job checks them)
    parameters: Any
    mode: Any
    tornado: Any
    out_dir: str


def study_checker(source: str) -> _Checker:
    """The checker of a SENS file: its errors are `SensitivityError`s in the file's terms."""
    return _Checker(source, error=SensitivityError, descriptions=_DESCRIPTION, aliases=_ALIASES)


def read_study(path: str | os.PathLike, *, out_dir: str | None = None) -> StudyFile:
    """Read a SENS TOML file and check it as a file (schema: docs/sweeps-and-sensitivities.md): its keys and the
    output folder. Relative paths (`scenario`, `output.dir`) are relative to the
    SENS file. `out_dir`: an output folder that replaces `[output] dir`, checked instead of it.

    **Raises:** `SensitivityError` with a one-line message `SENS.toml: field = value: what is allowed`.
    """
    source = os.fspath(path)
    ck = study_checker(source)
    data = ck.read_toml("sensitivity file")
    ck.keys(data, None, _STUDY_KEYS, ("scenario", "outputs"))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")
    mode = data.get("mode", "auto")
    out = ck.section(data, "output", _OUTPUT_KEYS)
    default_dir = os.path.splitext(os.path.basename(source))[0] + "_out"
    out_dir = ck.output_folder(out, default_dir, OUTPUT_FILES, out_dir)
    tornado = data.get("tornado")
    if isinstance(tornado, str):
        tornado = [tornado]
    return StudyFile(source, scen_path, data["outputs"], data.get("parameters"), mode, tornado, out_dir)
