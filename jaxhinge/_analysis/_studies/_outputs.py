r"""The outputs of sensitivity studies and the metrics of campaigns, as objects.

Each output kind is a final class of `AbstractOutput`; each output a file may name is one declaration in
`DECLARED` (its name as files write it, its unit and description), and `OUTPUTS` maps the names to them. A
declaration owns what an output is: its options and their checks (`check`), what it needs (`requires`: a
controller, wheels), its shape and labels (`layout`), whether it needs a simulation (`simulated`), its value
(`compute`, from the model and its trajectory; the status codes it may report, `statuses`). A parsed output is its
declaration with its checked `options` (`with_options`), static under jit (hashable, a program key).

The table of docs/sweeps-and-sensitivities.md is `markdown_table()` (regenerate it with
`python -m jaxhinge._analysis._studies._outputs`).
"""

import abc
import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._format import did_you_mean
from ..._format import fmt_value as _fmt
from ..._math import safe_sqrt, sub_mrp
from ..._model._boundary import as_boundary
from ..._simulation._trajectory import OUTPUT_NAMES, OUTPUT_UNITS
from .._linear._closed_loop import closed_loop_unjitted, loop_shape
from .._linear._modes import modes_unjitted

__all__ = ["DECLARED", "OUTPUTS", "AbstractOutput", "markdown_table"]

Fail = Callable[[str], Exception]  # a message -> the error to raise (the caller names the source)


# ------------------------------------------------------------------------------------------------------------
# The functions the outputs are made of
# ------------------------------------------------------------------------------------------------------------


def attitude_error(sigma_BN: Float[Array, "3"], sigma_RN: Float[Array, "3"]) -> Float[Array, ""]:
    """Principal rotation angle $\\Phi \\in [0, \\pi]$ [rad] between the attitudes $\\sigma_{BN}$ and $\\sigma_{RN}$
    (MRPs), through the MRP difference `sub_mrp`; smooth for $0 < \\Phi < \\pi$, 0 derivative at 0."""
    q = sub_mrp(sigma_BN, sigma_RN)
    return 4.0 * jnp.arctan(safe_sqrt(jnp.dot(q, q)))


def settling_time(
    t: Float[Array, " T"], signal: Float[Array, " T"], threshold: float
) -> tuple[Float[Array, ""], Any]:
    """Interpolated last time `signal` (>= 0) is above `threshold` (the `_sensitivity` module docstring) and a
    status code: 0 settled, 1 never above the threshold ($t_s = 0$), 2 still above at the end ($t_s = t_{end}$)."""
    above = jax.lax.stop_gradient(signal) > threshold
    T = t.shape[0]
    k = (T - 1) - jnp.argmax(above[::-1])  # last index above (valid when any(above))
    k1 = jnp.minimum(k + 1, T - 1)
    sk, sk1 = signal[k], signal[k1]
    denom = jnp.where(k1 > k, sk - sk1, 1.0)
    ts = t[k] + (sk - threshold) / denom * (t[k1] - t[k])
    never = ~jnp.any(above)
    unsettled = above[-1]
    ts = jnp.where(never, 0.0, jnp.where(unsettled, t[-1], ts))
    status = jnp.where(never, 1, jnp.where(unsettled, 2, 0))
    return ts, status


def _hub_rate(traj) -> Any:
    return safe_sqrt(jnp.sum(traj.omega_BN_B * traj.omega_BN_B, axis=-1))


def _axis_labels(scenario, axis: str | None) -> tuple[str, ...]:
    """The labels of one axis of an output: panel or wheel names, the components `0..2`, none."""
    if axis == "panel":
        return scenario.spacecraft.panels.labels
    if axis == "wheel":
        return () if scenario.spacecraft.wheels is None else scenario.spacecraft.wheels.labels
    return ("0", "1", "2") if axis == "component" else ()


# ------------------------------------------------------------------------------------------------------------
# The kinds
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AbstractOutput(abc.ABC):
    """An output of a simulated trajectory or of the linear modes (module docstring).

    Fields: `name` (as files write it), `unit`, `description` (the docs table's "value"), `requires` (`"control"`,
    `"wheels"`: what the scenario must have), `options` (the checked options, sorted `(key, value)` pairs; empty in
    a declaration). Class data: `kind` (the block's kind in results and reports: `"history"`, `"scalar"`,
    `"vector"`, `"modal"`), `simulated`, `option_keys` and `option_text` (the options a file may give, in words),
    `statuses` (the notes of the status codes `compute` may return besides 0)."""

    name: str
    unit: str
    description: str
    requires: tuple[str, ...] = dataclasses.field(default=(), kw_only=True)
    options: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), kw_only=True)

    kind: ClassVar[str]
    simulated: ClassVar[bool] = True
    option_keys: ClassVar[tuple[str, ...]] = ()
    option_text: ClassVar[str] = ""
    statuses: ClassVar[Mapping[int, str]] = {}

    def opt(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    def with_options(self, options: Mapping[str, Any]) -> "AbstractOutput":
        return dataclasses.replace(self, options=tuple(sorted(options.items())))

    @abc.abstractmethod
    def check(self, scenario, opts: Mapping[str, Any], where: str, fail: Fail) -> dict[str, Any]:
        """The options `opts` (keys already among `option_keys`) checked and cleaned, or `fail(message)` raised."""

    @abc.abstractmethod
    def layout(self, scenario, T: int) -> tuple[tuple[int, ...], tuple[str, ...], str | None]:
        """`(shape, labels, axis)` of the output's block: `T` samples of a history; `labels` name the components,
        along `axis` (`"panel"`, `"wheel"`, `"mode"`, `"component"`, None)."""

    @abc.abstractmethod
    def compute(self, scenario, model, trajectory, loops: dict) -> tuple[Any, Any]:
        """`(values (size,), status)` of the model `model` (the nominal `scenario` with its parameters applied) and
        its trajectory (None when not `simulated`); `loops` caches each closed loop linearised once."""


def _no_options(scenario, opts, where, fail) -> dict[str, Any]:
    return {}


@dataclasses.dataclass(frozen=True)
class History(AbstractOutput):
    """A whole time history of the trajectory, `(T, components)` along `axis`."""

    axis: str | None = dataclasses.field(default="component", kw_only=True)
    kind: ClassVar[str] = "history"

    def check(self, scenario, opts, where, fail):
        return _no_options(scenario, opts, where, fail)

    def layout(self, scenario, T):
        labels = _axis_labels(scenario, self.axis)
        return ((T, len(labels)) if labels else (T,)), labels, self.axis

    def compute(self, scenario, model, trajectory, loops):
        v = getattr(trajectory, self.name)
        return v.reshape(v.shape[0], -1).reshape(-1), jnp.asarray(0)


@dataclasses.dataclass(frozen=True)
class FinalValue(AbstractOutput):
    """A history's value at $t_{end}$, one per panel or wheel (`axis`)."""

    history: str = dataclasses.field(kw_only=True)
    axis: str = dataclasses.field(default="panel", kw_only=True)
    kind: ClassVar[str] = "vector"

    def check(self, scenario, opts, where, fail):
        return _no_options(scenario, opts, where, fail)

    def layout(self, scenario, T):
        labels = _axis_labels(scenario, self.axis)
        return (len(labels),), labels, self.axis

    def compute(self, scenario, model, trajectory, loops):
        return getattr(trajectory, self.history)[-1], jnp.asarray(0)


@dataclasses.dataclass(frozen=True)
class PeakAbs(AbstractOutput):
    """A history's largest $|\\cdot|$ over the saved samples, one per panel or wheel (`axis`)."""

    history: str = dataclasses.field(kw_only=True)
    axis: str = dataclasses.field(default="panel", kw_only=True)
    kind: ClassVar[str] = "vector"

    def check(self, scenario, opts, where, fail):
        return _no_options(scenario, opts, where, fail)

    def layout(self, scenario, T):
        labels = _axis_labels(scenario, self.axis)
        return (len(labels),), labels, self.axis

    def compute(self, scenario, model, trajectory, loops):
        return jnp.max(jnp.abs(getattr(trajectory, self.history)), axis=0), jnp.asarray(0)


@dataclasses.dataclass(frozen=True)
class PeakHubRate(AbstractOutput):
    """$\\max_k \\lVert\\omega_{BN}(t_k)\\rVert$ over the saved samples."""

    kind: ClassVar[str] = "scalar"

    def check(self, scenario, opts, where, fail):
        return _no_options(scenario, opts, where, fail)

    def layout(self, scenario, T):
        return (), (), None

    def compute(self, scenario, model, trajectory, loops):
        return jnp.max(_hub_rate(trajectory))[None], jnp.asarray(0)


@dataclasses.dataclass(frozen=True)
class FinalAttitudeError(AbstractOutput):
    """The principal angle between $\\sigma_{BN}(t_{end})$ and `sigma_R` (default the nominal initial attitude)."""

    kind: ClassVar[str] = "scalar"
    option_keys: ClassVar[tuple[str, ...]] = ("sigma_R",)
    option_text: ClassVar[str] = "`sigma_R`, default the nominal `sigma_BNInit`"

    def check(self, scenario, opts, where, fail):
        if "sigma_R" not in opts:
            return {}
        try:
            s = np.asarray(opts["sigma_R"], dtype=float)
        except (TypeError, ValueError):
            s = np.zeros(0)
        if s.shape != (3,) or not np.all(np.isfinite(s)) or isinstance(opts["sigma_R"], str):
            raise fail(f"{where}.sigma_R = {_fmt(opts['sigma_R'])}: must be 3 finite numbers (an MRP)")
        return {"sigma_R": tuple(float(v) for v in s)}

    def layout(self, scenario, T):
        return (), (), None

    def compute(self, scenario, model, trajectory, loops):
        ref = self.opt("sigma_R")  # default: the nominal initial attitude (a constant)
        sigma0 = scenario.initial.sigma_BNInit
        ref = sigma0 if ref is None else jnp.asarray(ref, dtype=sigma0.dtype)
        return attitude_error(trajectory.sigma_BN[-1], ref)[None], jnp.asarray(0)


SETTLING_SIGNALS = ("theta", "hub_rate", "attitude_error")


@dataclasses.dataclass(frozen=True)
class SettlingTime(AbstractOutput):
    """The interpolated last time a signal is above `threshold` (`settling_time`)."""

    kind: ClassVar[str] = "scalar"
    option_keys: ClassVar[tuple[str, ...]] = ("signal", "threshold")
    option_text: ClassVar[str] = ("`signal` = `theta` (max over panels of \\|theta - thetaRef\\|), `hub_rate` or "
                                  "`attitude_error` (principal angle of `sigma_BR`, with `[control]`); `threshold` > 0")
    statuses: ClassVar[Mapping[int, str]] = {
        1: "the signal never exceeds the threshold; t_s = 0",
        2: "not settled by t_end; t_s = t_end and its derivatives (0) mean nothing",
    }

    def check(self, scenario, opts, where, fail):
        signal = opts.get("signal", "theta")
        if signal == "attitude_error" and scenario.control is None:
            raise fail(f"{where}: signal = \"attitude_error\" needs an attitude controller in the loop ([control] "
                       "in the scenario)")
        if signal not in SETTLING_SIGNALS:
            raise fail(f"{where}.signal = {signal!r}: allowed values are {', '.join(SETTLING_SIGNALS)}")
        if "threshold" not in opts:
            raise fail(f"{where}: settling_time needs a threshold (> 0, rad or rad/s per signal)")
        thr = opts["threshold"]
        number = not isinstance(thr, bool) and isinstance(thr, (int, float))
        if not number or not math.isfinite(thr) or thr <= 0:
            raise fail(f"{where}.threshold = {_fmt(thr)}: must be a finite number > 0")
        return {"signal": signal, "threshold": float(thr)}

    def layout(self, scenario, T):
        return (), (), None

    def compute(self, scenario, model, trajectory, loops):
        if self.opt("signal") == "theta":
            sig = jnp.max(jnp.abs(trajectory.theta - model.spacecraft.panels.thetaRef), axis=1)
        elif self.opt("signal") == "attitude_error":
            sig = jax.vmap(attitude_error, in_axes=(0, None))(trajectory.sigma_BN, model.control.sigma_R0N)
        else:
            sig = _hub_rate(trajectory)
        ts, status = settling_time(trajectory.t, sig, self.opt("threshold"))
        return ts[None], status


@dataclasses.dataclass(frozen=True)
class PointingError(AbstractOutput):
    """The trapezoid over the samples of $\\Phi(t)^2$, $\\Phi$ the principal angle of `sigma_BR`."""

    kind: ClassVar[str] = "scalar"

    def check(self, scenario, opts, where, fail):
        return _no_options(scenario, opts, where, fail)

    def layout(self, scenario, T):
        return (), (), None

    def compute(self, scenario, model, trajectory, loops):
        phi = jax.vmap(attitude_error, in_axes=(0, None))(trajectory.sigma_BN, model.control.sigma_R0N)
        return jnp.sum(0.5 * (phi[1:] ** 2 + phi[:-1] ** 2) * jnp.diff(trajectory.t))[None], jnp.asarray(0)


def _modes_labels(scenario) -> tuple[str, ...]:
    return tuple(f"mode {i + 1}" for i in range(scenario.spacecraft.panels.count))


@dataclasses.dataclass(frozen=True)
class Modal(AbstractOutput):
    """A field of `modes(scenario, boundary)` (`field`), N values in ascending frequency; no simulation."""

    field: str = dataclasses.field(kw_only=True)
    kind: ClassVar[str] = "modal"
    simulated: ClassVar[bool] = False
    option_keys: ClassVar[tuple[str, ...]] = ("boundary",)
    option_text: ClassVar[str] = "`boundary` = `free` (default) or `clamped`"

    def check(self, scenario, opts, where, fail):
        try:  # the name: options are reported as given
            return {"boundary": as_boundary(opts.get("boundary", "free")).name}
        except ValueError as e:
            raise fail(f"{where}.{e}") from None

    def layout(self, scenario, T):
        labels = _modes_labels(scenario)
        return (len(labels),), labels, "mode"

    def compute(self, scenario, model, trajectory, loops):
        return getattr(modes_unjitted(model, self.opt("boundary")), self.field), jnp.asarray(0)


LOOPS = ("sampled", "continuous")


def _check_loop(scenario, opts, where, fail) -> dict[str, Any]:
    loop = opts.get("loop", "sampled")
    if loop not in LOOPS:
        raise fail(f"{where}.loop = {_fmt(loop)}: allowed values are {', '.join(LOOPS)}")
    # the rk4 steps of one control period and the integral term: static (the program's shape), from the nominal
    # values
    steps, integral = loop_shape(scenario)
    return {"loop": loop, "shape": (steps if loop == "sampled" else 0, integral)}


def _closed_loop(model, o: AbstractOutput, loops: dict):
    key = (o.opt("shape"), o.opt("loop"))
    if key not in loops:
        loops[key] = closed_loop_unjitted(model, o.opt("shape"), o.opt("loop") == "sampled")
    return loops[key]


_LOOP_TEXT = "`loop` = `sampled` (default) or `continuous`"


@dataclasses.dataclass(frozen=True)
class ClosedLoopDamping(AbstractOutput):
    """The damping ratio of each flexible mode of the closed loop, N values in ascending frequency."""

    kind: ClassVar[str] = "modal"
    simulated: ClassVar[bool] = False
    option_keys: ClassVar[tuple[str, ...]] = ("loop",)
    option_text: ClassVar[str] = _LOOP_TEXT

    def check(self, scenario, opts, where, fail):
        return _check_loop(scenario, opts, where, fail)

    def layout(self, scenario, T):
        labels = _modes_labels(scenario)
        return (len(labels),), labels, "mode"

    def compute(self, scenario, model, trajectory, loops):
        cl = _closed_loop(model, self, loops)
        n = model.spacecraft.panels.count  # every other pole of the 2N flexible ones, in ascending frequency
        return cl.damping_ratio[jnp.argsort(~cl.flexible, stable=True)[: 2 * n : 2]], jnp.asarray(0)


@dataclasses.dataclass(frozen=True)
class ClosedLoopMargin(AbstractOutput):
    """The smallest damping ratio of the closed loop's flexible modes (`flexible_margin`)."""

    kind: ClassVar[str] = "scalar"
    simulated: ClassVar[bool] = False
    option_keys: ClassVar[tuple[str, ...]] = ("loop",)
    option_text: ClassVar[str] = _LOOP_TEXT

    def check(self, scenario, opts, where, fail):
        return _check_loop(scenario, opts, where, fail)

    def layout(self, scenario, T):
        return (), (), None

    def compute(self, scenario, model, trajectory, loops):
        return _closed_loop(model, self, loops).flexible_margin[None], jnp.asarray(0)


# ------------------------------------------------------------------------------------------------------------
# The declarations: every output a file may name, once
# ------------------------------------------------------------------------------------------------------------

_U = OUTPUT_UNITS
_HISTORY_AXES = {"theta": "panel", "thetaDot": "panel", "Omega": "wheel", "u_current": "wheel",
                 "totOrbEnergy": None, "totRotEnergy": None}
_HISTORY_NEEDS = {"Omega": ("wheels",), "u_current": ("wheels",), "sigma_BR": ("control",),
                  "omega_BR_B": ("control",), "Lr": ("control",)}

DECLARED: tuple[AbstractOutput, ...] = (
    PeakHubRate("peak_hub_rate", "rad/s", "max over the samples of the hub rate norm; differentiated at the sample "
                "that attains it"),
    FinalAttitudeError("final_attitude_error", "rad", "principal angle between `sigma_BN(t_end)` and `sigma_R`, "
                       "from the MRP difference; smooth on (0, pi)"),
    SettlingTime("settling_time", "s", "last time the signal is above the threshold, interpolated linearly between "
                 "samples"),
    PointingError("pointing_error", "rad^2 s", "the integrated squared attitude error, trapezoid of Phi(t)^2 over "
                  "the samples, Phi = principal angle of `sigma_BR`", requires=("control",)),
    FinalValue("final_theta", _U["theta"], "hinge angle at t_end, one per panel", history="theta"),
    PeakAbs("peak_abs_theta", _U["theta"], "peak \\|theta\\| over the samples, one per panel", history="theta"),
    FinalValue("final_Omega", _U["Omega"], "wheel speed at t_end, one per wheel", history="Omega", axis="wheel",
               requires=("wheels",)),
    PeakAbs("peak_abs_Omega", _U["Omega"], "peak \\|Omega\\| over the samples, one per wheel", history="Omega",
            axis="wheel", requires=("wheels",)),
    Modal("modal_frequencies", "Hz", "`jh.modes(...)`: N frequencies, rows `mode 1..N` in ascending frequency; no "
          "simulation", field="frequency_hz"),
    Modal("damping_ratios", "1", "`jh.modes(...)`: N damping ratios, rows `mode 1..N` in ascending frequency; no "
          "simulation", field="damping_ratio"),
    ClosedLoopDamping("closed_loop_damping", "1", "`jh.closed_loop_poles(...)`: the damping ratio of each flexible "
                      "mode of the closed loop, rows `mode 1..N` in ascending frequency; no simulation",
                      requires=("control",)),
    ClosedLoopMargin("closed_loop_margin", "1", "the smallest damping ratio of the closed loop's flexible modes "
                     "(`flexible_margin`): what \"every flexible mode damped by at least 2 %\" is written on",
                     requires=("control",)),
    # -- the time histories
    *(History(n, _U[n], "the whole time history (T x components)", axis=_HISTORY_AXES.get(n, "component"),
              requires=_HISTORY_NEEDS.get(n, ())) for n in OUTPUT_NAMES if n != "t"),
)

OUTPUTS: dict[str, AbstractOutput] = {o.name: o for o in DECLARED}


def _requirement_error(o: AbstractOutput, scenario, where: str) -> str | None:
    """What the scenario lacks for the output `o`, in words, or None."""
    if "control" in o.requires and scenario.control is None:
        return f"{where}: {o.name} needs an attitude controller in the loop ([control] in the scenario)"
    if "wheels" in o.requires and scenario.spacecraft.wheels is None:
        return f"{where} = {o.name!r}: the spacecraft has no [[wheels]]"
    return None


def declared_output(scenario, name: str, opts: Mapping[str, Any], where: str, fail: Fail) -> AbstractOutput:
    """The declaration of `OUTPUTS` named `name` with its options `opts` checked against `scenario` (what the
    scenario lacks, unknown keys, the values), or `fail(message)` raised."""
    if not isinstance(name, str) or name not in OUTPUTS:
        metrics = [n for n, o in OUTPUTS.items() if o.kind != "history"]
        histories = [n for n, o in OUTPUTS.items() if o.kind == "history"]
        raise fail(f"{where} = {name!r}: unknown output{did_you_mean(str(name), tuple(OUTPUTS))}; allowed: "
                   f"{', '.join(metrics)}, or a time history: {', '.join(histories)}")
    o = OUTPUTS[name]
    lacks = _requirement_error(o, scenario, where)
    if lacks is not None:
        raise fail(lacks)
    allowed = o.option_keys
    for key in opts:
        if key not in allowed:
            hint = f"allowed keys are name, {', '.join(allowed)}" if allowed else f"{name} takes no options"
            raise fail(f"{where}: unknown key {key!r} for {name}{did_you_mean(key, allowed)}; {hint}")
    return o.with_options(o.check(scenario, opts, where, fail))


_NEEDS_TEXT = {"control": "needs `[control]`", "wheels": "needs `[[wheels]]`"}


def markdown_table(table: Mapping[str, AbstractOutput] | None = None) -> str:
    """The outputs table of docs/sweeps-and-sensitivities.md, from the declarations (the histories in one row)."""
    table = OUTPUTS if table is None else table
    rows = ["| output | options | value | unit |", "|---|---|---|---|"]
    for o in table.values():
        if o.kind == "history":
            continue
        needs = ", ".join(_NEEDS_TEXT[r] for r in o.requires)
        opts = "; ".join(s for s in (needs, o.option_text) if s)
        rows.append(f"| `{o.name}` | {opts} | {o.description} | {o.unit} |")
    histories = [o for o in table.values() if o.kind == "history"]
    if histories:
        rows.append(f"| {', '.join(f'`{o.name}`' for o in histories)} | | {histories[0].description} | the "
                    "output's |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
