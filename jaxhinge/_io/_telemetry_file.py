"""Telemetry CSV files: `load_telemetry` reads and checks one (format: docs/telemetry.md), `write_telemetry`
writes one, `telemetry_columns` picks telemetry columns out of a simulated or recorded run.

**CSV format.** A header row, then one row per sample: column `t` [s] and any of the measured outputs
(`jaxhinge._model._telemetry.output_names`). Other columns may be present; only the ones asked for are read
(and checked). Lines starting with `#` and blank lines are skipped.
"""

import csv
import difflib
import io
import os
from collections.abc import Sequence

import numpy as np

from .._model._scenario import Scenario
from .._model._telemetry import (
    PANEL_OUTPUTS,
    VECTOR_COLUMNS,
    WHEEL_OUTPUTS,
    Telemetry,
    check_columns,
    output_names,
    row_name,
    sensor_sigma,
    telemetry_error,
    telemetry_from_arrays,
)
from ._writers import atomic_write

__all__ = ["load_telemetry", "telemetry_columns", "write_telemetry"]


def load_telemetry(path: str | os.PathLike, columns: Sequence[str], sigma, scenario: Scenario | None = None) -> Telemetry:
    """Read the CSV file `path` (format: docs/telemetry.md) and check it: the `columns` asked for exist
    (in the file and, with a `scenario`, among its outputs), `t` is strictly increasing and within the
    scenario's `[0, t_end]`, every value read is a finite number, `sigma` (one per column or one for all) > 0.

    **Raises:** `TelemetryError` (a `FitError`/`ValueError`) with a one-line message, before any compute.
    """
    source = os.fspath(path)
    allowed = output_names(scenario) if scenario is not None else None
    cols = check_columns(source, columns, allowed)
    sensor_sigma(source, sigma, cols)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a byte-order mark is not part of the header
            reader = csv.reader(f)
            rows = [(reader.line_num, r) for r in reader if r and any(x.strip() for x in r)
                    and not r[0].lstrip().startswith("#")]  # file line numbers, for the messages
    except OSError as e:
        raise telemetry_error(source, f"cannot read telemetry file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise telemetry_error(source, f"not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise telemetry_error(source, f"not a valid CSV file: {e}") from None
    if not rows:
        raise telemetry_error(source, "empty file; expected a header row with 't' and the measured columns")
    header = [h.strip() for h in rows[0][1]]
    if "t" not in header:
        hint = "; columns must be separated by commas" if len(header) == 1 and ";" in header[0] else ""
        raise telemetry_error(source, f"no column 't' (sample times [s]) in the header; header: {', '.join(header)}{hint}")
    for c in cols:
        if c not in header:
            close = difflib.get_close_matches(c, header, n=1, cutoff=0.6)
            hint = f" (the file has {close[0]!r})" if close else ""
            raise telemetry_error(source, f"column {c!r} (listed in data.columns) is missing from the file{hint}; file "
                               f"columns: {', '.join(header)}", "data.columns")
    names = ["t", *cols]
    for c in names:
        if header.count(c) > 1:
            raise telemetry_error(source, f"column {c!r} appears {header.count(c)} times in the header (line {rows[0][0]}); "
                               "give each column once")
    idx = [header.index(c) for c in names]
    lines = [n for n, _ in rows[1:]]
    data = np.empty((len(rows) - 1, len(idx)))
    for i, (_, row) in enumerate(rows[1:]):
        for j, k in enumerate(idx):
            cell = row[k].strip() if k < len(row) else ""
            if cell == "":
                raise telemetry_error(source, f"column {names[j]!r} is empty in {row_name(i, lines)}")
            try:
                data[i, j] = float(cell)
            except ValueError:
                raise telemetry_error(source, f"column {names[j]!r} = {cell!r} in {row_name(i, lines)}: not a number") from None
    return telemetry_from_arrays(data[:, 0], data[:, 1:], cols, sigma, scenario, source, lines)


def write_telemetry(path: str | os.PathLike, t, values, columns: Sequence[str]) -> None:
    """Write a telemetry CSV (header `t,<columns>`, full float precision), atomically."""
    v = np.asarray(values, dtype=float).reshape(len(t), -1)
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(["t", *columns])
    for ti, row in zip(np.asarray(t, dtype=float), v):
        w.writerow([repr(float(ti)), *(repr(float(x)) for x in row)])
    data = text.getvalue().encode("utf-8")
    atomic_write(path, lambda f: f.write(data))


def telemetry_columns(source, scenario: Scenario, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`(t, values)`: the telemetry `columns` (names of `output_names`, e.g. `"omega_BN_B_3"`, `"theta_wing_2"`)
    of a simulated or recorded run, noise-free. `source` is a `Trajectory`, a mapping of arrays with the
    `Trajectory` names, or a `.npz` file of them (`jaxhinge simulate --out`, or a Basilisk run in the
    `tests/data/bsk` layout). **Raises:** `TelemetryError` for a column the scenario does not have."""
    d = np.load(source) if isinstance(source, (str, os.PathLike)) else source
    get = (lambda k: np.asarray(d[k])) if hasattr(d, "keys") else (lambda k: np.asarray(getattr(d, k)))
    t = get("t")
    wheels = scenario.spacecraft.wheels is not None
    full = np.concatenate([get(v).reshape(len(t), 3) for v in VECTOR_COLUMNS]
                          + [get(q).reshape(len(t), -1) for q in PANEL_OUTPUTS]
                          + [get(q).reshape(len(t), -1) for q in WHEEL_OUTPUTS.values() if wheels], axis=1)
    names = output_names(scenario)
    cols = check_columns(str(source) if isinstance(source, (str, os.PathLike)) else "<telemetry>", list(columns),
                          names)
    return np.asarray(t, dtype=float), full[:, [names.index(c) for c in cols]]
