"""Recorded-input CSV files (a scenario's `[inputs]` table): a header row `t,<columns>`, one row per sample.

Columns (docs/scenario-files.md): `extForce_B_1..3`, `extForce_N_1..3`, `extTorquePntB_B_1..3`,
`motorTorque_<panel>`, `u_<wheel>`. `t` [s] strictly increasing and covering the run, `[0, simulation.t_end]`;
every value a finite number. Lines starting with `#` and blank lines are skipped. Errors are one line naming the
file, the line, the value and the rule (`ScenarioError`).
"""

import csv
import os

import numpy as np

from .._errors import ScenarioError
from .._format import did_you_mean
from .._format import fmt_value as _fmt

__all__ = ["read_inputs"]

TIME_RTOL = 1e-9  # the record must reach 0 and t_end within this fraction of t_end


def read_inputs(path: str, allowed: tuple[str, ...], t_end: float) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """`(t (S,), values (S, C), columns)` of the CSV file `path`, checked against the `allowed` column names and
    the run's `[0, t_end]`."""

    def fail(msg: str, line: int | None = None) -> ScenarioError:
        where = f"{path}:{line}" if line is not None else path
        return ScenarioError(f"{where}: {msg}", source=path)

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            rows = [(reader.line_num, r) for r in reader if r and any(x.strip() for x in r)
                    and not r[0].lstrip().startswith("#")]
    except OSError as e:
        raise fail(f"cannot read the inputs file: {e.strerror or e}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise fail(f"not a readable CSV file: {e}") from None
    if not rows:
        raise fail("empty file; expected a header row with 't' and the input columns")
    line0, header = rows[0][0], [h.strip() for h in rows[0][1]]
    if not header or header[0] != "t":
        raise fail(f"the first column must be 't' (sample times [s]); header: {', '.join(header)}", line0)
    columns = tuple(header[1:])
    if not columns:
        raise fail("no input column after 't'", line0)
    for c in columns:
        if c not in allowed:
            raise fail(f"unknown input column {c!r}{did_you_mean(c, allowed)}; allowed: {', '.join(allowed)}", line0)
        if columns.count(c) > 1:
            raise fail(f"column {c!r} appears twice", line0)
    data = np.empty((len(rows) - 1, len(header)))
    for i, (line, row) in enumerate(rows[1:]):
        if len(row) != len(header):
            raise fail(f"{len(row)} values, the header has {len(header)} columns", line)
        for j, cell in enumerate(row):
            try:
                x = float(cell)
            except ValueError:
                raise fail(f"{header[j]} = {cell.strip()!r}: not a number", line) from None
            if not np.isfinite(x):
                raise fail(f"{header[j]} = {cell.strip()}: must be a finite number", line)
            data[i, j] = x
    if data.shape[0] == 0:
        raise fail("no samples (only a header row)")
    t = data[:, 0]
    lines = [line for line, _ in rows[1:]]
    for i in range(1, len(t)):
        if not t[i] > t[i - 1]:
            raise fail(f"t = {_fmt(t[i])}: must increase (after t = {_fmt(t[i - 1])} at line {lines[i - 1]})",
                       lines[i])
    tol = TIME_RTOL * max(1.0, t_end)
    if t[0] > tol or t[-1] < t_end - tol:
        raise fail(f"t = {_fmt(t[0])} .. {_fmt(t[-1])} s: the record must cover the run, [0, {_fmt(t_end)}] s "
                   "(simulation.t_end)")
    return t, data[:, 1:], columns


def relative_to(source: str, csv_path: str) -> str:
    """`csv_path` resolved against the folder of the scenario file `source` (or the working directory)."""
    folder = os.path.dirname(os.path.abspath(source)) if not source.startswith("<") else os.getcwd()
    return os.path.normpath(os.path.join(folder, csv_path))
