r"""Sensitivity studies: Jacobians of chosen outputs of a simulation with respect to chosen parameters.

`sensitivity(scenario, outputs, parameters)` differentiates, through the whole integration, every requested
output $y$ with respect to every requested parameter $p$ and returns the absolute Jacobian $\partial y/\partial p$
and the normalised one (elasticity) $\partial \ln y / \partial \ln p = (p/y)\,\partial y/\partial p$: the percent
change of $y$ per percent change of $p$, which makes parameters of different units comparable (tornado plot).

**Parameters** are named by the parameter registry (`jaxhinge._model._params`), as everywhere:
`"<panel name>.<field>"` and `"hub.<field>"` (the hub's initial conditions included, as in the scenario file).
Vector and matrix fields are differentiated **per component**, 1-based: `"hub.omega_BN_BInit[3]"` is the
initial hub rate about $\hat b_3$, the bare name its three components. As in the dispersions, an inertia
(`IPntS_S`, `hub.IHubPntBc_B`) is 3 scale factors $s$ of nominal value 1 ($I' = DID$,
$D = \mathrm{diag}(\sqrt s)$, so $\partial\ln y/\partial\ln s_i = \partial y/\partial s_i / y$) and a hinge
orientation `dcm_HB` a small rotation vector $\phi$ [rad] of nominal value 0, in the hinge frame. Default
parameters: every panel's `k` and `c`.

**Outputs** (each a function of one simulated trajectory or of the linear modes; a string, or a table with
`name` and options):

| name | value | unit |
|---|---|---|
| any `Trajectory` output (`"theta"`, `"omega_BN_B"`, `"sigma_BN"`, `"r_BN_N"`, `"totRotEnergy"`, ...) | the whole time history, shape (T, components) | the output's |
| `"peak_hub_rate"` | $\max_k \lVert\omega_{BN}(t_k)\rVert$ over the saved samples | rad/s |
| `"final_attitude_error"` | principal rotation angle between $\sigma_{BN}(t_{end})$ and a reference `sigma_R` | rad |
| `"settling_time"` | last time the signal is above `threshold`, interpolated between samples | s |
| `"final_theta"`, `"peak_abs_theta"` | $\theta_i(t_{end})$, $\max_k \lvert\theta_i(t_k)\rvert$, one per panel | rad |
| `"final_Omega"`, `"peak_abs_Omega"` | the same of the wheel speeds $\Omega_j$, one per wheel | rad/s |
| `"modal_frequencies"` | `modes(scenario, boundary).frequency_hz`, N values | Hz |
| `"damping_ratios"` | `modes(scenario, boundary).damping_ratio`, N values | 1 |

- `peak_hub_rate`: an exact maximum over the samples; its derivative is that of the rate at the sample that
  attains the maximum (exact unless two samples tie; the peak *between* samples is not interpolated).
- `final_attitude_error` (option `sigma_R`, an MRP, default the scenario's nominal `sigma_BNInit`, a constant):
  $\Phi = 4\arctan\lVert\sigma_{B/R}\rVert \in [0, \pi]$ with $\sigma_{B/R}$ = `sub_mrp(sigma_BN, sigma_R)` (the
  MRP difference, Basilisk's `subMRP`, in the inner set), smooth for every $0 < \Phi < \pi$ (also near the MRP
  switching surface). At exactly $\Phi = 0$ the angle has no derivative; 0 is reported there.
- `settling_time` (options `signal` = `"theta"` (default: $\max_i |\theta_i - \theta_{ref,i}|$ [rad]) or
  `"hub_rate"` ($\lVert\omega_{BN}\rVert$ [rad/s]), and `threshold` > 0 in the signal's unit): with $k$ the last
  sample where the signal $s$ exceeds the threshold, $t_s = t_k + (s_k - s_{thr})/(s_k - s_{k+1})\,(t_{k+1}-t_k)$,
  the linearly interpolated last crossing. Its derivative is $-(\partial s/\partial p)/(\mathrm{d}s/\mathrm{d}t)$
  at the crossing, with both taken from the same interpolation. A signal that never exceeds the threshold
  gives $t_s = 0$; one still above it at $t_{end}$ gives $t_s = t_{end}$ ("not settled": a note is added
  and its derivatives, which are zero, mean nothing).
- `modal_frequencies`, `damping_ratios` (option `boundary` = `"free"` (default) or `"clamped"`): see `modes`;
  no simulation is run for them. Rows are labelled `mode 1..N` in ascending frequency.

**Normalisation.** $\partial\ln y/\partial\ln p = (p/y)\,\partial y/\partial p$ is *undefined* where $y = 0$
(e.g. the undamped damping ratio, a time-history sample at a zero crossing; more precisely where
$|y| \le 10^{-12}\max|y|$ over that output) or $p = 0$ (e.g. $c = 0$, a rotation $\phi = 0$, a zero initial
rate): there `normalized` holds 0 and `normalized_defined` is False (JSON `null`, an empty CSV cell). Never NaN.

**Mode.** `"forward"`: `jax.jacfwd` with `diffrax.ForwardMode()` (one tangent per parameter); `"reverse"`:
`jax.jacrev` with diffrax's default `RecursiveCheckpointAdjoint` (one cotangent per output row); `"auto"`
(default) picks forward when #parameters <= #output rows, else reverse. Both differentiate the same discrete
solution (an rk4 run exactly; adaptive runs through the step-size controller as diffrax does), so they agree
to rounding; with the fixed-step `rk4` integrator the result equals central finite differences of the
simulator to their truncation error.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._errors import ParameterError, SensitivityError
from ..._format import did_you_mean as _did_you_mean
from ..._format import fmt_value as _fmt
from ..._math import safe_sqrt, sub_mrp
from ..._model._boundary import as_boundary
from ..._model._params import Parameter, anonymous, apply_resolved, expand, nominal
from ..._model._scenario import Scenario, compile_key
from ..._runtime._programs import program
from ..._simulation._memory import check_memory, save_times
from ..._simulation._simulate import simulate_unjitted
from ..._simulation._trajectory import OUTPUT_NAMES, OUTPUT_UNITS
from .._linear._closed_loop import closed_loop_unjitted, loop_shape
from .._linear._modes import modes_unjitted

MODES = ("auto", "forward", "reverse")
SCALAR_OUTPUTS = ("peak_hub_rate", "final_attitude_error", "settling_time", "pointing_error")
# one value per panel or per wheel, from the simulated histories
VECTOR_OUTPUTS = {"final_theta": ("theta", "final"), "peak_abs_theta": ("theta", "peak"),
                  "final_Omega": ("Omega", "final"), "peak_abs_Omega": ("Omega", "peak")}
CLOSED_LOOP_OUTPUTS = ("closed_loop_damping", "closed_loop_margin")
MODAL_OUTPUTS = ("modal_frequencies", "damping_ratios", *CLOSED_LOOP_OUTPUTS)  # no simulation
HISTORY_OUTPUTS = tuple(n for n in OUTPUT_NAMES if n != "t")
OUTPUTS = SCALAR_OUTPUTS + tuple(VECTOR_OUTPUTS) + MODAL_OUTPUTS + HISTORY_OUTPUTS
SETTLING_SIGNALS = ("theta", "hub_rate", "attitude_error")
_CONTROLLED = ("pointing_error", *CLOSED_LOOP_OUTPUTS, "sigma_BR", "omega_BR_B", "Lr")  # need [control]
_OPTIONS = {
    "final_attitude_error": ("sigma_R",),
    "settling_time": ("signal", "threshold"),
    "modal_frequencies": ("boundary",),
    "damping_ratios": ("boundary",),
    "closed_loop_damping": ("loop",),
    "closed_loop_margin": ("loop",),
}
LOOPS = ("sampled", "continuous")
_UNDEFINED_RTOL = 1e-12


def _fail(source: str, msg: str) -> SensitivityError:
    return SensitivityError(f"{source}: {msg}", source=source)


# ------------------------------------------------------------------------------------------------------------
# Parsing (host side, before any tracing)
# ------------------------------------------------------------------------------------------------------------


def parse_parameters(
    scenario: Scenario, parameters: Sequence[str] | None, source: str = "<sensitivity>"
) -> tuple[Parameter, ...]:
    """Validate and expand parameter names (module docstring; the parameter registry) into one entry per
    differentiated scalar.

    **Raises:** `SensitivityError` naming the bad name, with the closest valid name when there is one.
    """
    if parameters is None:
        parameters = [f"{p}.{f}" for f in ("k", "c") for p in scenario.spacecraft.panels.labels]
    if isinstance(parameters, str) or not isinstance(parameters, Sequence):
        raise _fail(source, f'parameters = {parameters!r}: must be a list of names such as "p0.k"')
    if len(parameters) == 0:
        raise _fail(source, "parameters = []: give at least one parameter")
    out: list[Parameter] = []
    for j, raw in enumerate(parameters):
        try:
            out += expand(scenario, raw)
        except ParameterError as e:
            raise _fail(source, f"parameters[{j}] = {e}") from None
        if out[-1].base == "inputs.time_offset" and scenario.loads.inputs.hold == "zoh":
            raise _fail(source, f"parameters[{j}] = {raw!r}: the recorded inputs are held (hold = \"zoh\"): their "
                        "derivative with respect to a time shift is zero between samples and undefined at them; "
                        "give them hold = \"linear\"")
    names = [p.name for p in out]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _fail(source, f"parameter {name!r} is listed twice")
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class _Output:
    name: str
    options: tuple[tuple[str, Any], ...] = ()  # sorted, hashable (static under jit)

    def opt(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


def parse_outputs(
    scenario: Scenario, outputs: Sequence[Any], source: str = "<sensitivity>"
) -> tuple[_Output, ...]:
    """Validate output specs (module docstring): names, options and option values.

    **Raises:** `SensitivityError` naming the bad entry, with the closest valid name when there is one.
    """
    if isinstance(outputs, (str, Mapping)):
        outputs = [outputs]
    if not isinstance(outputs, Sequence) or len(outputs) == 0:
        raise _fail(source, f"outputs = {outputs!r}: must be a non-empty list of output names or tables")
    out: list[_Output] = []
    for j, spec in enumerate(outputs):
        where = f"outputs[{j}]"
        if isinstance(spec, str):
            name, opts = spec, {}
        elif isinstance(spec, Mapping):
            if "name" not in spec:
                raise _fail(source, f"{where}: missing key 'name' (e.g. name = \"settling_time\")")
            name, opts = spec["name"], {k: v for k, v in spec.items() if k != "name"}
        else:
            raise _fail(source, f"{where} = {spec!r}: must be an output name or a table with key 'name'")
        if not isinstance(name, str) or name not in OUTPUTS:
            raise _fail(source, f"{where} = {name!r}: unknown output{_did_you_mean(str(name), OUTPUTS)}; "
                        f"allowed: {', '.join(SCALAR_OUTPUTS + tuple(VECTOR_OUTPUTS) + MODAL_OUTPUTS)}, or a time "
                        "history: "
                        f"{', '.join(HISTORY_OUTPUTS)}")
        by_signal = name == "settling_time" and opts.get("signal") == "attitude_error"
        if (name in _CONTROLLED or by_signal) and scenario.control is None:
            what = "signal = \"attitude_error\"" if by_signal else name
            raise _fail(source, f"{where}: {what} needs an attitude controller in the loop ([control] in the "
                        "scenario)")
        if (name in ("Omega", "u_current") or VECTOR_OUTPUTS.get(name, ("",))[0] == "Omega") and \
                scenario.spacecraft.wheels is None:
            raise _fail(source, f"{where} = {name!r}: the spacecraft has no [[wheels]]")
        allowed = _OPTIONS.get(name, ())
        for key in opts:
            if key not in allowed:
                hint = (
                    f"allowed keys are name, {', '.join(allowed)}" if allowed else f"{name} takes no options"
                )
                raise _fail(source, f"{where}: unknown key {key!r} for {name}{_did_you_mean(key, allowed)}; "
                            f"{hint}")
        clean: dict[str, Any] = {}
        if name == "settling_time":
            signal = opts.get("signal", "theta")
            if signal not in SETTLING_SIGNALS:
                raise _fail(source, f"{where}.signal = {signal!r}: allowed values are "
                            f"{', '.join(SETTLING_SIGNALS)}")
            if "threshold" not in opts:
                raise _fail(source, f"{where}: settling_time needs a threshold (> 0, rad or rad/s per "
                            "signal)")
            thr = opts["threshold"]
            number = not isinstance(thr, bool) and isinstance(thr, (int, float))
            if not number or not math.isfinite(thr) or thr <= 0:
                raise _fail(source, f"{where}.threshold = {_fmt(thr)}: must be a finite number > 0")
            clean = {"signal": signal, "threshold": float(thr)}
        elif name == "final_attitude_error":
            if "sigma_R" in opts:
                try:
                    s = np.asarray(opts["sigma_R"], dtype=float)
                except (TypeError, ValueError):
                    s = np.zeros(0)
                if s.shape != (3,) or not np.all(np.isfinite(s)) or isinstance(opts["sigma_R"], str):
                    raise _fail(source, f"{where}.sigma_R = {_fmt(opts['sigma_R'])}: must be 3 finite numbers "
                                "(an MRP)")
                clean = {"sigma_R": tuple(float(v) for v in s)}
        elif name in CLOSED_LOOP_OUTPUTS:
            loop = opts.get("loop", "sampled")
            if loop not in LOOPS:
                raise _fail(source, f"{where}.loop = {_fmt(loop)}: allowed values are {', '.join(LOOPS)}")
            # the rk4 steps of one control period and the integral term: static (the program's shape), from
            # the nominal values
            steps, integral = loop_shape(scenario)
            clean = {"loop": loop, "shape": (steps if loop == "sampled" else 0, integral)}
        elif name in MODAL_OUTPUTS:
            boundary = opts.get("boundary", "free")
            try:
                clean = {"boundary": as_boundary(boundary).name}  # the name: options are reported as given
            except ValueError as e:
                raise _fail(source, f"{where}.{e}") from None
        o = _Output(name, tuple(sorted(clean.items())))
        if o in out:
            raise _fail(source, f"{where} = {spec!r}: listed twice")
        out.append(o)
    return tuple(out)


# ------------------------------------------------------------------------------------------------------------
# The differentiated function
# ------------------------------------------------------------------------------------------------------------


def attitude_error(sigma_BN: Float[Array, "3"], sigma_RN: Float[Array, "3"]) -> Float[Array, ""]:
    """Principal rotation angle $\\Phi \\in [0, \\pi]$ [rad] between the attitudes $\\sigma_{BN}$ and $\\sigma_{RN}$
    (MRPs), through the MRP difference `sub_mrp` (module docstring); smooth for $0 < \\Phi < \\pi$, 0 derivative at 0."""
    q = sub_mrp(sigma_BN, sigma_RN)
    return 4.0 * jnp.arctan(safe_sqrt(jnp.dot(q, q)))


def settling_time(
    t: Float[Array, " T"], signal: Float[Array, " T"], threshold: float
) -> tuple[Float[Array, ""], Any]:
    """Interpolated last time `signal` (>= 0) is above `threshold` (module docstring) and a status code:
    0 settled, 1 never above the threshold ($t_s = 0$), 2 still above at the end ($t_s = t_{end}$)."""
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


def _evaluate(scenario, x, params, outputs, adjoint):
    """x (P,) -> (y (M,), (y, status, ok)) for `jax.jacfwd/jacrev(..., has_aux=True)`."""
    scn = apply_resolved(scenario, params, [x[j] for j in range(len(params))])
    traj = simulate_unjitted(scn, adjoint) if needs_simulation(outputs) else None
    y, status = output_values(scenario, scn, traj, outputs)
    ok = traj.success if traj is not None else jnp.asarray(True)
    return y, (y, status, ok)


def needs_simulation(outputs) -> bool:
    """Whether any of the outputs is read from a simulated trajectory (the modal ones are not)."""
    return any(o.name not in MODAL_OUTPUTS for o in outputs)


def output_values(scenario, scn, traj, outputs):
    """The outputs of the model `scn` (the nominal `scenario` with its parameters applied) and its trajectory
    `traj` (None when `needs_simulation` is False), concatenated in `output_blocks`' order, and one status code
    per output (`settling_time`'s; 0 for the others)."""
    ys, status, loops = [], [], {}  # `loops`: each closed loop linearised once, whichever outputs read it
    for o in outputs:
        st = jnp.asarray(0)
        if o.name in HISTORY_OUTPUTS:
            v = getattr(traj, o.name)
            y = v.reshape(v.shape[0], -1).reshape(-1)
        elif o.name in VECTOR_OUTPUTS:
            history, which = VECTOR_OUTPUTS[o.name]
            v = getattr(traj, history)
            y = v[-1] if which == "final" else jnp.max(jnp.abs(v), axis=0)
        elif o.name == "peak_hub_rate":
            y = jnp.max(safe_sqrt(jnp.sum(traj.omega_BN_B * traj.omega_BN_B, axis=-1)))[None]
        elif o.name == "final_attitude_error":
            ref = o.opt("sigma_R")  # default: the nominal initial attitude (a constant)
            sigma0 = scenario.initial.sigma_BNInit
            ref = sigma0 if ref is None else jnp.asarray(ref, dtype=sigma0.dtype)
            y = attitude_error(traj.sigma_BN[-1], ref)[None]
        elif o.name == "settling_time":
            if o.opt("signal") == "theta":
                sig = jnp.max(jnp.abs(traj.theta - scn.spacecraft.panels.thetaRef), axis=1)
            elif o.opt("signal") == "attitude_error":
                sig = jax.vmap(attitude_error, in_axes=(0, None))(traj.sigma_BN, scn.control.sigma_R0N)
            else:
                sig = safe_sqrt(jnp.sum(traj.omega_BN_B * traj.omega_BN_B, axis=-1))
            ts, st = settling_time(traj.t, sig, o.opt("threshold"))
            y = ts[None]
        elif o.name == "pointing_error":
            phi = jax.vmap(attitude_error, in_axes=(0, None))(traj.sigma_BN, scn.control.sigma_R0N)
            y = jnp.sum(0.5 * (phi[1:] ** 2 + phi[:-1] ** 2) * jnp.diff(traj.t))[None]
        elif o.name in CLOSED_LOOP_OUTPUTS:
            key = (o.opt("shape"), o.opt("loop"))
            if key not in loops:
                loops[key] = closed_loop_unjitted(scn, o.opt("shape"), o.opt("loop") == "sampled")
            cl = loops[key]
            if o.name == "closed_loop_margin":
                y = cl.flexible_margin[None]
            else:  # one value per flexible mode (every other pole of the 2N, in ascending frequency)
                n = scn.spacecraft.panels.count
                y = cl.damping_ratio[jnp.argsort(~cl.flexible, stable=True)[: 2 * n : 2]]
        else:
            m = modes_unjitted(scn, o.opt("boundary"))
            y = m.frequency_hz if o.name == "modal_frequencies" else m.damping_ratio
        ys.append(y)
        status.append(st)
    return jnp.concatenate(ys), jnp.stack(status)


@program
def _jacobian(scenario, x, params, outputs, mode):
    """`(J, (y, status, ok))` for one group of outputs (all simulated, or all modal: separate programs, each
    compiled and cached for its own structure)."""
    jac, adjoint = (jax.jacfwd, diffrax.ForwardMode()) if mode == "forward" else (jax.jacrev, None)
    return jac(lambda x: _evaluate(scenario, x, params, outputs, adjoint), has_aux=True)(x)


# ------------------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OutputBlock:
    """Where one requested output sits among the Jacobian rows: rows `start:stop`, reshaped to `shape`
    ((T, components) for a time history, (N,) for modal outputs, () for scalars); `labels` name the components
    (panel names, `[0]..[2]`, `mode 1..N`); `unit` of the output; `options` as given (validated)."""

    name: str
    kind: str  # "history" | "scalar" | "vector" (per panel or wheel) | "modal"
    start: int
    stop: int
    shape: tuple[int, ...]
    labels: tuple[str, ...]
    unit: str
    options: dict


@dataclasses.dataclass(frozen=True)
class SensitivityResult:
    """What `sensitivity` returns (NumPy arrays; M output rows, P parameters).

    - `parameter_names`, `parameter_units` (P,); `parameter_values` (P,): the nominal values $p$.
    - `output_names` (M,): one per row, e.g. `"peak_hub_rate"`, `"modal_frequencies[mode 1]"`,
      `"theta[p0] @ t=0.5"`; `output_values` (M,): $y$ at the nominal parameters.
    - `jacobian` (M, P): $\\partial y/\\partial p$ [output unit / parameter unit].
    - `normalized` (M, P): $\\partial\\ln y/\\partial\\ln p$ (dimensionless), 0 where `normalized_defined` is False
      ($y = 0$ or $p = 0$, module docstring).
    - `blocks`: one `OutputBlock` per requested output; `t` (T,) the save times [s] (None without histories).
    - `mode`: `"forward"` or `"reverse"` (what ran); `success`: the simulation succeeded (always True for
      modal-only studies); `notes`: caveats (unsettled signals, undefined normalisations).
    """

    parameter_names: tuple[str, ...]
    parameter_units: tuple[str, ...]
    parameter_values: np.ndarray
    output_names: tuple[str, ...]
    output_units: tuple[str, ...]
    output_values: np.ndarray
    jacobian: np.ndarray
    normalized: np.ndarray
    normalized_defined: np.ndarray
    blocks: tuple[OutputBlock, ...]
    t: np.ndarray | None
    mode: str
    success: bool
    notes: tuple[str, ...]

    def block(self, name: str) -> OutputBlock:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"{name!r}: not among the outputs ({', '.join(b.name for b in self.blocks)})")

    def output(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`(values, jacobian, normalized)` of one requested output, shaped `shape`, `shape + (P,)`, `shape + (P,)`."""
        b = self.block(name)
        rows, P = slice(b.start, b.stop), len(self.parameter_names)
        return (self.output_values[rows].reshape(b.shape), self.jacobian[rows].reshape(*b.shape, P),
                self.normalized[rows].reshape(*b.shape, P))

    def row(self, output: str) -> int:
        """The row index of a scalar output row name (e.g. `"peak_hub_rate"`, `"modal_frequencies[mode 2]"`)."""
        try:
            return self.output_names.index(output)
        except ValueError:
            scalars = [n for n in self.output_names if " @ t=" not in n]
            raise KeyError(f"{output!r}: not an output row{_did_you_mean(output, scalars)}") from None

    def ranking(self, output: str) -> list[tuple[str, float | None]]:
        """Parameters ranked by $|\\partial\\ln y/\\partial\\ln p|$ for one output row, largest first; the
        undefined ones (value None) last, in parameter order."""
        r = self.row(output)
        values = [(n, float(self.normalized[r, j]) if self.normalized_defined[r, j] else None)
                  for j, n in enumerate(self.parameter_names)]
        defined = [(n, v) for n, v in values if v is not None]
        return sorted(defined, key=lambda nv: -abs(nv[1])) + [(n, v) for n, v in values if v is None]

    def scalar_rows(self) -> list[str]:
        """The row names of the scalar and modal outputs (not time histories): what a tornado plot can show."""
        return [n for b in self.blocks if b.kind != "history" for n in self.output_names[b.start : b.stop]]


# ------------------------------------------------------------------------------------------------------------
# Entry point
# ------------------------------------------------------------------------------------------------------------


def output_blocks(scenario: Scenario, outputs: tuple[_Output, ...]) -> tuple[OutputBlock, ...]:
    T = len(save_times(scenario.simulation))
    panels = scenario.spacecraft.panels.labels
    N = len(panels)
    out, start = [], 0
    for o in outputs:
        if o.name in HISTORY_OUTPUTS:
            energy = o.name in ("totOrbEnergy", "totRotEnergy")
            wheels = () if scenario.spacecraft.wheels is None else scenario.spacecraft.wheels.labels
            labels = (panels if o.name in ("theta", "thetaDot") else wheels if o.name in ("Omega", "u_current")
                      else () if energy else ("0", "1", "2"))
            shape = (T, len(labels)) if labels else (T,)
            kind, unit = "history", OUTPUT_UNITS[o.name]
        elif o.name in VECTOR_OUTPUTS:
            history = VECTOR_OUTPUTS[o.name][0]
            wheels = () if scenario.spacecraft.wheels is None else scenario.spacecraft.wheels.labels
            labels = panels if history == "theta" else wheels
            shape, kind, unit = (len(labels),), "vector", OUTPUT_UNITS[history]
        elif o.name in MODAL_OUTPUTS and o.name != "closed_loop_margin":
            labels, shape, kind = tuple(f"mode {i + 1}" for i in range(N)), (N,), "modal"
            unit = "Hz" if o.name == "modal_frequencies" else "1"
        else:
            labels, shape, kind = (), (), "scalar"
            unit = {"peak_hub_rate": "rad/s", "final_attitude_error": "rad", "settling_time": "s",
                    "pointing_error": "rad^2 s", "closed_loop_margin": "1"}[o.name]
        size = int(np.prod(shape))
        out.append(OutputBlock(o.name, kind, start, start + size, shape, labels, unit, dict(o.options)))
        start += size
    return tuple(out)


def row_names(blocks: Sequence[OutputBlock], t: np.ndarray | None) -> list[str]:
    names = []
    for b in blocks:
        if b.kind == "scalar":
            names.append(b.name)
        elif b.kind in ("modal", "vector"):
            names += [f"{b.name}[{lab}]" for lab in b.labels]
        else:
            assert t is not None
            comps = [f"[{lab}]" for lab in b.labels] if b.labels else [""]
            names += [f"{b.name}{c} @ t={tk:g}" for tk in t for c in comps]
    return names


def sensitivity(
    scenario: Scenario,
    outputs: Sequence[Any] = ("peak_hub_rate",),
    parameters: Sequence[str] | None = None,
    *,
    mode: str = "auto",
) -> SensitivityResult:
    """Jacobians of chosen outputs with respect to chosen parameters, absolute and normalised.

    **Arguments:**

    - `scenario`: the nominal `Scenario`. Use the fixed-step `rk4` integrator for derivatives that equal finite
      differences of the simulator (an adaptive solve is differentiated through its step-size control).
    - `outputs`: output names or tables `{"name": ..., options}` (module docstring's table).
    - `parameters`: names such as `"p0.k"`, `"hub.mHub"`, `"hub.omega_BN_BInit[2]"`; default every panel's `k`
      and `c`.
    - `mode`: `"auto"` (forward when #parameters <= #output rows, else reverse), `"forward"` or `"reverse"`.

    **Returns:** a `SensitivityResult`.

    **Raises:** `SensitivityError` (a `ValueError`) for unknown names, bad options or a bad mode, before any
    compilation. A failed simulation does not raise: `success` is False and a note says so.

    Compiled once per (model structure, outputs, parameter names, mode); the parameter and scenario values are
    traced, so the same study at other nominal values reuses the compiled program.
    """
    if mode not in MODES:
        raise _fail("<sensitivity>", f"mode = {mode!r}: allowed values are {', '.join(MODES)}")
    if not isinstance(scenario, Scenario):
        raise TypeError(f"sensitivity: expected a jaxhinge Scenario, got {type(scenario).__name__}")
    params = parse_parameters(scenario, parameters)
    outs = parse_outputs(scenario, outputs)
    check_memory(scenario.simulation, scenario.spacecraft.panels.count, len(params) + 1)  # a tangent per parameter
    x0 = np.array([float(nominal(scenario, p)) for p in params])
    blocks = output_blocks(scenario, outs)
    M, P = blocks[-1].stop, len(params)
    used = mode if mode != "auto" else ("forward" if P <= M else "reverse")
    J, y = np.zeros((M, P)), np.zeros(M)
    status, ok = np.zeros(len(outs), dtype=int), True
    for modal in (False, True):
        group = [i for i, o in enumerate(outs) if (o.name in MODAL_OUTPUTS) == modal]
        if not group:
            continue
        Jg, (yg, stg, okg) = _jacobian(compile_key(scenario), jnp.asarray(x0), anonymous(params),
                                       tuple(outs[i] for i in group), used)
        rows = np.concatenate([np.arange(blocks[i].start, blocks[i].stop) for i in group])  # the group's rows
        J[rows], y[rows], status[group] = np.asarray(Jg), np.asarray(yg), np.asarray(stg)
        ok = ok and bool(okg)
    t = save_times(scenario.simulation) if any(b.kind == "history" for b in blocks) else None
    names = row_names(blocks, t)
    row_blocks = [b for b in blocks for _ in range(b.stop - b.start)]
    notes = []
    if not ok:
        notes.append("the simulation failed (see simulate(...).result): the values and Jacobians are not "
                     "valid")
    # |y| small relative to its output's largest |y| counts as zero
    scale = np.concatenate([np.full(b.stop - b.start, np.max(np.abs(y[b.start : b.stop]), initial=0.0))
                            for b in blocks])
    y_zero = np.abs(y) <= _UNDEFINED_RTOL * scale
    defined = (~y_zero)[:, None] & (x0 != 0)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        N = np.where(defined, J * x0[None, :] / np.where(y_zero, 1.0, y)[:, None], 0.0)
    unsettled = {1: "the signal never exceeds the threshold; t_s = 0",
                 2: "not settled by t_end; t_s = t_end and its derivatives (0) mean nothing"}
    notes += [f"settling_time ({b.options}): {unsettled[st]}" for b, st in zip(blocks, status) if st]
    zp = [p.name for p, v in zip(params, x0) if v == 0]
    if zp:
        notes.append(f"normalised sensitivities undefined for parameters at 0: {', '.join(zp)}")
    zy = [names[r] for r, b in enumerate(row_blocks) if y_zero[r] and b.kind != "history"]
    if zy:
        notes.append(f"normalised sensitivities undefined for outputs at 0: {', '.join(zy)}")
    return SensitivityResult(
        parameter_names=tuple(p.name for p in params), parameter_units=tuple(p.unit for p in params),
        parameter_values=x0, output_names=tuple(names), output_units=tuple(b.unit for b in row_blocks),
        output_values=y, jacobian=J, normalized=N, normalized_defined=defined, blocks=blocks, t=t, mode=used,
        success=ok, notes=tuple(notes),
    )
