"""FIT.toml files of both kinds, in one place: a FIT.toml with a `[data]` table is a telemetry fit (`_identify`,
reading with `jaxhinge._io._identify_file`), any other a modal fit (`_fit`, reading with `jaxhinge._io._fit_file`).
The two kinds do not import each other; what they share comes from `jaxhinge._io._checker` and
`jaxhinge._io._writers`."""

import os

from .._errors import FitError
from .._io._checker import read_toml
from ._fit import FitSpec, load_fit
from ._identify import IdentifySpec, load_identify

__all__ = ["load_fit_file"]


def load_fit_file(path: str | os.PathLike, *, out_dir: str | None = None) -> FitSpec | IdentifySpec:
    """Read and validate any FIT.toml and load what it names (scenario, telemetry); every check, the output
    folder's included, happens here, before any compute. `jaxhinge.load_fit` is this function.

    **Arguments:**

    - `path`: the FIT.toml file.
    - `out_dir`: an output folder that replaces the file's `[output] dir` (checked instead of it).

    **Returns:** a `FitSpec` (modal fit, schema in `jaxhinge._io._fit_file`, made ready by `jaxhinge._jobs._fit`) or, for a FIT.toml with a
    `[data]` table, an `IdentifySpec` (telemetry fit, schema in `jaxhinge._io._identify_file`, made ready by
    `jaxhinge._jobs._identify`).

    **Raises:** `FitError` (`file: field = value: rule`; `TelemetryError` for the data), `ScenarioError` for a
    bad scenario.
    """
    source = os.fspath(path)
    data = read_toml(source, "fit file", FitError)
    if isinstance(data, dict) and "data" in data:  # a telemetry fit
        return load_identify(source, data, out_dir=out_dir)
    return load_fit(source, data, out_dir=out_dir)
