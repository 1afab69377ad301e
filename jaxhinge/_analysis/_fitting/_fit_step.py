r"""The integration step of a telemetry fit, chosen and checked (`identify(dt="auto")`, `[fit] dt = "auto"`).

A fit needs the model's outputs to well within the data's noise, not to Basilisk's round-off: rk4's error is
$O(h^4)$, and at the record's own sample interval it is usually far below what moves the fitted values. The
coarsest step is found and checked by a **Richardson pair**: the fit at step $h$ and again at $h/2$, both from the
same initial guess. rk4's global error in the fitted values is $e(h) \approx \tfrac{16}{15}\,(p_h - p_{h/2})$;
$h$ is accepted when that is below `TOLERANCE` = 0.1 of every parameter's sigma, else $h/2$ is checked against
$h/4$, and so on. The result is the fit at the accepted $h$, with the check reported
(`IdentifyResult.integration`).

Candidate steps divide the sample interval and put every sample time, `t_end`, `save_dt`, the recorded inputs'
switch times (zero-order hold) and the pulses' edges on the grid, so a coarser step changes only the
integration's truncation error, never when a command acts (that error would be $O(h)$, which the pair would
misjudge). The first candidate is the coarsest with $2\pi f_{max} h \le 0.5$ ($f_{max}$: the fastest flexible
mode of the initial model; rk4's frequency error there is about $(0.5)^4/120 = 5\times10^{-4}$).
"""

import math

import numpy as np

from ..._errors import ConfigError, FitError
from ..._format import fmt_value as _fmt
from ._segments import mode_range

__all__ = ["TOLERANCE", "candidate_steps", "richardson"]

TOLERANCE = 0.1  # the accepted step's estimated error in any fitted value, in that value's sigmas
_START = 0.5  # the first candidate: 2 pi f_max h at most this
_DIVISORS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 40, 50, 80, 100, 125, 200, 250, 400, 500, 1000)


def _on_grid(times, h: float) -> bool:
    t = np.asarray(times, dtype=float).ravel()
    return bool(np.all(np.abs(t / h - np.round(t / h)) < 1e-9 * np.maximum(1.0, np.abs(t / h))))


def candidate_steps(scenario, telemetries) -> list[float]:
    """The rk4 steps a fit may use, coarsest first (module docstring): sample interval / k for the divisors k
    that keep every sample, `t_end`, `save_dt`, input switch and pulse edge on the grid, the first with
    `2 pi f_max h <= 0.5`. Raises `FitError` when there is none (irregular samples, inputs off every grid)."""
    tels = list(telemetries)
    gaps = [float(np.min(np.diff(np.asarray(tel.t, dtype=float)))) for tel in tels if tel.samples > 1]
    if not gaps:
        raise FitError('dt = "auto": needs records of at least 2 samples', field="dt")
    base = float(f"{min(gaps):.12g}")  # the sample interval, without the sample times' rounding
    cfg = scenario.simulation
    fixed = [cfg.t_end, cfg.save_dt] + [float(t) for tel in tels for t in np.asarray(tel.t)]
    inputs = scenario.loads.inputs
    if inputs is not None:
        fixed += list(np.asarray(inputs.t) + float(np.asarray(inputs.time_offset)))
    pulses = scenario.loads.pulses
    if pulses is not None:
        fixed += list(np.asarray(pulses.t_start).ravel()) + list(np.asarray(pulses.t_end).ravel())
    f_max = mode_range(scenario)[1]
    h_max = _START / (2 * math.pi * f_max) if f_max > 0 else math.inf
    out = [base / k for k in _DIVISORS if base / k <= h_max * (1 + 1e-12) and _on_grid(fixed, base / k)]
    if not out:
        raise FitError(f'dt = "auto": no rk4 step divides the sample interval {_fmt(base)} s and keeps every '
                       "sample, input switch and pulse edge on its grid; give the scenario's dt instead", field="dt")
    return out


def richardson(scenario, telemetries, fit):
    """Choose the step by Richardson pairs (module docstring). `fit(scenario)` runs the fit with the scenario's
    step and returns its `IdentifyResult`. **Returns** `(result at the accepted step, report)`; the report lists
    every pair tried: `{"dt", "checked_with", "max_error_sigma" (16/15 |p_h - p_h/2| / sigma, largest over the
    parameters), "accepted"}`."""
    steps = candidate_steps(scenario, telemetries)

    def with_dt(h):
        try:
            return scenario.with_simulation(dt=h)
        except ConfigError:
            return None

    usable = [h for h in steps if with_dt(h) is not None and with_dt(h / 2) is not None]
    if not usable:
        raise FitError(f'dt = "auto": none of the steps {", ".join(_fmt(h) for h in steps)} s fits the scenario\'s '
                       "t_end and save_dt; give the scenario's dt instead", field="dt")
    tried, prev = [], None
    for h in usable:
        r_h = prev[1] if prev is not None and math.isclose(prev[0], h) else fit(with_dt(h))
        r_2 = fit(with_dt(h / 2))
        sig = np.where(np.isfinite(r_2.sigma) & (r_2.sigma > 0), r_2.sigma, np.inf)
        err = float(np.max(16.0 / 15.0 * np.abs(np.asarray(r_h.values) - np.asarray(r_2.values)) / sig))
        ok = bool(r_h.converged and r_2.converged and err < TOLERANCE)
        tried.append({"dt": h, "checked_with": h / 2, "max_error_sigma": err, "accepted": ok})
        if ok:
            return r_h, {"dt": h, "tolerance_sigma": TOLERANCE, "pairs": tried}
        prev = (h / 2, r_2)
    # none passed: the finest fit made, reported as unchecked (numerical trouble is reported, not raised)
    return prev[1], {"dt": tried[-1]["checked_with"], "tolerance_sigma": TOLERANCE, "pairs": tried,
                     "note": "no step passed its check: the finest fit made is returned, its step unchecked"}
