"""Recorded-input CSV files (a scenario's `[inputs]` table): a header row `t,<columns>`, one row per sample.

Columns (docs/scenario-files.md): `extForce_B_1..3`, `extForce_N_1..3`, `extTorquePntB_B_1..3`,
`motorTorque_<panel>`, `u_<wheel>`. `t` [s] strictly increasing and covering the run, `[0, simulation.t_end]`
(first sample at or before 0, last at or after `t_end`); every value a finite number. Lines starting with `#` and
blank lines are skipped. Errors are one line naming the file, the line, the value and the rule (`ScenarioError`).

A record longer than the run is legitimate (the first 6 s of a 60 s record): only the samples up to the first at
or after `t_end` act, the rest are read and checked but never used. A record whose `t` is in milliseconds is
refused, on two pieces of evidence together, as both its span and its sample spacing are 1000x what they are in
seconds: (1) its span: read as milliseconds (`t / MS`) it still covers the run, i.e. its last sample is at or after
`MS * t_end`; and (2) its sampling: no sample falls inside the run, the one acting at t = 0 is held to `t_end` or past
it (its spacing is at least the run). A record with only one of the two is run as written. The refusal names both
and tells to divide a millisecond column by 1000; it suggests nothing that would make the millisecond record fit the
run as seconds (such as keeping the rows of the run). Not caught: a millisecond record sampled finer than the run
(then it cannot be told from a long record in seconds, and runs on its first `t_end` milliseconds).

Doubts that do not stop the run are notes (`notes`, issued by the scenario checker's caller as `JaxhingeNote`): with
`hold = "zoh"`, a sample held over more than `HOLD_NOTE` of the run while the record ends within one sample of the
run's end (a record that goes on past the run with two samples or more is a longer record, its samples after
`t_end` are meant not to act: no note); with the `rk4` integrator, samples that fall between two step starts and so
never act.
"""

import csv
import os

import numpy as np

from .._errors import ScenarioError
from .._format import did_you_mean
from .._format import fmt_value as _fmt
from .._model._loads import rk4_unsampled

__all__ = ["read_inputs"]

TIME_RTOL = 1e-9  # a sample within this fraction of t_end (at least 1e-9 s) of 0 or t_end counts as there
MS = 1000.0  # a time column in milliseconds: t / MS in seconds (its span and spacing are MS times too large)
HOLD_NOTE = 0.9  # zoh: a note when one sample is held over more than this share of the run


def read_inputs(path: str, allowed: tuple[str, ...], t_end: float, dt: float | None = None, hold: str = "zoh",
                notes: list[str] | None = None, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """`(t (S,), values (S, C), columns)` of the CSV file `path`, checked against the `allowed` column names and
    the run, `[0, t_end]` [s]; `dt` [s]: the `rk4` step (None for the adaptive integrators, which step onto every
    sample); `hold`: `"zoh"` or `"linear"`; `offset` [s]: `inputs.time_offset`, the delay of the record (the input
    at time t is the record's at t - offset: where the shifted record does not cover the run, a note says which
    end sample is held). Doubts that do not
    stop the run are appended to `notes` (one line each, naming the file)."""

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
    problem = _time_problem(t, t_end)
    if problem:
        raise fail(problem)
    if notes is not None:
        notes.extend(f"{path}: {n}" for n in _time_notes(t, data[:, 1:], t_end, dt, hold))
        tol = TIME_RTOL * max(1.0, t_end)
        if offset and (t[0] + offset > tol or t[-1] + offset < t_end - tol):  # the delayed record: its end held
            first, last = t[0] + offset, t[-1] + offset
            held = (f"its first sample over [0, {_fmt(first)}] s" if first > tol else
                    f"its last sample over [{_fmt(last)}, {_fmt(t_end)}] s")
            notes.append(f"{path}: shifted by inputs.time_offset = {_fmt(offset)} s the record covers "
                         f"{_fmt(first)} .. {_fmt(last)} s, not all of {_run(t_end)}: {held} is held")
    return t, data[:, 1:], columns


def _run(t_end: float) -> str:
    return f"the run, [0, {_fmt(t_end)}] s (simulation.t_end)"


def _first(t: np.ndarray, t_end: float) -> tuple[int, int]:
    """`(i0, i1)`: the sample acting at t = 0 (the last at or before 0) and the first at or after `t_end` (a
    record that covers the run has both)."""
    tol = TIME_RTOL * max(1.0, t_end)
    return int(np.flatnonzero(t <= tol)[-1]), int(np.flatnonzero(t >= t_end - tol)[0])


def _time_problem(t: np.ndarray, t_end: float) -> str | None:
    """Why the sample times `t` [s] (increasing) cannot drive the run `[0, t_end]`, or None."""
    tol = TIME_RTOL * max(1.0, t_end)
    span = f"t = {_fmt(t[0])} .. {_fmt(t[-1])} s"
    if t[0] > tol or t[-1] < t_end - tol:
        return f"{span}: the record must cover {_run(t_end)}: first t <= 0, last t >= {_fmt(t_end)}"
    i0, i1 = _first(t, t_end)
    if t[-1] >= MS * (t_end - tol) and i1 == i0 + 1:  # the span and the sampling of a time column in ms
        inside = int(np.count_nonzero((t / MS > tol) & (t / MS < t_end - tol)))
        return (f"{span}: the record spans {(t[-1] - t[0]) / t_end:.0f}x {_run(t_end)} and only its sample at "
                f"t = {_fmt(t[i0])} acts in it (the next is at t = {_fmt(t[i1])}); as milliseconds, t / {MS:.0f} "
                f"covers the run with {inside} samples inside it: t must be in seconds (a time column in ms? "
                f"divide it by {MS:.0f})")
    return None


def _time_notes(t: np.ndarray, values: np.ndarray, t_end: float, dt: float | None, hold: str) -> list[str]:
    """What the run will make of a record that fits it, where it may not be what its author meant."""
    if hold != "zoh":
        return []
    out = []
    i0, i1 = _first(t, t_end)
    start = np.maximum(t[i0:i1], 0.0)
    stop = np.minimum(t[i0 + 1:i1 + 1], t_end)  # sample i acts on [t_i, t_i+1) within the run
    j = int(np.argmax(stop - start))
    share = (stop[j] - start[j]) / t_end
    longer = np.count_nonzero(t > t_end + TIME_RTOL * max(1.0, t_end)) >= 2  # a longer record: the rest not meant
    if share > HOLD_NOTE and np.ptp(values, axis=0).any() and not longer:
        out.append(f"t: the sample at t = {_fmt(t[i0 + j])} is held over {share:.0%} of {_run(t_end)} (the next is at "
                   f"t = {_fmt(t[i0 + j + 1])}): the rest of the record barely acts; is t in seconds?")
    if dt is not None and i1 > i0 + 1:
        silent = np.flatnonzero(rk4_unsampled(start[1:], stop[1:], dt))  # the samples inside the run
        if len(silent):
            out.append(f"t: {len(silent)} of the {i1 - i0 - 1} samples inside the run never act: with integrator "
                       f"\"rk4\" the inputs are sampled at each step start, t = k dt (dt = {_fmt(dt)} s), and these "
                       f"fall between two (the first at t = {_fmt(t[i0 + 1 + silent[0]])})")
    return out


def relative_to(source: str, csv_path: str) -> str:
    """`csv_path` resolved against the folder of the scenario file `source` (or the working directory)."""
    folder = os.path.dirname(os.path.abspath(source)) if not source.startswith("<") else os.getcwd()
    return os.path.normpath(os.path.join(folder, csv_path))
