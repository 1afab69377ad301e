r"""Telemetry: measured time histories of a spacecraft (the data model; the CSV file is `_io._telemetry_file`, the
model's output matrix and the columns' units `_simulation._telemetry`).

Sample times `t` [s] (strictly increasing, samples may be irregular, all within the scenario's `[0, t_end]`) and
any of the measured outputs (`output_names`), one column each:

| column | meaning |
|---|---|
| `omega_BN_B_1..3` | hub angular rate in B [rad/s] (gyro) |
| `sigma_BN_1..3` | hub attitude MRP (star tracker); either MRP set is accepted (the shadow set is matched) |
| `r_BN_N_1..3`, `v_BN_N_1..3` | hub point B position [m] / velocity [m/s] in N |
| `r_CN_N_1..3`, `v_CN_N_1..3` | system centre of mass position / velocity in N |
| `Omega_<wheel>`, `u_<wheel>` | wheel speed relative to the hub [rad/s] / motor torque applied [N m] of the wheel named `<wheel>` |
| `theta_<panel>`, `thetaDot_<panel>` | hinge angle [rad] / rate [rad/s] of the panel named `<panel>` (any panel, single or in a chain; relative to its parent) |

Components are numbered 1..3 as in the column names.
"""

import dataclasses
import difflib
import math
from collections.abc import Sequence

import numpy as np

from .._errors import TelemetryError
from .._format import fmt_value as _fmt
from ._scenario import Scenario

__all__ = ["PANEL_OUTPUTS", "VECTOR_COLUMNS", "WHEEL_OUTPUTS", "Telemetry", "check_columns", "output_names",
           "row_name", "sensor_sigma", "telemetry_error", "telemetry_from_arrays"]

VECTOR_COLUMNS = ("omega_BN_B", "sigma_BN", "r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N")
PANEL_OUTPUTS = ("theta", "thetaDot")
WHEEL_OUTPUTS = {"Omega": "Omega", "u": "u_current"}  # column prefix -> Trajectory field


def output_names(scenario: Scenario) -> tuple[str, ...]:
    """Every telemetry column name this scenario can simulate, in the order of the model's output matrix."""
    names = [f"{v}_{j}" for v in VECTOR_COLUMNS for j in (1, 2, 3)]
    for q in PANEL_OUTPUTS:
        names += [f"{q}_{p}" for p in scenario.spacecraft.panels.labels]
    wheels = scenario.spacecraft.wheels
    for q in WHEEL_OUTPUTS:
        names += [f"{q}_{w}" for w in (wheels.labels if wheels is not None else ())]
    return tuple(names)


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


def telemetry_error(source: str, msg: str, field: str | None = None) -> TelemetryError:
    return TelemetryError(f"{source}: {msg}", source=source, field=field)


def sensor_sigma(source: str, sigma, columns: Sequence[str]) -> np.ndarray:
    if isinstance(sigma, bool) or sigma is None:
        raise telemetry_error(source, f"sigma = {sigma!r}: must be a number > 0 or a list of one per column", "data.sigma")
    if isinstance(sigma, (int, float, np.integer, np.floating)):
        sigma = [sigma] * len(columns)
    if isinstance(sigma, str) or not hasattr(sigma, "__len__"):
        raise telemetry_error(source, f"sigma = {sigma!r}: must be a number > 0 or a list of one per column", "data.sigma")
    sigma = list(sigma)
    if len(sigma) != len(columns):
        raise telemetry_error(source, f"sigma has {len(sigma)} value(s) but columns has {len(columns)}: give one 1-sigma "
                           "noise level per column (or one number for all)", "data.sigma")
    out = []
    for c, s in zip(columns, sigma):
        if isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
            raise telemetry_error(source, f"sigma for column {c!r} = {s!r}: must be a number", "data.sigma")
        if not (math.isfinite(s) and s > 0):
            raise telemetry_error(source, f"sigma for column {c!r} = {_fmt(s)}: must be a finite number > 0 (the column's 1-sigma "
                               "noise; it weights the residuals)", "data.sigma")
        out.append(float(s))
    return np.asarray(out)


def check_columns(source: str, columns, allowed: Sequence[str] | None) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not columns:
        raise telemetry_error(source, f"columns = {columns!r}: must be a non-empty list of column names, e.g. "
                           "[\"omega_BN_B_1\", \"theta_p0\"]", "data.columns")
    seen = set()
    for c in columns:
        if not isinstance(c, str):
            raise telemetry_error(source, f"columns: {c!r} is not a column name (string)", "data.columns")
        if c == "t":
            raise telemetry_error(source, "columns: 't' is the time column, not a measured output", "data.columns")
        if c in seen:
            raise telemetry_error(source, f"columns: {c!r} appears twice", "data.columns")
        seen.add(c)
        if allowed is not None and c not in allowed:
            close = difflib.get_close_matches(c, list(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise telemetry_error(source, f"columns: {c!r} is not an output of the scenario{hint}; outputs are "
                               f"{', '.join(allowed)}", "data.columns")
    return tuple(columns)


def row_name(i: int | np.integer, lines: Sequence[int] | None) -> str:
    """Sample `i` in messages: `data row i+1`, with its line in the file when known."""
    return f"data row {i + 1}" + ("" if lines is None else f" (line {lines[i]})")


def _check_t(source: str, t: np.ndarray, t_end: float | None, lines: Sequence[int] | None) -> None:
    if t.shape[0] == 0:
        raise telemetry_error(source, "no samples (only a header row)")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise telemetry_error(source, f"t = {_fmt(t[bad[0]])} in {row_name(bad[0], lines)}: sample times must be finite numbers")
    d = np.diff(t)
    bad = np.flatnonzero(~(d > 0))
    if bad.size:
        i = int(bad[0])
        raise telemetry_error(source, f"t is not strictly increasing: {row_name(i + 1, lines)} has t = {_fmt(t[i + 1])} after "
                           f"t = {_fmt(t[i])} in {row_name(i, lines)} (sort the samples and drop duplicates)")
    if t_end is not None:
        tol = 1e-9 * max(1.0, t_end)
        if t[0] < -tol or t[-1] > t_end + tol:
            out = t[0] if t[0] < -tol else t[-1]
            raise telemetry_error(source, f"t = {_fmt(out)} lies outside the scenario's time span [0, {_fmt(t_end)}] s (samples must "
                               "lie within simulation.t_end of the scenario; raise t_end or drop the samples)")


def telemetry_from_arrays(t, values, columns: Sequence[str], sigma, scenario: Scenario | None = None,
                          source: str = "<telemetry>", lines: Sequence[int] | None = None) -> Telemetry:
    """Build and check `Telemetry` from arrays: `t` (T,), `values` (T, C), `columns` (C names), `sigma`
    (number or C numbers). With a `scenario`, column names and the time span are checked against it; with the
    file `lines` of the samples, messages name them."""
    allowed = output_names(scenario) if scenario is not None else None
    cols = check_columns(source, list(columns), allowed)
    sig = sensor_sigma(source, sigma, cols)
    t = np.asarray(t, dtype=float).reshape(-1)
    v = np.asarray(values, dtype=float)
    if v.ndim == 1 and len(cols) == 1:
        v = v[:, None]
    if v.shape != (t.shape[0], len(cols)):
        raise telemetry_error(source, f"values have shape {v.shape}; expected (samples, columns) = ({t.shape[0]}, {len(cols)})")
    _check_t(source, t, None if scenario is None else float(scenario.simulation.t_end), lines)
    bad = np.argwhere(~np.isfinite(v))
    if bad.size:
        i, j = bad[0]
        raise telemetry_error(source, f"column {cols[j]!r} has a non-finite value ({_fmt(v[i, j])}) in {row_name(i, lines)} at "
                           f"t = {_fmt(t[i])} (drop or fill the sample; NaN is not allowed)")
    return Telemetry(t=t, columns=cols, values=v, sigma=sig, source=source)
