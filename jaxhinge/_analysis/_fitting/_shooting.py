r"""The shooting methods of a telemetry fit, as strategy objects (`identify(shooting=...)`, docs/telemetry.md):
`SingleShooting(horizon=...)` integrates the whole record from the initial state at every solver step, through a
growing horizon; `MultipleShooting(segment=..., continuity_rtol=...)` cuts it into segments integrated side by side
(`_segments`: the problem; `_shooting_solve`: its structured solver). Each owns its residuals and runs itself from
a start (`run`), with the fits' one driver (`_lsq_solver.solve`). `choose_shooting` picks one for `"auto"` and
refuses, by name, a record multiple shooting cannot cut (`why_not_multiple`). Files and the command line name them
`"single"`, `"multiple"` (`SHOOTING`).
"""

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._scenario import compile_key
from ..._model._telemetry import Telemetry
from .._linear._modes import modes
from ._lsq_coords import LOG_CLIP
from ._lsq_solver import FAIL, Solution, solve
from ._segments import grid, point_step, segment_length, shooting_problem
from ._shooting_solve import solve_multiple
from ._solvers import LevenbergMarquardt

__all__ = ["SHOOTING", "FitRun", "MultipleShooting", "SingleShooting", "as_shooting", "auto_horizon", "check_horizon",
           "choose_shooting", "why_not_multiple", "worse_than_start"]

_MIN_SEGMENTS = 4  # "auto" shoots multiple segments when the record holds at least this many

@dataclasses.dataclass(frozen=True)
class FitRun:
    """What a shooting method needs to fit from a start: the scenarios and telemetries (one per record), the
    records' joint residuals at full weight `base` (`_identify._JointResiduals`), the fitted coordinates, the
    optimistix solver `optimiser` and the fit's settings (`max_steps` per stage, `rtol`, `atol`, `max_step`), the
    `horizon` given to `identify` (the default of `SingleShooting`), the number of `starts` and the progress
    callable `say`."""

    scens: Sequence
    tels: Sequence[Telemetry]
    base: eqx.Module
    coords: Sequence
    optimiser: object
    max_steps: int
    rtol: float
    atol: float
    max_step: float
    horizon: Sequence[float] | str
    starts: int
    say: Callable[[str], None]


_CYCLES = 1.5  # the first horizon spans this many periods of the fastest flexible mode
_MIN_SAMPLES = 10  # ... and at least this many samples


def auto_horizon(scenario, t: np.ndarray) -> list[float]:
    """The default growing horizon for a record sampled at times `t` [s]: the first stage spans
    `_CYCLES` = 1.5 periods of the fastest flexible mode of the initial guess (`jaxhinge.modes`, free hub; at
    least `_MIN_SAMPLES` samples), each later stage twice the previous, the last the whole record. A
    frequency 15 % off (k 30 % off) slips a quarter period after ~1.7 periods, so the first stage stays in the
    data's basin; each fitted stage predicts the next one's phase. A record shorter than that: `[1.0]`."""
    t = np.asarray(t, dtype=float)
    span = float(t[-1] - t[0])
    f = np.asarray(modes(scenario).frequency_hz, dtype=float)
    f = f[np.isfinite(f) & (f > 0)]
    if span <= 0 or not f.size:
        return [1.0]
    first = max(_CYCLES / float(f.max()), float(t[min(_MIN_SAMPLES, t.size) - 1] - t[0])) / span
    out = []
    while first < 0.75:
        out.append(round(first, 6))
        first *= 2.0
    return out + [1.0]


def check_horizon(horizon) -> list[float] | str:
    """`horizon` as `"auto"` or a list of increasing fractions in (0, 1] ending with 1; else a `FitError`."""
    if isinstance(horizon, str):
        if horizon == "auto":
            return horizon
        hz = None
    else:
        hz = list(horizon) if not isinstance(horizon, (int, float)) else [horizon]
    if hz is None or not hz or any(isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h <= 1
                                   for h in hz) or any(b <= a for a, b in itertools.pairwise(hz)) or hz[-1] != 1:
        raise FitError(f"horizon = {_fmt(horizon)}: must be \"auto\" or increasing fractions in (0, 1] ending "
                       "with 1, e.g. [0.25, 0.5, 1.0]", field="horizon")
    return hz


@dataclasses.dataclass(frozen=True)
class SingleShooting:
    """Integrate the whole record from the initial state at every solver step, through a growing horizon: for
    records short compared with the slowest mode (`SHOOTING["single"]`).

    - `horizon`: fractions of the record fitted one after the other, increasing, the last 1.0: each stage fits
      the samples with $t \\le h\\,t_{last}$ from the previous stage's solution (one compiled solver: later samples
      get weight 0, and no step is integrated after the stage's last sample); `"auto"` (default): the fit's
      `horizon` (`identify(horizon=...)`), whose own default is `auto_horizon` of the records."""

    horizon: Sequence[float] | str = "auto"
    name = "single"

    def __post_init__(self):
        object.__setattr__(self, "horizon", check_horizon(self.horizon))

    def prepare(self, fit: FitRun, u0) -> list[float]:
        """The horizon of this fit: its own, the fit's, or the most cautious `auto_horizon` of the records."""
        hz = self.horizon if self.horizon != "auto" else fit.horizon
        if hz == "auto":
            return min((auto_horizon(sc, tel.t) for sc, tel in zip(fit.scens, fit.tels)), key=lambda x: -len(x))
        return list(hz)

    def run(self, fit: FitRun, hz: list[float], si: int, u0) -> dict:
        """Fit from the coordinates `u0` (start `si`) through the horizon `hz` (`prepare`): `{"sol" (the last
        stage's `Solution`), "r_init" (residuals at `u0` on the whole record, when a stage evaluated them),
        "steps", "u0", "history", "shooting" (result.json's block), "wall"}`."""
        u, history, steps, r_init, wall = u0, [], 0, None, 0.0
        t_rel = [tel.t - tel.t[0] for tel in fit.tels]
        w_full = [rec.weight for rec in fit.base.records]
        for h in hz:
            masks = [(tr <= h * max(tr[-1], 1e-300) * (1 + 1e-12))[:, None] for tr in t_rel]
            # no step after the stage's last sample: a stage integrates only the data it weighs
            stops = [jnp.asarray(np.inf if h == 1 else float(tel.t[np.flatnonzero(m[:, 0])[-1]]))
                     for tel, m in zip(fit.tels, masks)]
            prob = eqx.tree_at(lambda p: tuple(x for rec in p.records for x in (rec.weight, rec.t_stop)), fit.base,
                               tuple(x for m, w, st in zip(masks, w_full, stops)
                                     for x in (jnp.where(jnp.asarray(m), w, 0.0), st)))
            stage = f"identify: start {si + 1}/{fit.starts}, horizon {h:g}"
            sol = solve(prob, u, fit.optimiser, max_steps=fit.max_steps,
                        progress=lambda s, stage=stage: fit.say(f"{stage}: {s}"))
            if h == 1 and steps == 0:
                r_init = sol.initial_residuals
            u = sol.u
            history.append(sol.history)
            steps += sol.steps
            wall += sol.wall_s
            fit.say(f"{stage}: {sol.steps} steps, chi2 {sol.chi2:.6g} ({sum(int(m.sum()) for m in masks)} samples), "
                    f"{sol.status}")
        return {"sol": sol, "r_init": r_init, "steps": steps, "u0": u0, "history": np.concatenate(history),
                "shooting": {"method": "single", "horizon": list(hz)}, "wall": wall}


@dataclasses.dataclass(frozen=True)
class MultipleShooting:
    """Multiple shooting (`_segments`' module docstring; `SHOOTING["multiple"]`).

    - `segment`: the segment length [s], rounded to whole sample intervals (at least 10); `"auto"`: one period of
      the initial model's slowest flexible mode (`segment_length`).
    - `continuity_rtol`: the continuity defects' sigma, relative to each state component's range over the
      initial guess's run (the defects' weight in the first phase).
    - `max_steps`: the most steps of each phase.

    A fit that ends worse than it started (`worse_than_start`) falls back to single shooting from the same start,
    reported (the stopgap until the first phase is globalised)."""

    segment: float | str = "auto"
    continuity_rtol: float = 3e-2
    max_steps: int = 50
    name = "multiple"

    def __post_init__(self):
        seg = self.segment
        if not (seg == "auto" or (isinstance(seg, (int, float)) and not isinstance(seg, bool) and math.isfinite(seg)
                                  and seg > 0)):
            raise FitError.bad(None, "segment", seg, 'must be "auto" or a duration in seconds > 0')
        r = self.continuity_rtol
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r < 1:
            raise FitError.bad(None, "continuity_rtol", r, "must be a number in (0, 1)")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise FitError.bad(None, "max_steps", self.max_steps, "must be an integer >= 1")

    def prepare(self, fit: FitRun, u0):
        """The record cut into segments (`shooting_problem`), from the run at `u0`."""
        return shooting_problem(fit.scens, fit.tels, fit.base.records, self, u0)

    def run(self, fit: FitRun, sp, si: int, u0) -> dict:
        """Fit from `u0` (start `si`) on the segments `sp` (`prepare`): as `SingleShooting.run`; after a
        fall-back, single shooting's run with `shooting["fallback"]`: `from`, `reason`, `multiple` (the abandoned
        run's block)."""
        sol, info = solve_multiple(sp, u0, rtol=fit.rtol, atol=fit.atol, max_step=fit.max_step, progress=fit.say)
        why = worse_than_start(sol, fit.coords)
        if why is None:
            return {"sol": sol, "r_init": sol.initial_residuals, "steps": sol.steps, "u0": u0,
                    "history": sol.history, "shooting": info, "wall": sol.wall_s}
        fit.say(f"identify: start {si + 1}/{fit.starts}: multiple shooting ended worse than its start ({why}); "
                "falling back to single shooting")
        single = SingleShooting()
        fb = single.run(fit, single.prepare(fit, u0), si, u0)
        fb["steps"] += sol.steps
        fb["wall"] += sol.wall_s
        fb["r_init"] = sol.initial_residuals if sol.initial_residuals is not None else fb["r_init"]
        fb["shooting"] = {**fb["shooting"], "fallback": {"from": "multiple", "reason": why, "multiple": info}}
        return fb


def worse_than_start(sol: Solution, coords) -> str | None:
    """Why a fit's solution is worse than its start, in words (`None`: it is not): its model does not simulate
    (non-finite), a log-ratio coordinate sits at its bound (`LOG_CLIP`: the parameter e^30 times its guess or
    1/e^30 of it: a bound reached, not a minimum), or its chi2 is above the start's."""
    if np.all(sol.residuals == FAIL) or not np.isfinite(sol.chi2):
        return "the model at its solution does not simulate (non-finite)"
    at = [c.name for c, u in zip(coords, np.asarray(sol.u)) if c.log and abs(u) >= LOG_CLIP * (1 - 1e-12)]
    if at:
        return f"{at[0]} reached its bound, a factor e^{LOG_CLIP:g} from its guess"
    r0 = sol.initial_residuals
    if r0 is not None and np.all(np.isfinite(r0)) and not np.all(r0 == FAIL) and sol.chi2 > float(r0 @ r0):
        return f"chi2 rose from {float(r0 @ r0):.6g} to {sol.chi2:.6g}"
    return None


SHOOTING = {"single": SingleShooting, "multiple": MultipleShooting}  # the file and CLI names; also "auto"


def as_shooting(x) -> SingleShooting | MultipleShooting | str:
    """A shooting object from itself, its name or `"auto"` (`identify(shooting=...)`)."""
    if isinstance(x, (SingleShooting, MultipleShooting)) or x == "auto":
        return x
    if isinstance(x, str) and x in SHOOTING:
        return SHOOTING[x]()
    raise FitError.bad(None, "shooting", x, 'must be "auto", "single", "multiple" or a SingleShooting() / '
                       "MultipleShooting(...)")



# ------------------------------------------------------------------------------------------------------------
# Which records can be shot in segments
# ------------------------------------------------------------------------------------------------------------


def why_not_multiple(scenario, telemetry: Telemetry, time_offset: bool) -> str | None:
    """Why this record cannot be fitted by multiple shooting (None: it can): at least 3 samples, uniform on the
    integrator's grid (rk4: its step `dt`; the adaptive integrators: any uniform sampling), every sample a whole
    number of sample intervals after t = 0 (the segments start from the scenario's initial state there), no time
    offset (`time_offset`: one is fitted or set: the samples would move off the grid), no controller in the loop
    with an adaptive integrator (`simulate` solves that loop period by period). Where the hub's position or
    velocity is measured, they join each segment's unknowns; a controller's integral state joins them too, and
    every segment then starts on a control sample."""
    cfg = scenario.simulation
    if time_offset:
        return "a sensor time offset is fitted or set (the samples move off the step grid)"
    if telemetry.samples < 3:
        return "fewer than 3 samples"
    if not cfg.integrator.fixed_step and scenario.control is not None:
        return (f'integrator = "{cfg.integrator.name}" with a controller in the loop (solved period by period: '
                'use integrator "rk4")')
    step = point_step(scenario, telemetry.t)
    on = grid(step, telemetry.t)
    if on is None:
        return f"the samples are not uniform on the rk4 grid (dt = {_fmt(cfg.dt)} s)"
    if on[0] % on[1]:  # the segments start from the scenario's initial state at t = 0, on the samples' grid
        return (f"the first sample (t = {_fmt(float(telemetry.t[0]))} s) is not a whole number of sample intervals "
                "after t = 0")
    return None


def _why_not_together(scens, tels, parts) -> str | None:
    """Why several records cannot be shot together (None: they can, or there is one): their segments run side by
    side as one vmapped program, so the records must share their sample times, columns, model structure (the
    same panels, wheels, controller, loads kinds: their values may differ) and sensor models."""
    if len(tels) < 2:
        return None
    shape = lambda sc: (jax.tree.structure(compile_key(sc)),
                        [np.shape(x) for x in jax.tree.leaves(eqx.filter(compile_key(sc), eqx.is_array))])
    sensors = lambda part: (len(part[0]), [c.name for c in part[1]], sorted(k for k in part[2]),
                            sorted((x.kind, x.column) for _, _, x in part[3]))
    for k in range(1, len(tels)):
        if tels[k].columns != tels[0].columns or not np.array_equal(tels[k].t, tels[0].t):
            return f"records 1 and {k + 1} differ in their sample times or columns (records shot together share them)"
        if shape(scens[k]) != shape(scens[0]) or sensors(parts[k]) != sensors(parts[0]):
            return (f"records 1 and {k + 1} differ in their model's structure, free parameters or sensor models "
                    "(records shot together share them)")
    return None


def choose_shooting(shooting, scens, tels, parts, solver=None) -> SingleShooting | MultipleShooting:
    """The shooting of a fit: `shooting` as given (`MultipleShooting` refused, naming why, where a record cannot be
    cut into segments: `why_not_multiple`), or for `"auto"` multiple shooting where the one record spans at
    least `_MIN_SEGMENTS` = 4 periods of the initial model's slowest flexible mode and can be cut, else single.
    `parts`: `check_identify`'s records; `solver`: the fit's solver object (multiple shooting's phases are
    Levenberg-Marquardt's: another solver is refused by name with `"multiple"`, and `"auto"` shoots single)."""
    shooting = as_shooting(shooting)
    if isinstance(shooting, SingleShooting):
        return shooting
    if solver is not None and not isinstance(solver, LevenbergMarquardt):
        why = (f"solver = {solver.name!r}: multiple shooting's phases are Levenberg-Marquardt's (then Bock's condensed "
               'Gauss-Newton); use solver = "lm"')
    else:
        why = _why_not_together(scens, tels, parts)
        for sc, tel, (_, _, fixed, free_sensors) in zip(scens, tels, parts):
            offset = fixed.get(("time_offset", None), 0.0) != 0.0 or any(x.kind == "time_offset"
                                                                          for _, _, x in free_sensors)
            why = why or why_not_multiple(sc, tel, offset)
    if shooting == "auto":  # (measured with rk4: the adaptive integrators shoot multiple when asked)
        if why is not None or not scens[0].simulation.integrator.fixed_step:
            return SingleShooting()
        span = float(tels[0].t[-1] - tels[0].t[0])
        return MultipleShooting() if span >= _MIN_SEGMENTS * segment_length(scens[0]) else SingleShooting()
    if why is not None:
        raise FitError(f'shooting = "multiple": {why}; use shooting = "single" (or "auto")', field="shooting")
    return shooting


