r"""Telemetry: measured time histories of a spacecraft, read from CSV and checked against a scenario.

**CSV format.** A header row, then one row per sample. Column `t` [s] (strictly increasing, samples may be
irregular, all within the scenario's `[0, t_end]`) and any of the measured outputs (`output_names`):

| column | meaning |
|---|---|
| `omega_BN_B_1..3` | hub angular rate in B [rad/s] (gyro) |
| `sigma_BN_1..3` | hub attitude MRP (star tracker); either MRP set is accepted (the shadow set is matched) |
| `r_BN_N_1..3`, `v_BN_N_1..3` | hub point B position [m] / velocity [m/s] in N |
| `r_CN_N_1..3`, `v_CN_N_1..3` | system centre of mass position / velocity in N |
| `theta_<panel>`, `thetaDot_<panel>` | hinge angle [rad] / rate [rad/s] of the panel named `<panel>` (any panel, single or in a chain; relative to its parent) |

Other columns may be present; only the ones asked for are read (and checked). Components are numbered 1..3 as
in the column names.
"""

import csv
import dataclasses
import difflib
import math
import os
from collections.abc import Sequence

import numpy as np

from .._analysis._lsq import FitError
from .._model._scenario import Scenario
from .._simulation._simulate import OUTPUT_UNITS
from ._files import _fmt

_VECTORS = ("omega_BN_B", "sigma_BN", "r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N")
_PANEL_OUTPUTS = ("theta", "thetaDot")


class TelemetryError(FitError):
    """Bad telemetry (file, columns, samples or weights); `str(error)` is one line naming what is wrong."""


def output_names(scenario: Scenario) -> tuple[str, ...]:
    """Every telemetry column name this scenario can simulate, in the order of the model's output matrix."""
    names = [f"{v}_{j}" for v in _VECTORS for j in (1, 2, 3)]
    for q in _PANEL_OUTPUTS:
        names += [f"{q}_{p}" for p in scenario.spacecraft.panels.labels]
    return tuple(names)


def column_unit(column: str) -> str:
    """The SI unit of a telemetry column (`omega_BN_B_2` -> rad/s, `theta_p0` -> rad)."""
    base = column.rsplit("_", 1)[0] if column.startswith(_VECTORS) else column.split("_", 1)[0]
    return OUTPUT_UNITS[base]


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """Checked telemetry: sample times `t` (T,), `values` (T, C) of the measured `columns` (C names), their
    1-sigma noise `sigma` (C,) (the residual weights), and `source` (file name, for messages)."""

    t: np.ndarray
    columns: tuple[str, ...]
    values: np.ndarray
    sigma: np.ndarray
    source: str = "<telemetry>"

    @property
    def samples(self) -> int:
        return int(self.t.shape[0])


def _err(source: str, msg: str, field: str | None = None) -> TelemetryError:
    return TelemetryError(f"{source}: {msg}", field=field)


def _sigma(source: str, sigma, columns: Sequence[str]) -> np.ndarray:
    if isinstance(sigma, bool) or sigma is None:
        raise _err(source, f"sigma = {sigma!r}: must be a number > 0 or a list of one per column", "data.sigma")
    if isinstance(sigma, (int, float, np.integer, np.floating)):
        sigma = [sigma] * len(columns)
    if isinstance(sigma, str) or not hasattr(sigma, "__len__"):
        raise _err(source, f"sigma = {sigma!r}: must be a number > 0 or a list of one per column", "data.sigma")
    sigma = list(sigma)
    if len(sigma) != len(columns):
        raise _err(source, f"sigma has {len(sigma)} value(s) but columns has {len(columns)}: give one 1-sigma "
                           "noise level per column (or one number for all)", "data.sigma")
    out = []
    for c, s in zip(columns, sigma):
        if isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
            raise _err(source, f"sigma for column {c!r} = {s!r}: must be a number", "data.sigma")
        if not (math.isfinite(s) and s > 0):
            raise _err(source, f"sigma for column {c!r} = {_fmt(s)}: must be a finite number > 0 (the column's 1-sigma "
                               "noise; it weights the residuals)", "data.sigma")
        out.append(float(s))
    return np.asarray(out)


def _check_columns(source: str, columns, allowed: Sequence[str] | None) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not columns:
        raise _err(source, f"columns = {columns!r}: must be a non-empty list of column names, e.g. "
                           "[\"omega_BN_B_1\", \"theta_p0\"]", "data.columns")
    seen = set()
    for c in columns:
        if not isinstance(c, str):
            raise _err(source, f"columns: {c!r} is not a column name (string)", "data.columns")
        if c == "t":
            raise _err(source, "columns: 't' is the time column, not a measured output", "data.columns")
        if c in seen:
            raise _err(source, f"columns: {c!r} appears twice", "data.columns")
        seen.add(c)
        if allowed is not None and c not in allowed:
            close = difflib.get_close_matches(c, list(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _err(source, f"columns: {c!r} is not an output of the scenario{hint}; outputs are "
                               f"{', '.join(allowed)}", "data.columns")
    return tuple(columns)


def _row(i: int | np.integer, lines: Sequence[int] | None) -> str:
    """Sample `i` in messages: `data row i+1`, with its line in the file when known."""
    return f"data row {i + 1}" + ("" if lines is None else f" (line {lines[i]})")


def _check_t(source: str, t: np.ndarray, t_end: float | None, lines: Sequence[int] | None) -> None:
    if t.shape[0] == 0:
        raise _err(source, "no samples (only a header row)")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise _err(source, f"t = {_fmt(t[bad[0]])} in {_row(bad[0], lines)}: sample times must be finite numbers")
    d = np.diff(t)
    bad = np.flatnonzero(~(d > 0))
    if bad.size:
        i = int(bad[0])
        raise _err(source, f"t is not strictly increasing: {_row(i + 1, lines)} has t = {_fmt(t[i + 1])} after "
                           f"t = {_fmt(t[i])} in {_row(i, lines)} (sort the samples and drop duplicates)")
    if t_end is not None:
        tol = 1e-9 * max(1.0, t_end)
        if t[0] < -tol or t[-1] > t_end + tol:
            out = t[0] if t[0] < -tol else t[-1]
            raise _err(source, f"t = {_fmt(out)} lies outside the scenario's time span [0, {_fmt(t_end)}] s (samples must "
                               "lie within simulation.t_end of the scenario; raise t_end or drop the samples)")


def telemetry_from_arrays(t, values, columns: Sequence[str], sigma, scenario: Scenario | None = None,
                          source: str = "<telemetry>", lines: Sequence[int] | None = None) -> Telemetry:
    """Build and check `Telemetry` from arrays: `t` (T,), `values` (T, C), `columns` (C names), `sigma`
    (number or C numbers). With a `scenario`, column names and the time span are checked against it; with the
    file `lines` of the samples, messages name them."""
    allowed = output_names(scenario) if scenario is not None else None
    cols = _check_columns(source, list(columns), allowed)
    sig = _sigma(source, sigma, cols)
    t = np.asarray(t, dtype=float).reshape(-1)
    v = np.asarray(values, dtype=float)
    if v.ndim == 1 and len(cols) == 1:
        v = v[:, None]
    if v.shape != (t.shape[0], len(cols)):
        raise _err(source, f"values have shape {v.shape}; expected (samples, columns) = ({t.shape[0]}, {len(cols)})")
    _check_t(source, t, None if scenario is None else float(scenario.simulation.t_end), lines)
    bad = np.argwhere(~np.isfinite(v))
    if bad.size:
        i, j = bad[0]
        raise _err(source, f"column {cols[j]!r} has a non-finite value ({_fmt(v[i, j])}) in {_row(i, lines)} at "
                           f"t = {_fmt(t[i])} (drop or fill the sample; NaN is not allowed)")
    return Telemetry(t=t, columns=cols, values=v, sigma=sig, source=source)


def load_telemetry(path: str | os.PathLike, columns: Sequence[str], sigma, scenario: Scenario | None = None) -> Telemetry:
    """Read the CSV file `path` (format: this module's docstring) and check it: the `columns` asked for exist
    (in the file and, with a `scenario`, among its outputs), `t` is strictly increasing and within the
    scenario's `[0, t_end]`, every value read is a finite number, `sigma` (one per column or one for all) > 0.

    **Raises:** `TelemetryError` (a `FitError`/`ValueError`) with a one-line message, before any compute.
    """
    source = os.fspath(path)
    allowed = output_names(scenario) if scenario is not None else None
    cols = _check_columns(source, columns, allowed)
    _sigma(source, sigma, cols)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a byte-order mark is not part of the header
            reader = csv.reader(f)
            rows = [(reader.line_num, r) for r in reader if r and any(x.strip() for x in r)
                    and not r[0].lstrip().startswith("#")]  # file line numbers, for the messages
    except OSError as e:
        raise _err(source, f"cannot read telemetry file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise _err(source, f"not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise _err(source, f"not a valid CSV file: {e}") from None
    if not rows:
        raise _err(source, "empty file; expected a header row with 't' and the measured columns")
    header = [h.strip() for h in rows[0][1]]
    if "t" not in header:
        hint = "; columns must be separated by commas" if len(header) == 1 and ";" in header[0] else ""
        raise _err(source, f"no column 't' (sample times [s]) in the header; header: {', '.join(header)}{hint}")
    for c in cols:
        if c not in header:
            close = difflib.get_close_matches(c, header, n=1, cutoff=0.6)
            hint = f" (the file has {close[0]!r})" if close else ""
            raise _err(source, f"column {c!r} (listed in data.columns) is missing from the file{hint}; file "
                               f"columns: {', '.join(header)}", "data.columns")
    names = ["t", *cols]
    for c in names:
        if header.count(c) > 1:
            raise _err(source, f"column {c!r} appears {header.count(c)} times in the header (line {rows[0][0]}); "
                               "give each column once")
    idx = [header.index(c) for c in names]
    lines = [n for n, _ in rows[1:]]
    data = np.empty((len(rows) - 1, len(idx)))
    for i, (_, row) in enumerate(rows[1:]):
        for j, k in enumerate(idx):
            cell = row[k].strip() if k < len(row) else ""
            if cell == "":
                raise _err(source, f"column {names[j]!r} is empty in {_row(i, lines)}")
            try:
                data[i, j] = float(cell)
            except ValueError:
                raise _err(source, f"column {names[j]!r} = {cell!r} in {_row(i, lines)}: not a number") from None
    return telemetry_from_arrays(data[:, 0], data[:, 1:], cols, sigma, scenario, source, lines)


def write_telemetry(path: str | os.PathLike, t, values, columns: Sequence[str]) -> None:
    """Write a telemetry CSV (header `t,<columns>`, full float precision)."""
    v = np.asarray(values, dtype=float).reshape(len(t), -1)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["t", *columns])
        for ti, row in zip(np.asarray(t, dtype=float), v):
            w.writerow([repr(float(ti)), *(repr(float(x)) for x in row)])


def model_outputs(traj, n_panels: int):
    """The (T, 18 + 2N) output matrix of a `Trajectory` in `output_names` order (JAX arrays, traceable)."""
    import jax.numpy as jnp

    return jnp.concatenate([traj.omega_BN_B, traj.sigma_BN, traj.r_BN_N, traj.v_BN_N, traj.r_CN_N, traj.v_CN_N,
                            traj.theta.reshape(-1, n_panels), traj.thetaDot.reshape(-1, n_panels)], axis=1)


def telemetry_columns(source, scenario: Scenario, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`(t, values)`: the telemetry `columns` (names of `output_names`, e.g. `"omega_BN_B_3"`, `"theta_wing_2"`)
    of a simulated or recorded run, noise-free. `source` is a `Trajectory`, a mapping of arrays with the
    `Trajectory` names, or a `.npz` file of them (`jaxhinge simulate --out`, or a Basilisk run in the
    `tests/data/bsk` layout). **Raises:** `TelemetryError` for a column the scenario does not have."""
    d = np.load(source) if isinstance(source, (str, os.PathLike)) else source
    get = (lambda k: np.asarray(d[k])) if hasattr(d, "keys") else (lambda k: np.asarray(getattr(d, k)))
    t = get("t")
    full = np.concatenate([get(v).reshape(len(t), 3) for v in _VECTORS]
                          + [get(q).reshape(len(t), -1) for q in _PANEL_OUTPUTS], axis=1)
    names = output_names(scenario)
    cols = _check_columns(str(source) if isinstance(source, (str, os.PathLike)) else "<telemetry>", list(columns),
                          names)
    return np.asarray(t, dtype=float), full[:, [names.index(c) for c in cols]]
