"""The least-squares problem of a modal fit (`build_problem`): the fitted coordinates, the residuals (`ModalResiduals`,
a pytree: repeated fits of one model structure reuse the compiled programs), the starting points of the
multi-start search (`start_points`), and the checks that refuse a problem the targets cannot determine, cannot
reach, or do not depend on."""

import dataclasses
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._boundary import AbstractBoundary
from ..._model._fea_modes import ShapeMap
from ..._model._loads import Loads
from ..._model._params import Parameter
from ..._model._rules import model_ok
from ..._model._scenario import Scenario, SimulationConfig
from ..._model._spacecraft import strip_labels
from .._linear._closed_loop import closed_loop_modes, closed_loop_modes_unjitted
from .._linear._modes import Modes, modes, modes_unjitted, relabel
from ._fit_targets import Targets, number_list
from ._loop import AbstractLoop, OpenLoop
from ._lsq_analysis import to_numpy
from ._lsq_coords import Coordinates, parse_free
from ._lsq_solver import AbstractResiduals, evaluate
from ._pairing import FREQ_WEIGHT, mac, model_shape_matrix, total_effective_mass

START_FACTOR = 3.0  # default start box: a factor 3 either side of a positive parameter's initial value
_REACH_SCALE = 1e6  # free stiffnesses scaled by 1e-6 and 1e6 for the reachability bounds
_REACH_MARGIN = 1e-3
_NOT_IN_MODES = ("motorTorque", "thetaDotRef")  # besides the initial conditions


class ModalResiduals(AbstractResiduals):
    scenario: Scenario  # label-free, default loads and simulation settings (they do not enter the modes)
    coordinates: Coordinates
    targets_hz: Float[Array, " targets"]
    damping_ratios: Float[Array, " dtargets"]
    w_f: Float[Array, " targets"]
    w_z: Float[Array, " dtargets"]
    reference_point: Float[Array, "3"]
    mass_targets: Float[Array, "mtargets 6"]  # FEA effective masses of the paired modes (empty: not fitted)
    w_m: Float[Array, "6"]
    track: Float[Array, "ttargets 6"]  # unit-free FEA participation vectors of the paired modes (empty: by index)
    track_scale: Float[Array, "6"]
    boundary: AbstractBoundary = eqx.field(static=True)
    mode_index: tuple[int, ...] = eqx.field(static=True)
    track_signed: bool = eqx.field(static=True, default=True)
    loop: tuple[int, bool] | None = eqx.field(static=True, default=None)  # closed loop: `loop_shape`; None: open
    shape_fe: Float[Array, "stargets c"] | None = None  # unit FEA shape vectors of the paired modes (`ShapeMap`)
    shape_w: Float[Array, ""] | None = None  # 1 / ShapeMap.sigma (shape residuals), 0: shapes pair only
    shape_map: ShapeMap | None = eqx.field(static=True, default=None)

    def shape_vectors(self, m: Modes, model: Scenario):
        """Every model mode in the shape coordinates of `shape_map` (modes x c)."""
        return m.shape @ model_shape_matrix(model.spacecraft, self.shape_map).T

    def at(self, u) -> Scenario:
        return self.coordinates.apply(self.scenario, u)

    def index(self, m: Modes):
        """The model mode of each target: fixed (`mode_index`; free-free FEA modes, mode-shape pairing: decided
        once, at the initial guess, so it cannot switch between iterates), or tracked through the fit (clamped
        FEA modes with effective masses): the mode whose participation vector matches the paired FEA mode's best
        (MAC, then frequency), whatever the order of the model's frequencies at this point."""
        if not self.track.shape[0]:
            return np.array(self.mode_index)
        b = m.participation / self.track_scale
        score = mac(self.track, b if self.track_signed else jnp.abs(b)) - FREQ_WEIGHT * jnp.abs(
            jnp.log(m.frequency_hz[None, :] / self.targets_hz[:, None]))
        return jnp.argmax(score, axis=1)

    def modes_at(self, model: Scenario) -> Modes:
        """The modes the targets refer to: the open-loop structure's (`modes`) or the sampled closed loop's."""
        if self.loop is None:
            return modes_unjitted(model, self.boundary, self.reference_point)
        return closed_loop_modes_unjitted(model, self.loop, self.reference_point)

    def __call__(self, u):
        model = self.at(u)
        m = self.modes_at(model)
        idx = self.index(m)
        r = (m.frequency_hz[idx] - self.targets_hz) * self.w_f
        if self.damping_ratios.shape[0]:
            r = jnp.concatenate([r, (m.damping_ratio[idx] - self.damping_ratios) * self.w_z])
        if self.mass_targets.shape[0]:
            r = jnp.concatenate([r, ((m.effective_mass[idx] - self.mass_targets) * self.w_m).ravel()])
        if self.shape_map is not None and self.shape_map.sigma is not None:  # unit shapes, sign-aligned
            v = self.shape_vectors(m, model)[idx]
            v = v / jnp.linalg.norm(v, axis=1, keepdims=True)
            sign = jnp.where(jnp.sum(v * self.shape_fe, axis=1, keepdims=True) < 0, -1.0, 1.0)
            r = jnp.concatenate([r, ((sign * v - self.shape_fe) * self.shape_w).ravel()])
        return r, model_ok(model.spacecraft), m  # an iterate that breaks a physical rule is a failed evaluation


@dataclasses.dataclass(frozen=True)
class Problem:
    """The least-squares problem: its coordinates, residuals, counts, the initial modes and notes so far."""

    coords: tuple
    problem: ModalResiduals
    n_res: int
    m_init: Modes
    notes: list
    starts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((1, 0)))


def _modal_scenario(scenario: Scenario, closed: bool = False) -> Scenario:
    """What the modes depend on, without names, loads or simulation settings (one program per structure); the
    controller too for the closed loop."""
    if not closed:
        return Scenario(strip_labels(scenario.spacecraft), scenario.initial, Loads(), SimulationConfig())
    # the closed loop: its rk4 step (steps per control period) from the scenario's simulation settings
    return Scenario(strip_labels(scenario.spacecraft), scenario.initial, Loads(), scenario.simulation,
                    control=scenario.control)


def build_problem(scenario, free, tg: Targets, boundary, frequency_sigma, damping_sigma, effective_mass_sigma,
                  say, loop: AbstractLoop = OpenLoop(), bounds=None) -> Problem:
    """The fitted coordinates (a free c at 0 seeded from the damping targets) and the residuals, refused when
    the targets cannot determine them, cannot be reached, or do not depend on one of them."""
    sc = scenario.spacecraft
    ft, zt, idx, em_t, ref, fea = tg.ft, tg.zt, tg.idx, tg.em_t, tg.ref, tg.fea
    # the coordinates; a free c at 0 is seeded from the damping targets (the panel alone about its own hinge)
    k0 = np.asarray(sc.panels.k, float)
    IPntS_S, mass, d = (np.asarray(x, float) for x in (sc.panels.IPntS_S, sc.panels.mass, sc.panels.d))
    Itheta = IPntS_S[:, 1, 1] + mass * d**2  # (NumPy: on the host, no program per operation)

    def seed(par: Parameter) -> float | None:
        if par.field.name != "c":
            return None
        if not len(zt):
            raise FitError(f"free: {par.name} is free but no damping_ratios are given: the damping c hardly "
                           "changes the frequencies, so it cannot be fitted to them; add [modes] damping_ratios or "
                           "fix c", field="free")
        return float(2.0 * np.mean(zt) * np.sqrt(max(k0[par.panel], 1e-12) * Itheta[par.panel]))

    coords = parse_free(scenario, free, seed=seed)
    for c in coords:
        f = c.targets[0].field
        if f.owner == "control" and not loop.closed:
            raise FitError(f"free: {c.name} is a controller parameter, which does not enter the structure's modes; "
                           "fit closed-loop targets with loop = \"closed\"", field="free")
        if f.owner == "control" and f.name == "sigma_R0N":
            raise FitError(f"free: {c.name} is the reference attitude, about which the loop is linearised: "
                           "it does not move the closed-loop modes", field="free")
        if f.initial or f.name in _NOT_IN_MODES:
            what = "an initial condition" if f.initial else f"{f.name} ({f.description})"
            raise FitError(f"free: {c.name} is {what}, which does not enter the modes (linearised about "
                           "rest); a modal fit frees model parameters such as k, c, mass, d, IPntS_S",
                           field="free")
    start_points(coords, 1, bounds)  # the bounds checked against the free parameters, before any compute
    n_shape = 0 if tg.shape_map is None or tg.shape_map.sigma is None else len(ft) * tg.shape_fe.shape[1]
    n_par, n_res = len(coords), len(ft) + len(zt) + em_t.size + n_shape
    if n_par > n_res:
        raise FitError(f"{n_par} free parameters but only {n_res} target{'s' if n_res != 1 else ''}: the parameters "
                       "cannot all be determined; "
                       "tie parameters (\"a.k = b.k\") or add targets (damping_ratios)", field="free")
    kinds = {c.field for c in coords}
    c_coords = [c for c in coords if c.field == "c"]
    if c_coords and not len(zt):
        raise FitError(f"free: {c_coords[0].name} is free but no damping_ratios are given: the damping c hardly "
                       "changes the frequencies, so it cannot be fitted to them; add [modes] damping_ratios or fix c",
                       field="free")
    damps = "c" in kinds or (loop.closed and any(c.targets[0].field.owner == "control" for c in coords))
    if len(zt) and not damps:
        raise FitError("damping_ratios are given but no damping c is free: free at least one \"<panel>.c\" "
                       + ("(or a controller gain) " if loop.closed else "")
                       + "or drop the damping targets", field="damping_ratios")
    notes = [f"{c.name} started at 0; seeded with 2 zeta sqrt(k I) = {c.x0:.6g}"
             for c in c_coords if any(float(sc.panels.c[t.panel]) <= 0 for t in c.targets)]

    problem = ModalResiduals(
        scenario=_modal_scenario(scenario, loop.closed),
        coordinates=Coordinates(coords),
        targets_hz=jnp.asarray(ft),
        damping_ratios=jnp.asarray(zt),
        w_f=jnp.asarray(1.0 / (frequency_sigma * ft)),
        w_z=jnp.asarray(1.0 / (damping_sigma * zt)) if len(zt) else jnp.zeros(0),
        reference_point=jnp.asarray(ref),
        mass_targets=jnp.asarray(em_t),
        w_m=jnp.asarray(1.0 / (effective_mass_sigma * total_effective_mass(fea)) if len(em_t) else np.zeros(6)),
        track=jnp.asarray(tg.track), track_scale=jnp.asarray(tg.track_scale), track_signed=fea is None or
        fea.participation is not None,
        boundary=boundary,
        mode_index=idx,
        loop=loop.shape(scenario),
        **({} if tg.shape_map is None else {
            "shape_map": tg.shape_map, "shape_fe": jnp.asarray(_unit_rows(tg.shape_fe[tg.pairs0[0]])),
            "shape_w": jnp.asarray(0.0 if tg.shape_map.sigma is None else 1.0 / tg.shape_map.sigma)}),
    )
    u0 = jnp.zeros(n_par)

    # reachability of the frequency targets (natural frequencies are monotone in every stiffness)
    say("fit: checking that the targets are reachable...")
    m_init = to_numpy(relabel(target_modes(problem, problem.at(u0)), sc))
    if kinds <= {"k", "c"} and not len(tg.track) and not loop.closed:  # (tracked modes may change their order with k)
        _check_reach(problem, coords, m_init, ft, idx, boundary)

    # every free parameter must move the targets
    J0 = np.asarray(evaluate(u0, problem).jacobian)
    col = np.linalg.norm(J0, axis=0)
    for j, c in enumerate(coords):
        if not col[j] > 1e-9 * max(col.max(), 1e-300):
            raise FitError(f"free: {c.name} has no effect on the targeted modes (zero sensitivity at the "
                           "initial guess): fix it or target modes it takes part in", field="free")
    return Problem(tuple(coords), problem, n_res, m_init, notes)


def _halton(n: int, dims: int) -> np.ndarray:
    """The first `n` points (after the origin) of the Halton sequence in [0, 1)^dims (bases: the primes)."""
    primes = [p for p in range(2, 600) if all(p % q for q in range(2, int(p**0.5) + 1))][:dims]
    out = np.zeros((n, dims))
    for d, b in enumerate(primes):
        for i in range(n):
            f, k, x = 1.0, i + 1, 0.0
            while k:
                f /= b
                x += f * (k % b)
                k //= b
            out[i, d] = x
    return out


def start_points(coords, n: int, bounds) -> np.ndarray:
    """(n, P) starting coordinates: the initial guess (zeros), then n - 1 Halton points of the start box
    (`bounds`, in the fitted coordinates; default `START_FACTOR` either side of a log coordinate, +/- 1 scale
    unit for a linear one)."""
    lo = np.array([-math.log(START_FACTOR) if c.log else -1.0 for c in coords])
    hi = -lo
    by_name = {}
    for j, c in enumerate(coords):
        for name in (c.name, *c.members):
            by_name[name.replace(" ", "")] = j
    for key, pair in (bounds or {}).items():
        field = f"bounds[{key!r}]"
        j = by_name.get(str(key).replace(" ", ""))
        if j is None:
            raise FitError(f"{field}: not a free parameter (free: {', '.join(c.name for c in coords)})",
                           field="bounds")
        vals = number_list(pair, field, positive=coords[j].log)
        if len(vals) != 2 or not vals[0] < vals[1]:
            raise FitError(f"{field} = {_fmt(list(pair))}: must be [low, high] with low < high", field="bounds")
        lo[j], hi[j] = (coords[j].coordinate(v) for v in vals)
    U = np.zeros((n, len(coords)))
    if n > 1:
        U[1:] = lo + (hi - lo) * _halton(n - 1, len(coords))
    return U


def _check_reach(problem: ModalResiduals, coords, m_init: Modes, ft, idx, boundary: AbstractBoundary) -> None:
    """Refuse a target outside what the free stiffnesses can reach (the others fixed)."""
    k_idx = [j for j, c in enumerate(coords) if c.field == "k"]
    shift = np.zeros(len(coords))
    shift[k_idx] = math.log(_REACH_SCALE)
    # (the residuals' own modes program: the reference point changes effective masses only, not frequencies)
    lo = np.sort(np.asarray(target_modes(problem, problem.at(jnp.asarray(-shift))).natural_frequency_hz))
    hi = np.sort(np.asarray(target_modes(problem, problem.at(jnp.asarray(shift))).natural_frequency_hz))
    free_k = ", ".join(coords[j].name for j in k_idx)
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
        raise FitError(f"target {i + 1} = {_fmt_hz(ft[i])} ({boundary.name} boundary) is out of reach: {why}. Mode "
                       f"{j + 1} is dominated by {dom} ({100 * ef.max():.0f} % of its kinetic energy); free the "
                       "stiffness of the part that dominates it, or check the target", field="targets_hz")


def _fmt_hz(x: float) -> str:
    return f"{x:.6g} Hz"


def pair_macs(problem: ModalResiduals, u) -> np.ndarray:
    """The mode-shape MAC of each FEA-model pair at coordinates `u`."""
    model = problem.at(jnp.asarray(u))
    m = target_modes(problem, model)
    idx = np.asarray(problem.index(m))
    return np.asarray(mac(problem.shape_fe, problem.shape_vectors(m, model)))[np.arange(len(idx)), idx]


def _unit_rows(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)


def target_modes(problem: ModalResiduals, model: Scenario) -> Modes:
    """The modes the targets refer to (`ModalResiduals.modes_at`), compiled: `modes` or `closed_loop_modes`."""
    ref = problem.reference_point
    return modes(model, problem.boundary, ref) if problem.loop is None else closed_loop_modes(model, ref)
