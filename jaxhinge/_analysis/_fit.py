r"""Fit hinge stiffness and damping to target modal frequencies and damping ratios (e.g. from FEA).

**The problem.** Targets $f_i$ (and optionally $\zeta_i$) are matched to the model's flexible modes in
ascending `frequency_hz` order: target $i$ to mode $i$, or to the 1-based `mode_numbers` given. The residuals
are relative and weighted by the stated target uncertainties,

$$r_{f,i} = \frac{f_i^{model} - f_i}{\sigma_f\, f_i}, \qquad r_{\zeta,i} = \frac{\zeta_i^{model} - \zeta_i}{\sigma_\zeta\,\zeta_i},$$

($\sigma_f$ = `frequency_sigma`, default 1 %; $\sigma_\zeta$ = `damping_sigma`, default 20 %), with the model values
of `jaxhinge.modes` (`damp` definitions: $|\lambda|/2\pi$ and $-\mathrm{Re}\,\lambda/|\lambda|$ of the damped linear
model). The unknowns are the logarithms of the free parameters (positivity, and steps relative to the value).

**Free parameters** are named `"<panel name>.<parameter>"` with parameter `k` [N m/rad] or `c` [N m s/rad].
Several panels **tied** to one fitted value are written as one entry joined by `=`:
`"wing_pY.k = wing_mY.k"` (both wings share one stiffness; its initial guess is the geometric mean of the
members' values). A parameter may appear once only; `k` and `c` cannot be tied together.

**Solvers.** `"lm"` (default): `optimistix.LevenbergMarquardt` with forward-mode Jacobians. `"adam"` and
`"lbfgs"`: the optax optimisers (through `optimistix.OptaxMinimiser`) on $\tfrac12\sum r^2$.

**Checks before fitting** (each refused with a `FitError` in plain words): more targets than flexible modes;
more free parameters than targets (not identifiable: tie parameters or add targets); a free `c` without damping
targets, or damping targets without a free `c`; a free `c` starting at 0 is seeded from the damping targets
($c = 2\zeta\sqrt{k(I_{s2}+md^2)}$), a free `k` must start > 0; **reachability**: every natural frequency is a
non-decreasing function of every stiffness (Courant-Fischer), so target $i$ must lie between mode $i$'s
frequencies with all free stiffnesses at $10^{-6}$ and at $10^{6}$ times their initial values (the limits
$k \to 0$ and $k \to \infty$; 0.1 % margin for the damped-vs-undamped difference); with no free stiffness the
frequencies are fixed; a free parameter that does not change any target (zero Jacobian column) is refused.

**After fitting**: `converged` (the solver's own test), `targets_reached` (every relative frequency error below
`reach_rtol`, damping errors below `100 * reach_rtol`) and a plain-words `message` (e.g. a least-squares
compromise when the targets cannot all be met). Uncertainties: Gauss-Newton covariance in log space
$(J^TJ)^{+}s^2$ with $J$ the weighted-residual Jacobian, $s^2 = \max(1, \chi^2/\mathrm{dof})$ when there are more
residuals than parameters, $s^2 = 1$ otherwise (the stated target uncertainties propagated);
$\sigma_p = p\,\sqrt{\mathrm{cov}_{pp}}$. Directions $J$ does not determine get `sigma = inf`.

**Independent check** (`check=True`): `measure_modes` simulates the fitted nonlinear model, one free response
per mode, and measures frequency and damping from the time histories.
"""

import dataclasses
import itertools
import math
import re
import threading
import time
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float

from .._model._scenario import Scenario
from .._model._spacecraft import Spacecraft, strip_labels
from ._modes import ModeMeasurement, Modes, _relabel, check_boundary, measure_modes, modes, modes_unjitted

PARAMETER_UNITS = {"k": "N m/rad", "c": "N m s/rad"}
SOLVERS = ("lm", "adam", "lbfgs")
_REACH_SCALE = 1e6  # free stiffnesses scaled by 1e-6 and 1e6 for the reachability bounds
_REACH_MARGIN = 1e-3
_NAME_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*$")


class FitError(ValueError):
    """A fit that cannot be set up or that asks for something unreachable. `str(error)` is one line.
    `field` names the FIT.toml key (or keyword argument) concerned, when there is one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class FreeParameter:
    """One fitted value: `kind` (`"k"` or `"c"`), the panels sharing it (`panels`, indices), and its `name`
    (the FIT.toml entry, normalised: `"wing_pY.k=wing_mY.k"`)."""

    name: str
    kind: str
    panels: tuple[int, ...]
    members: tuple[str, ...]


def parse_free(free: Sequence[str], panel_names: Sequence[str], field: str = "fit.free") -> tuple[FreeParameter, ...]:
    """Parse the `free` list (see the module docstring for the syntax, ties included)."""
    if isinstance(free, str) or not isinstance(free, (list, tuple)):
        raise FitError(f"{field} = {free!r}: must be a list of strings like \"p0.k\"", field=field)
    if not free:
        raise FitError(f"{field} = []: give at least one free parameter, e.g. \"{_first(panel_names)}.k\"",
                       field=field)
    seen: dict[str, int] = {}
    out = []
    for i, entry in enumerate(free):
        where = f"{field}[{i}]"
        if not isinstance(entry, str):
            raise FitError(f"{where} = {entry!r}: must be a string like \"p0.k\" or \"p0.k = p1.k\"", field=where)
        parts = entry.split("=")
        kinds, panels, members = set(), [], []
        for part in parts:
            m = _NAME_RE.match(part)
            if not m:
                raise FitError(
                    f"{where} = {entry!r}: {part.strip()!r} is not \"<panel name>.<parameter>\" "
                    "(tie several with \"=\", e.g. \"wing_pY.k = wing_mY.k\")", field=where)
            pname, kind = m.group(1), m.group(2)
            if pname not in panel_names:
                raise FitError(f"{where} = {entry!r}: no panel named {pname!r}; panels: {', '.join(panel_names)}",
                               field=where)
            if kind not in PARAMETER_UNITS:
                raise FitError(f"{where} = {entry!r}: parameter {kind!r} cannot be fitted; allowed: "
                               f"{', '.join(PARAMETER_UNITS)} (hinge stiffness, damping)", field=where)
            key = f"{pname}.{kind}"
            if key in seen:
                raise FitError(f"{where} = {entry!r}: {key} already appears in {field}[{seen[key]}]; each "
                               "parameter may be free (or tied) once", field=where)
            seen[key] = i
            kinds.add(kind)
            panels.append(list(panel_names).index(pname))
            members.append(key)
        if len(kinds) > 1:
            raise FitError(f"{where} = {entry!r}: cannot tie a stiffness k to a damping c (different units)",
                           field=where)
        out.append(FreeParameter("=".join(members), kinds.pop(), tuple(panels), tuple(members)))
    return tuple(out)


def _first(names):
    return names[0] if names else "p0"


# ------------------------------------------------------------------------------------------------------------
# The residual function (module level, so repeated fits of one model structure reuse the compiled solver)
# ------------------------------------------------------------------------------------------------------------


class _Problem(eqx.Module):
    spacecraft: Spacecraft
    targets_hz: Float[Array, " targets"]
    damping_ratios: Float[Array, " dtargets"]
    w_f: Float[Array, " targets"]
    w_z: Float[Array, " dtargets"]
    boundary: str = eqx.field(static=True)
    mode_index: tuple[int, ...] = eqx.field(static=True)
    k_panels: tuple[int, ...] = eqx.field(static=True)
    k_groups: tuple[int, ...] = eqx.field(static=True)
    c_panels: tuple[int, ...] = eqx.field(static=True)
    c_groups: tuple[int, ...] = eqx.field(static=True)

    def apply(self, y):
        vals = jnp.exp(y)
        sc = self.spacecraft
        k, c = sc.panels.k, sc.panels.c
        if self.k_panels:
            k = k.at[np.array(self.k_panels)].set(vals[np.array(self.k_groups)])
        if self.c_panels:
            c = c.at[np.array(self.c_panels)].set(vals[np.array(self.c_groups)])
        return eqx.tree_at(lambda s: (s.panels.k, s.panels.c), sc, (k, c))

    def model(self, y) -> Modes:
        return modes_unjitted(self.apply(y), self.boundary)


def _residuals(y, problem: _Problem):
    m = problem.model(y)
    idx = np.array(problem.mode_index)
    r = (m.frequency_hz[idx] - problem.targets_hz) * problem.w_f
    if problem.damping_ratios.shape[0]:
        r = jnp.concatenate([r, (m.damping_ratio[idx] - problem.damping_ratios) * problem.w_z])
    return r


_residuals_jit = eqx.filter_jit(_residuals)
_jacobian_jit = eqx.filter_jit(jax.jacfwd(_residuals))


# ------------------------------------------------------------------------------------------------------------
# Progress (host side; called from inside the compiled solver through jax.debug.callback)
# ------------------------------------------------------------------------------------------------------------


class _Progress:
    def __init__(self):
        self.lock = threading.Lock()
        self.sink: Callable[[str], None] | None = None
        self.history: list[float] = []
        self.last = 0.0
        self.every = 1.0

    def start(self, sink):
        with self.lock:
            self.sink, self.history, self.last = sink, [], time.perf_counter()

    def report(self, step, loss):
        with self.lock:
            self.history.append(float(loss))
            now = time.perf_counter()
            if self.sink is not None and now - self.last >= self.every:
                self.last = now
                self.sink(f"fit: step {int(step)}, cost {float(loss):.6e}")


_PROGRESS = _Progress()


def _verbose(**kwargs):
    step = kwargs["num_steps"][1]
    loss = kwargs.get("loss_this_step", kwargs.get("loss_last_accepted_step"))[1]
    jax.debug.callback(_PROGRESS.report, step, loss)


def _make_solver(solver: str, rtol: float, atol: float, learning_rate: float):
    if solver == "lm":
        return optx.LevenbergMarquardt(rtol=rtol, atol=atol, verbose=_verbose)
    if solver == "adam":
        return optx.OptaxMinimiser(optax.adam(learning_rate), rtol=rtol, atol=atol, verbose=_verbose)
    return optx.OptaxMinimiser(optax.lbfgs(), rtol=rtol, atol=atol, verbose=_verbose)


@eqx.filter_jit
def _solve(solver, y0, problem, max_steps: int):
    options = {"jac": "fwd"} if isinstance(solver, optx.AbstractLeastSquaresSolver) else None
    sol = optx.least_squares(_residuals, solver, y0, problem, options, max_steps=max_steps, throw=False)
    return sol.value, sol.result, sol.stats["num_steps"]


# ------------------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------------------


class FitResult(eqx.Module):
    """The outcome of `fit` (a pytree; arrays are NumPy/JAX, metadata static).

    - `parameter_names`: the free parameters (tied groups as `"a.k=b.k"`); `parameter_kinds`: `"k"`/`"c"`;
      `parameter_members`: the panel parameters of each group.
    - `values`, `sigma`, `initial`: fitted values, 1-sigma uncertainties (see the module docstring; `inf` when
      not determined) and initial guesses [SI units].
    - `scenario`: the input scenario with the fitted values; `modes`, `initial_modes`: its modes after and before.
    - `targets_hz`, `damping_targets` (empty if none), `mode_numbers` (1-based, matched modes).
    - `frequency_error`, `damping_error`: relative model-minus-target errors at the solution.
    - `residuals`: the weighted residual vector; `cost`: $\\tfrac12\\sum r^2$.
    - `iterations`, `converged`, `targets_reached`, `status` (optimistix result name), `message` (plain words),
      `wall_s` (set-up, checks and solve, compilation included; not the simulation check), `solve_s` (the
      solver alone, compilation included), `solver`, `sigma_note`, `history` (cost per solver step).
    - `check`: the `ModeMeasurement` of the fitted model (`None` if not requested).
    """

    parameter_names: tuple[str, ...] = eqx.field(static=True)
    parameter_kinds: tuple[str, ...] = eqx.field(static=True)
    parameter_members: tuple[tuple[str, ...], ...] = eqx.field(static=True)
    values: np.ndarray
    sigma: np.ndarray
    initial: np.ndarray
    scenario: Scenario
    modes: Modes
    initial_modes: Modes
    targets_hz: np.ndarray
    damping_targets: np.ndarray
    mode_numbers: tuple[int, ...] = eqx.field(static=True)
    frequency_error: np.ndarray
    damping_error: np.ndarray
    residuals: np.ndarray
    cost: float
    iterations: int
    converged: bool
    targets_reached: bool
    status: str = eqx.field(static=True)
    message: str = eqx.field(static=True)
    wall_s: float
    solve_s: float
    solver: str = eqx.field(static=True)
    boundary: str = eqx.field(static=True)
    sigma_note: str = eqx.field(static=True)
    history: np.ndarray
    check: ModeMeasurement | None = None

    def parameter(self, name: str) -> tuple[float, float]:
        """`(value, sigma)` of one panel parameter (`"p0.k"`), also when it is a member of a tied group."""
        for i, members in enumerate(self.parameter_members):
            if name in members or name == self.parameter_names[i]:
                return float(self.values[i]), float(self.sigma[i])
        raise KeyError(f"{name!r} is not a free parameter; free: {', '.join(self.parameter_names)}")


# ------------------------------------------------------------------------------------------------------------
# fit
# ------------------------------------------------------------------------------------------------------------


def _floats(value, field: str, *, positive: bool) -> np.ndarray:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise FitError(f"{field} = {value!r}: must be a list of numbers", field=field)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise FitError(f"{field}[{i}] = {v!r}: must be a number", field=field)
        x = float(v)
        if not math.isfinite(x) or (positive and not x > 0):
            raise FitError(f"{field}[{i}] = {v!r}: must be a finite number > 0", field=field)
        out.append(x)
    if not out:
        raise FitError(f"{field} = []: give at least one value", field=field)
    return np.asarray(out)


def _fmt_hz(x: float) -> str:
    return f"{x:.6g} Hz"


def fit(
    scenario: Scenario,
    targets_hz: Sequence[float] | Float[ArrayLike, " targets"],
    *,
    free: Sequence[str],
    damping_ratios: Sequence[float] | Float[ArrayLike, " targets"] | None = None,
    boundary: str = "free",
    mode_numbers: Sequence[int] | None = None,
    frequency_sigma: float | int = 0.01,
    damping_sigma: float | int = 0.2,
    solver: str = "lm",
    max_steps: int = 200,
    rtol: float | int = 1e-10,
    atol: float | int = 1e-10,
    learning_rate: float | int = 0.02,
    reach_rtol: float | int = 1e-6,
    check: bool = True,
    progress: Callable[[str], None] | None = None,
) -> FitResult:
    """Fit hinge stiffnesses and dampings so the model's modes match target frequencies (and damping ratios).

    **Arguments:**

    - `scenario`: the model; its values of the free parameters are the initial guesses.
    - `targets_hz`: target frequencies [Hz], non-decreasing, matched to the lowest flexible modes in order
      (or to `mode_numbers`).
    - `free`: free parameters, `"<panel>.k"` / `"<panel>.c"`; tie panels with `"a.k = b.k"`.
    - `damping_ratios`: optional target damping ratios (same length as `targets_hz`, each in (0, 1)).
    - `boundary`: `"free"` (as flown) or `"clamped"` (hub fixed: FEA fixture, test stand).
    - `mode_numbers`: 1-based, strictly increasing mode numbers the targets belong to (default 1, 2, ...).
    - `frequency_sigma`, `damping_sigma`: relative 1-sigma uncertainties of the targets (residual weights and
      the basis of the reported `sigma`).
    - `solver`: `"lm"` (Levenberg-Marquardt, default), `"adam"` or `"lbfgs"` (optax); `max_steps`, `rtol`,
      `atol` (termination, on log-parameters and cost), `learning_rate` (adam, in log-parameter units).
    - `reach_rtol`: relative frequency error below which the targets count as reached.
    - `check`: simulate the fitted model and measure its frequencies (`measure_modes`).
    - `progress`: called with progress lines (on long fits, at most once a second), e.g. `print`.

    **Returns:** a `FitResult`.

    **Raises:** `FitError` (a `ValueError`) for inputs that cannot be fitted (see the module docstring).
    """
    t_start = time.perf_counter()
    say = progress or (lambda s: None)
    if not isinstance(scenario, Scenario):
        raise FitError(f"scenario: expected a jaxhinge Scenario, got {type(scenario).__name__}")
    try:
        check_boundary(boundary)
    except ValueError as e:
        raise FitError(f"modes.{e}", field="modes.boundary") from None
    if solver not in SOLVERS:
        raise FitError(f"fit.solver = {solver!r}: allowed values are {', '.join(SOLVERS)}", field="fit.solver")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise FitError(f"fit.max_steps = {max_steps!r}: must be an integer >= 1", field="fit.max_steps")
    for name, v in (("rtol", rtol), ("atol", atol), ("learning_rate", learning_rate), ("reach_rtol", reach_rtol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise FitError(f"fit.{name} = {v!r}: must be a finite number > 0", field=f"fit.{name}")
    for name, v in (("frequency_sigma", frequency_sigma), ("damping_sigma", damping_sigma)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise FitError(f"modes.{name} = {v!r}: must be a finite number > 0 (relative uncertainty)",
                           field=f"modes.{name}")

    sc = scenario.spacecraft
    names = sc.panels.labels
    n = len(names)
    ft = _floats(targets_hz, "modes.targets_hz", positive=True)
    if np.any(np.diff(ft) < 0):
        raise FitError(f"modes.targets_hz = {list(ft)}: must be in ascending order (they are matched to the modes "
                       "in ascending frequency)", field="modes.targets_hz")
    zt = np.zeros(0)
    if damping_ratios is not None:
        zt = _floats(damping_ratios, "modes.damping_ratios", positive=True)
        if len(zt) != len(ft):
            raise FitError(f"modes.damping_ratios has {len(zt)} values but modes.targets_hz has {len(ft)}: give one "
                           "damping ratio per target frequency", field="modes.damping_ratios")
        if np.any(zt >= 1):
            raise FitError(f"modes.damping_ratios = {list(zt)}: each must be < 1 (an oscillating mode)",
                           field="modes.damping_ratios")
    if n == 0:
        raise FitError("the scenario has no panels, hence no flexible modes to fit", field="scenario")
    if len(ft) > n:
        raise FitError(f"{len(ft)} target frequencies but the model has only {n} flexible mode(s) (one per panel; "
                       f"the {boundary} hub adds none): no parameter values can produce the extra ones",
                       field="modes.targets_hz")
    if mode_numbers is None:
        idx = tuple(range(len(ft)))
    else:
        mn = list(mode_numbers)
        if len(mn) != len(ft) or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in mn):
            raise FitError(f"modes.mode_numbers = {mn!r}: must be {len(ft)} integers (one per target)",
                           field="modes.mode_numbers")
        if any(x < 1 or x > n for x in mn) or any(b <= a for a, b in itertools.pairwise(mn)):
            raise FitError(f"modes.mode_numbers = {mn!r}: must be strictly increasing, between 1 and {n}",
                           field="modes.mode_numbers")
        idx = tuple(int(x) - 1 for x in mn)

    groups = parse_free(free, names)
    n_par, n_res = len(groups), len(ft) + len(zt)
    if n_par > n_res:
        raise FitError(f"{n_par} free parameters but only {n_res} target{'s' if n_res != 1 else ''}: the parameters "
                       "cannot all be determined; "
                       "tie parameters (\"a.k = b.k\") or add targets (damping_ratios)", field="fit.free")
    kinds = {g.kind for g in groups}
    c_groups = [g for g in groups if g.kind == "c"]
    if c_groups and not len(zt):
        raise FitError(f"fit.free: {c_groups[0].name} is free but no damping_ratios are given: the damping c hardly "
                       "changes the frequencies, so it cannot be fitted to them; add [modes] damping_ratios or fix c",
                       field="fit.free")
    if len(zt) and "c" not in kinds:
        raise FitError("modes.damping_ratios are given but no damping c is free: free at least one \"<panel>.c\" "
                       "or drop the damping targets", field="modes.damping_ratios")

    # initial guesses
    k0, c0 = np.asarray(sc.panels.k, float), np.asarray(sc.panels.c, float)
    Itheta = np.asarray(sc.panels.IPntS_S[:, 1, 1] + sc.panels.mass * sc.panels.d**2, float)
    # a seed for c only (for chain panels: the panel alone about its own hinge)
    initial = []
    notes = []
    for g in groups:
        vals = (k0 if g.kind == "k" else c0)[list(g.panels)]
        if g.kind == "k" and np.any(vals <= 0):
            raise FitError(f"fit.free: {g.name} starts at k = {vals.min():g}: a free stiffness needs an initial "
                           "guess > 0 in the scenario (it is fitted in log space)", field="fit.free")
        if g.kind == "c" and np.any(vals <= 0):
            zbar = float(np.mean(zt))
            kk = np.maximum(k0[list(g.panels)], 1e-12)
            vals = 2.0 * zbar * np.sqrt(kk * Itheta[list(g.panels)])
            notes.append(f"{g.name} started at 0; seeded with 2 zeta sqrt(k I) = {float(np.exp(np.mean(np.log(vals)))):.6g}")
        initial.append(float(vals[0]) if np.all(vals == vals[0]) else float(np.exp(np.mean(np.log(vals)))))
    y0 = jnp.log(jnp.asarray(initial))

    kp, kg, cp, cg = [], [], [], []
    for j, g in enumerate(groups):
        for p in g.panels:
            (kp if g.kind == "k" else cp).append(p)
            (kg if g.kind == "k" else cg).append(j)
    problem = _Problem(
        spacecraft=strip_labels(sc),
        targets_hz=jnp.asarray(ft),
        damping_ratios=jnp.asarray(zt),
        w_f=jnp.asarray(1.0 / (frequency_sigma * ft)),
        w_z=jnp.asarray(1.0 / (damping_sigma * zt)) if len(zt) else jnp.zeros(0),
        boundary=boundary,
        mode_index=idx,
        k_panels=tuple(kp),
        k_groups=tuple(kg),
        c_panels=tuple(cp),
        c_groups=tuple(cg),
    )

    # reachability of the frequency targets (natural frequencies are monotone in every stiffness)
    say("fit: checking that the targets are reachable...")
    m_init = _relabel(modes(problem.apply(y0), boundary), sc)
    k_idx = [j for j, g in enumerate(groups) if g.kind == "k"]
    shift = np.zeros(n_par)
    shift[k_idx] = math.log(_REACH_SCALE)
    lo = np.sort(np.asarray(modes(problem.apply(y0 - shift), boundary).natural_frequency_hz))
    hi = np.sort(np.asarray(modes(problem.apply(y0 + shift), boundary).natural_frequency_hz))
    free_k = ", ".join(groups[j].name for j in k_idx)
    for i, j in enumerate(idx):
        if lo[j] * (1 - _REACH_MARGIN) <= ft[i] <= hi[j] * (1 + _REACH_MARGIN):
            continue
        ef = np.asarray(m_init.energy_fraction)[j]
        dom = m_init.participants[int(np.argmax(ef))]
        if not k_idx:
            why = (f"no stiffness is free, so mode {j + 1} stays at {_fmt_hz(hi[j])} whatever the damping; "
                   "free a stiffness k")
        else:
            side = "above the highest" if ft[i] > hi[j] else "below the lowest"
            how = "infinitely stiff" if ft[i] > hi[j] else "infinitely soft"
            why = (f"it is {side} frequency mode {j + 1} can have: with the free stiffnesses ({free_k}) anywhere "
                   f"in (0, inf) and the other parameters fixed, mode {j + 1} stays between {_fmt_hz(lo[j])} "
                   f"and {_fmt_hz(hi[j])} (the limit when they are {how})")
        raise FitError(f"target {i + 1} = {_fmt_hz(ft[i])} ({boundary} boundary) is out of reach: {why}. Mode "
                       f"{j + 1} is dominated by {dom} ({100 * ef.max():.0f} % of its kinetic energy); free the "
                       "stiffness of the part that dominates it, or check the target", field="modes.targets_hz")

    # every free parameter must move the targets
    J0 = np.asarray(_jacobian_jit(y0, problem))
    col = np.linalg.norm(J0, axis=0)
    for j, g in enumerate(groups):
        if not col[j] > 1e-9 * max(col.max(), 1e-300):
            raise FitError(f"fit.free: {g.name} has no effect on the targeted modes (zero sensitivity at the "
                           "initial guess): fix it or target modes it takes part in", field="fit.free")

    say(f"fit: {n_par} free parameter(s), {n_res} residual(s), solver {solver}; compiling and solving...")
    _PROGRESS.start(progress)
    t0 = time.perf_counter()
    solver_obj = _make_solver(solver, rtol, atol, learning_rate)
    y, result, steps = _solve(solver_obj, y0, problem, max_steps)
    y = jax.block_until_ready(y)
    wall_fit = time.perf_counter() - t0
    history = np.asarray(_PROGRESS.history)
    _PROGRESS.start(None)
    status = _result_name(result)
    converged = status == "successful"

    r = np.asarray(_residuals_jit(y, problem))
    J = np.asarray(_jacobian_jit(y, problem))
    m_fit = _relabel(modes(problem.apply(y), boundary), sc)
    f_fit = np.asarray(m_fit.frequency_hz)[list(idx)]
    ferr = (f_fit - ft) / ft
    derr = (np.asarray(m_fit.damping_ratio)[list(idx)] - zt) / zt if len(zt) else np.zeros(0)
    values = np.exp(np.asarray(y))
    sigma, sigma_note, nullspace = _uncertainty(J, r, values, groups)
    reached = bool(np.all(np.abs(ferr) <= reach_rtol) and np.all(np.abs(derr) <= 100 * reach_rtol))
    cost = 0.5 * float(r @ r)
    poor = [f"{g.name} is poorly determined by these targets (sigma = {100 * sigma[j] / values[j]:.0f} % of its "
            "value): tie it to a similar parameter or add targets"
            for j, g in enumerate(groups) if np.isfinite(sigma[j]) and sigma[j] > 0.5 * values[j]]
    message = _message(converged, reached, status, int(steps), ferr, derr, nullspace, notes, n_par, n_res, J, r,
                       poor)

    fitted = eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), scenario,
                         (problem.apply(y).panels.k, problem.apply(y).panels.c))
    wall = time.perf_counter() - t_start
    measured = None
    if check:
        say("fit: independent check: simulating the fitted nonlinear model, one free response per mode...")
        measured = measure_modes(fitted, boundary)
    return FitResult(
        parameter_names=tuple(g.name for g in groups),
        parameter_kinds=tuple(g.kind for g in groups),
        parameter_members=tuple(g.members for g in groups),
        values=values,
        sigma=sigma,
        initial=np.asarray(initial),
        scenario=fitted,
        modes=m_fit,
        initial_modes=m_init,
        targets_hz=ft,
        damping_targets=zt,
        mode_numbers=tuple(j + 1 for j in idx),
        frequency_error=ferr,
        damping_error=derr,
        residuals=r,
        cost=cost,
        iterations=int(steps),
        converged=converged,
        targets_reached=reached,
        status=status,
        message=message,
        wall_s=float(wall),
        solve_s=float(wall_fit),
        solver=solver,
        boundary=boundary,
        sigma_note=sigma_note,
        history=history,
        check=measured,
    )


def _result_name(result) -> str:
    for name in optx.RESULTS._name_to_item:
        if result == getattr(optx.RESULTS, name):
            return name
    return "unknown"


def _uncertainty(J, r, values, groups):
    m, p = J.shape
    _, s, Vt = np.linalg.svd(J, full_matrices=False)
    tol = max(s.max(initial=0.0), 1e-300) * 1e-10
    keep = s > tol
    cov = (Vt[keep].T / s[keep] ** 2) @ Vt[keep]
    dof = m - p
    if dof > 0:
        s2 = max(1.0, float(r @ r) / dof)
        note = (f"Gauss-Newton covariance (J^T J)^-1 of the weighted residuals (target uncertainties "
                f"propagated), scaled by max(1, chi^2/dof) = {s2:.3g} (dof = {dof})")
    else:
        s2 = 1.0
        note = ("Gauss-Newton covariance (J^T J)^-1 of the weighted residuals: the stated target uncertainties "
                "(frequency_sigma, damping_sigma) propagated to the parameters (as many targets as parameters, "
                "so the fit itself gives no scatter estimate)")
    sig_log = np.sqrt(np.maximum(np.diag(cov) * s2, 0.0))
    null = Vt[~keep]
    undetermined = []
    for v in null:
        big = np.abs(v) > 1e-3
        sig_log[big] = np.inf
        undetermined.append(" and ".join(groups[i].name for i in np.nonzero(big)[0]))
    return values * sig_log, note, undetermined


def _message(converged, reached, status, steps, ferr, derr, nullspace, notes, n_par, n_res, J, r, poor) -> str:
    parts = []
    worst_f = float(np.max(np.abs(ferr))) if len(ferr) else 0.0
    worst_z = float(np.max(np.abs(derr))) if len(derr) else 0.0
    if converged and reached:
        parts.append(f"converged in {steps} steps; every target reached (largest relative error: frequency "
                     f"{worst_f:.2e}" + (f", damping ratio {worst_z:.2e})" if len(derr) else ")"))
    elif converged:
        g = J.T @ r
        stationary = float(np.max(np.abs(g))) <= 1e-6 * max(1.0, float(r @ r))
        parts.append(
            f"converged in {steps} steps to a least-squares compromise: the targets cannot all be reached "
            + ("by any nearby values of the free parameters" if stationary else "")
            + f" (largest relative error: frequency {worst_f:.2e}"
            + (f", damping ratio {worst_z:.2e})" if len(derr) else ")")
            + ("; there are more targets than free parameters" if n_res > n_par else "")
        )
    else:
        why = {"max_steps_reached": f"it used all {steps} allowed steps (raise fit.max_steps)",
               "nonlinear_max_steps_reached": f"it used all {steps} allowed steps (raise fit.max_steps)"}.get(
            status, f"the solver stopped with status {status!r}")
        parts.append(f"did NOT converge: {why}; the values written are the last iterate, not a solution "
                     f"(largest relative error: frequency {worst_f:.2e}"
                     + (f", damping ratio {worst_z:.2e})" if len(derr) else ")"))
    for u in nullspace:
        parts.append(f"not determined by these targets: {u}")
    parts += poor
    parts += notes
    return "; ".join(parts)
