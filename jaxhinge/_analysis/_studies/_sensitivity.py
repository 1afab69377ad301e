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
`name` and options) are the declarations of `_outputs` (`OUTPUTS`: name, options, unit, shape, value; their table,
`_outputs.markdown_table()`, is docs/sweeps-and-sensitivities.md's). How some are differentiated:

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
from collections.abc import Mapping, Sequence
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from ..._errors import ParameterError, SensitivityError
from ..._format import did_you_mean as _did_you_mean
from ..._model._params import Parameter, anonymous, apply_resolved, expand, nominal
from ..._model._scenario import Scenario, compile_key
from ..._runtime._programs import program
from ..._simulation._memory import check_memory, save_times
from ..._simulation._simulate import simulate_unjitted
from ._outputs import AbstractOutput, declared_output

MODES = ("auto", "forward", "reverse")
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


def parse_outputs(
    scenario: Scenario, outputs: Sequence[Any], source: str = "<sensitivity>"
) -> tuple[AbstractOutput, ...]:
    """Validate output specs (module docstring): names, options and option values, each into its declaration
    (`_outputs.OUTPUTS`) with its checked options.

    **Raises:** `SensitivityError` naming the bad entry, with the closest valid name when there is one.
    """
    if isinstance(outputs, (str, Mapping)):
        outputs = [outputs]
    if not isinstance(outputs, Sequence) or len(outputs) == 0:
        raise _fail(source, f"outputs = {outputs!r}: must be a non-empty list of output names or tables")
    out: list[AbstractOutput] = []
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
        o = declared_output(scenario, name, opts, where, lambda msg: _fail(source, msg))
        if o in out:
            raise _fail(source, f"{where} = {spec!r}: listed twice")
        out.append(o)
    return tuple(out)


# ------------------------------------------------------------------------------------------------------------
# The differentiated function
# ------------------------------------------------------------------------------------------------------------


def _evaluate(scenario, x, params, outputs, adjoint):
    """x (P,) -> (y (M,), (y, status, ok)) for `jax.jacfwd/jacrev(..., has_aux=True)`."""
    scn = apply_resolved(scenario, params, [x[j] for j in range(len(params))])
    traj = simulate_unjitted(scn, adjoint) if needs_simulation(outputs) else None
    y, status = output_values(scenario, scn, traj, outputs)
    ok = traj.success if traj is not None else jnp.asarray(True)
    return y, (y, status, ok)


def needs_simulation(outputs) -> bool:
    """Whether any of the outputs is read from a simulated trajectory (the modal ones are not)."""
    return any(o.simulated for o in outputs)


def output_values(scenario, scn, traj, outputs):
    """The outputs of the model `scn` (the nominal `scenario` with its parameters applied) and its trajectory
    `traj` (None when `needs_simulation` is False), concatenated in `output_blocks`' order, and one status code
    per output (0, or one of its `statuses`, e.g. `settling_time`'s)."""
    ys, status, loops = [], [], {}  # `loops`: each closed loop linearised once, whichever outputs read it
    for o in outputs:
        y, st = o.compute(scenario, scn, traj, loops)
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
    axis: str | None = None  # what `labels` run along: "panel", "wheel", "mode", "component"


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


def output_blocks(scenario: Scenario, outputs: tuple[AbstractOutput, ...]) -> tuple[OutputBlock, ...]:
    T = len(save_times(scenario.simulation))
    out, start = [], 0
    for o in outputs:
        shape, labels, axis = o.layout(scenario, T)
        size = int(np.prod(shape))
        out.append(OutputBlock(o.name, o.kind, start, start + size, shape, labels, o.unit, dict(o.options), axis))
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
        group = [i for i, o in enumerate(outs) if o.simulated != modal]
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
    notes += [f"{o.name} ({b.options}): {o.statuses[st]}" for o, b, st in zip(outs, blocks, status) if st]
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
