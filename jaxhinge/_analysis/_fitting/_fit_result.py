"""The outcome of a modal fit: the reported solution and every distinct parameter set of the multi-start search
that reaches the targets (`pick_solutions`), and the `FitResult` with its errors, covariance, identifiability,
FEA pairing and status in words (`fit_result`)."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from .._linear._measure import ModeMeasurement
from .._linear._modes import Modes, relabel
from ._fit_problem import Problem, pair_macs, target_modes
from ._fit_targets import Targets
from ._lsq_analysis import LeastSquaresResult, analyse, common_fields, to_numpy
from ._lsq_solver import FAIL
from ._pairing import model_shape_matrix, pairing_table, shape_mac

_SAME = 1e-5  # two solutions closer than this in every fitted coordinate (log-ratio or scale units) are one


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitResult(LeastSquaresResult):
    """The outcome of `fit`: the fields every fit shares (`LeastSquaresResult`: `names`, `values`, `sigma`,
    `initial`, `units`, `covariance`, `correlation`, `chi2`, `cost`, `dof`, `converged`, `status`, `message`,
    `iterations`, the identifiability report, the fitted `scenario`, `history`, `wall_s`, `solve_s`, ...) and:

    - `modes`, `initial_modes`: the modes of the fitted and of the initial model.
    - `targets_hz`, `damping_targets` (empty if none), `mode_numbers` (1-based, matched modes).
    - `frequency_error`, `damping_error`: relative model-minus-target errors at the solution.
    - `residuals`: the weighted residual vector (frequencies, then damping ratios).
    - `targets_reached`: every error below `reach_rtol` (damping: `100 * reach_rtol`); `boundary`.
    - `check`: the `ModeMeasurement` of the fitted model (`None` if not requested).
    - `pairing`: with FEA modes, one entry per pair (`pair_modes`): FEA mode number and frequency, model mode,
      initial and fitted model frequency, MAC at the start and at the solution, FEA and fitted model effective
      masses; `None` without FEA modes.
    - `warnings`: what the user should know about the inputs (free-free FEA modes that carry effective mass:
      `unclean_free_modes`); the CLI prints each as a warning and `result.json` lists them.
    - `solutions`: every distinct parameter set the multi-start search (`starts`) found that reaches the targets,
      the reported one first; each a dict: `values` (name -> value [unit]), `start` (index of the start it came
      from, 0 = the initial guess), `initial` (that start's values), `steps`, `cost`, `frequency_error` (largest
      relative), `mac` (the paired modes' mode-shape MAC, where shapes are given). Empty when none does.
      `ambiguous`: more than one.
    - `mac_matrix`: with mode shapes (`shapes`), the MAC of every FEA mode read (rows, `fea.mode_numbers`)
      against every model mode at the solution (columns), the FEA mode numbers in `mac_fea_modes`; else None.
    """

    modes: Modes
    initial_modes: Modes
    targets_hz: np.ndarray
    damping_targets: np.ndarray
    mode_numbers: tuple[int, ...]
    frequency_error: np.ndarray
    damping_error: np.ndarray
    residuals: np.ndarray
    targets_reached: bool
    boundary: str
    check: ModeMeasurement | None = None
    pairing: list[dict] | None = None
    warnings: tuple[str, ...] = ()
    solutions: tuple[dict, ...] = ()
    mac_matrix: np.ndarray | None = None
    mac_fea_modes: tuple[int, ...] = ()

    @property
    def ambiguous(self) -> bool:
        """Several distinct parameter sets reach the targets (`solutions`): the data cannot tell them apart."""
        return len(self.solutions) > 1


def pick_solutions(sols, pb: Problem, tg: Targets, frequency_sigma, damping_sigma, reach_rtol, ident_rtol):
    """The reported solution and every distinct parameter set that reaches the targets (`FitResult.solutions`).
    A start reaches them when it converged with every frequency error within `reach_rtol` (damping: 100 x), a
    Jacobian of full rank (a continuum of solutions along an undetermined direction is the identifiability
    report's, not a list of points) and, with mode shapes, a MAC of every pair of at least `ShapeMap.mac_min`.
    The start from the initial guess is reported when it reaches the targets, else the reaching start of lowest
    cost, else the initial guess's. Points within `_SAME` of each other are one."""
    nf, nz = len(tg.ft), len(tg.zt)
    coords = pb.coords

    def reaches_values(s) -> bool:
        r = np.asarray(s.residuals)
        if not (s.converged and np.all(np.isfinite(r)) and np.all(r != FAIL)):
            return False
        ok = np.all(np.abs(r[:nf]) * frequency_sigma <= reach_rtol) and \
            np.all(np.abs(r[nf:nf + nz]) * damping_sigma <= 100 * reach_rtol)
        sv = np.linalg.svd(np.asarray(s.jacobian), compute_uv=False)
        return bool(ok and len(sv) and sv[-1] > ident_rtol * sv[0])

    def distinct(indices) -> list[int]:
        groups: list[int] = []
        for i in indices:
            if all(np.max(np.abs(sols[i].u - sols[g].u)) > _SAME for g in groups):
                groups.append(i)
        return groups

    values_ok = [i for i, s in enumerate(sols) if reaches_values(s)]
    macs = {i: pair_macs(pb.problem, sols[i].u) for i in values_ok} if tg.shape_map is not None else {}
    good = [i for i in values_ok if tg.shape_map is None or np.min(macs[i]) >= tg.shape_map.mac_min]
    notes = []
    say = lambda i: ", ".join(f"{c.name} = {float(c.value(sols[i].u[j])):.6g}" for j, c in enumerate(coords))
    rejected = distinct([i for i in values_ok if i not in good])
    if rejected:
        notes.append("rejected by the mode shapes (every target frequency reached, but a paired mode's shape MAC "
                     f"below mac_min = {tg.shape_map.mac_min:g}): " + "; ".join(
                         f"{say(i)} (MAC {', '.join(f'{x:.3f}' for x in macs[i])})" for i in rejected))
    if not good:
        return sols[0], [], notes
    first = 0 if 0 in good else min(good, key=lambda i: sols[i].chi2)
    if first != 0:
        why = "its mode shapes do not match" if 0 in values_ok else f"status {sols[0].status}"
        notes.insert(0, f"the solver's run from the initial guess did not reach the targets ({why}); start "
                     f"{first} of the multi-start search did, and is reported")
    groups = distinct([first] + sorted((i for i in good if i != first), key=lambda i: sols[i].chi2))
    out = []
    for i in groups:
        s = sols[i]
        out.append({
            "values": {c.name: float(c.value(s.u[j])) for j, c in enumerate(coords)},
            "start": i, "initial": {c.name: float(c.value(pb.starts[i, j])) for j, c in enumerate(coords)},
            "steps": int(s.steps), "cost": 0.5 * s.chi2,
            "frequency_error": float(np.max(np.abs(np.asarray(s.residuals)[:nf])) * frequency_sigma),
            "mac": None if tg.shape_map is None else macs[i].tolist(),
        })
    return sols[first], out, notes


def fit_result(scenario, tg: Targets, pb: Problem, sol, fitted, measured, options, boundary, reach_rtol,
               ident_rtol, warn_rtol, wall) -> FitResult:
    """The `FitResult`: the fitted modes, errors, covariance and identifiability, pairing, and the status in
    words."""
    sc, coords, problem, m_init, ft, zt, fea = (scenario.spacecraft, pb.coords, pb.problem, pb.m_init, tg.ft,
                                                tg.zt, tg.fea)
    notes, n_par, n_res = list(pb.notes), len(pb.coords), pb.n_res
    r, J = sol.residuals, sol.jacobian
    m_fit = to_numpy(relabel(target_modes(problem, problem.at(jnp.asarray(sol.u))), sc))
    converged = sol.converged and bool(np.all(np.isfinite(m_fit.frequency_hz)) and np.all(r != FAIL))
    idx = tuple(int(j) for j in np.asarray(problem.index(m_fit)))
    f_fit = np.asarray(m_fit.frequency_hz)[list(idx)]
    ferr = (f_fit - ft) / ft
    derr = (np.asarray(m_fit.damping_ratio)[list(idx)] - zt) / zt if len(zt) else np.zeros(0)
    a = analyse(J, r, coords, ident_rtol=ident_rtol, warn_rtol=warn_rtol, s2_floor=1.0)
    if a.dof > 0:
        sigma_note = (f"Gauss-Newton covariance (J^T J)^-1 of the weighted residuals (target uncertainties "
                      f"propagated), scaled by max(1, chi^2/dof) = {a.s2:.3g} (dof = {a.dof})")
    else:
        sigma_note = ("Gauss-Newton covariance (J^T J)^-1 of the weighted residuals: the stated target uncertainties "
                      "(frequency_sigma, damping_sigma) propagated to the parameters (as many targets as parameters, "
                      "so the fit itself gives no scatter estimate)")
    values = np.array([c.value(sol.u[j]) for j, c in enumerate(coords)], dtype=float)
    sigma = a.sigma(coords, values)
    reached = bool(np.all(np.abs(ferr) <= reach_rtol) and np.all(np.abs(derr) <= 100 * reach_rtol))
    poor = [f"{c.name} is poorly determined by these targets (sigma = {100 * sigma[j] / abs(values[j]):.0f} % of "
            "its value): tie it to a similar parameter or add targets"
            for j, c in enumerate(coords) if c.log and np.isfinite(sigma[j]) and sigma[j] > 0.5 * abs(values[j])]
    pairing = mac_matrix = None
    mac_modes: tuple[int, ...] = ()
    if fea is not None:
        shp = None if tg.shape_map is None else (
            tg.shape_fe, model_shape_matrix(problem.at(jnp.zeros(n_par)).spacecraft, tg.shape_map),
            model_shape_matrix(problem.at(jnp.asarray(sol.u)).spacecraft, tg.shape_map))
        pairing, swapped = pairing_table(fea, tg.pairs0, list(idx), m_init, m_fit, auto=not tg.by_hand,
                                          shapes=shp)
        if shp is not None:
            mac_matrix = np.asarray(shape_mac(shp[0], m_fit, shp[2]))
            mac_modes = tuple(int(x) for x in fea.mode_numbers)
        notes += swapped
        if len(set(idx)) < len(idx):
            notes.append(f"two FEA modes ended up paired with one model mode ({[j + 1 for j in idx]}): fix the "
                         "pairing with mode_numbers and fea_modes")
    message = _message(converged, reached, sol.status, sol.steps, ferr, derr,
                       [d["description"] for d in a.undetermined], notes, n_par, n_res, J, r, poor)

    return FitResult(
        **common_fields(coords, sol.u, a, sigma_note=sigma_note, converged=converged, status=sol.status,
                        message=message, iterations=sol.steps, scenario=fitted, solver=options["solver"], options=options,
                        history=sol.history, wall_s=wall, solve_s=sol.wall_s),
        modes=m_fit,
        initial_modes=m_init,
        targets_hz=ft,
        damping_targets=zt,
        mode_numbers=tuple(j + 1 for j in idx),
        frequency_error=ferr,
        damping_error=derr,
        residuals=r,
        targets_reached=reached,
        boundary=boundary,
        check=measured,
        pairing=pairing,
        warnings=tg.warnings,
        mac_matrix=mac_matrix,
        mac_fea_modes=mac_modes,
    )


def _message(converged, reached, status, steps, ferr, derr, undetermined, notes, n_par, n_res, J, r, poor) -> str:
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
        why = {"max_steps_reached": f"it used all {steps} allowed steps (raise max_steps)",
               "nonlinear_max_steps_reached": f"it used all {steps} allowed steps (raise max_steps)"}.get(
            status, f"the solver stopped with status {status!r}")
        parts.append(f"did NOT converge: {why}; the values written are the last iterate, not a solution "
                     f"(largest relative error: frequency {worst_f:.2e}"
                     + (f", damping ratio {worst_z:.2e})" if len(derr) else ")"))
    for u in undetermined:
        parts.append(f"not determined by these targets: {u}")
    parts += poor
    parts += notes
    return "; ".join(parts)
