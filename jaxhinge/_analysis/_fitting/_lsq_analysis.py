r"""Covariance, identifiability and the result every fit shares.

At the solution, with $J$ the Jacobian in the fitted coordinates, $D$ its column norms and $J D^{-1} = U S V^T$
(`analyse`):

- $s^2 = \max(s^2_{floor},\ \chi^2/\mathrm{dof})$ when $\mathrm{dof} = n - P > 0$, else 1
  ($s^2_{floor} = 0$: the scatter of the data; $1$: the stated uncertainties as a floor);
- $\mathrm{cov}_u = s^2 (J^TJ)^{+}$, the pseudo-inverse restricted to the determined directions; the
  correlation matrix is that of $\mathrm{cov}_u$; parameter sigmas $\sigma_p = p\,\sigma_u$ (log) or
  $s\,\sigma_u$ (linear);
- singular-value ratios $S_k/S_1$ below `ident_rtol` mark combinations the data do not determine
  (`undetermined`, their parameters get `sigma = inf`), below `warn_rtol` poorly determined ones; each is
  reported by name, e.g. `+1.00 log(p0.k) -1.00 log(p1.k)`; `condition_number` is
  $\mathrm{cond}(D^{-1}J^TJD^{-1}) = (S_1/S_P)^2$.

`LeastSquaresResult`: the fields every fit shares; `FitResult` and `IdentifyResult` add their own.
"""


import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jaxtyping import ArrayLike, Float

from ..._model._scenario import Scenario
from ._lsq_coords import Coordinate

# ------------------------------------------------------------------------------------------------------------
# Covariance and identifiability
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Analysis:
    """`analyse`'s outcome: `chi2` ($\\sum r^2$), `dof` (n - P), `s2` (the residual variance used),
    `covariance` (P, P) in the fitted coordinates, `sigma_u` (P,) their sigmas (`inf`: undetermined),
    `correlation` (P, P; NaN rows for undetermined coordinates), `condition_number`, `singular_values`
    (relative, descending), `undetermined` / `poorly_determined` (lists of `{"combination", "coefficients",
    "ratio", "description"}`)."""

    chi2: float
    dof: int
    s2: float
    covariance: np.ndarray
    sigma_u: np.ndarray
    correlation: np.ndarray
    condition_number: float
    singular_values: np.ndarray
    undetermined: list
    poorly_determined: list

    def sigma(self, coords: Sequence[Coordinate], values: np.ndarray) -> np.ndarray:
        """Parameter sigmas [their units]: $p\\,\\sigma_u$ (log coordinates) or $s\\,\\sigma_u$ (linear)."""
        return np.abs(np.array([values[j] * self.sigma_u[j] if c.log else c.scale * self.sigma_u[j]
                                for j, c in enumerate(coords)], dtype=float).reshape(len(coords)))


def _combination(v: np.ndarray, coords: Sequence[Coordinate], seen: str) -> tuple[str, dict, str]:
    v = v / np.max(np.abs(v))
    keep = [j for j in np.argsort(-np.abs(v)) if abs(v[j]) >= 0.05]
    terms = " ".join(f"{v[j]:+.2f} {coords[j].label()}" for j in keep)
    coef = {coords[j].name: float(v[j]) for j in keep}
    if len(keep) == 1:
        desc = f"{coords[keep[0]].name} is {seen} in the data"
    elif len(keep) == 2:
        a, b = (coords[j].name for j in keep)
        same = v[keep[0]] * v[keep[1]] > 0
        what = "relative " if all(coords[j].log for j in keep) else ""
        desc = (f"{a} and {b}: {'changes of the same sign' if same else 'equal and opposite'} {what}changes "
                f"(ratio {abs(v[keep[1]] / v[keep[0]]):.2g}) are {seen} in the data")
    else:
        desc = f"the combination {terms} is {seen} in the data"
    return terms, coef, desc


def analyse(
    J: Float[ArrayLike, "n P"],
    r: Float[ArrayLike, " n"],
    coords: Sequence[Coordinate],
    *,
    ident_rtol: float = 1e-6,
    warn_rtol: float = 1e-2,
    s2_floor: float = 0.0,
) -> Analysis:
    """Gauss-Newton covariance and the identifiability report at a solution (module docstring).

    **Arguments:** `J` (n, P) the Jacobian of the weighted residuals `r` (n,) in the fitted coordinates of
    `coords`; `ident_rtol`, `warn_rtol` (singular-value ratios below which a combination is undetermined or
    poorly determined); `s2_floor` (the residual variance is $\\max(s^2_{floor}, \\chi^2/\\mathrm{dof})$).
    """
    J, r = np.asarray(J, dtype=float), np.asarray(r, dtype=float)
    n, p = J.shape
    chi2 = float(r @ r)
    dof = n - p
    s2 = max(float(s2_floor), chi2 / dof) if dof > 0 else 1.0
    norms = np.linalg.norm(J, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    _, sv, vt = np.linalg.svd(J / safe, full_matrices=False)
    if sv.size < p:  # fewer residuals than coordinates: the missing singular values are 0
        _, _, vt = np.linalg.svd(J / safe, full_matrices=True)
        sv = np.concatenate([sv, np.zeros(p - sv.size)])
    smax = sv[0] if sv.size and sv[0] > 0 else 1.0
    rel = sv / smax
    cond = float(np.inf if not rel.size or rel[-1] == 0 else (1.0 / rel[-1]) ** 2)
    bad = [k for k in range(p) if rel[k] < ident_rtol or norms[np.argmax(np.abs(vt[k]))] == 0]
    undetermined, poor = [], []
    for k in range(p):
        v = np.where(norms > 0, vt[k] / safe, vt[k])  # the direction in the fitted coordinates
        terms, coef, desc = _combination(v, coords, "not seen" if k in bad else "barely seen")
        item = {"combination": terms, "coefficients": coef, "ratio": float(rel[k]), "description": desc}
        if k in bad:
            undetermined.append(item)
        elif rel[k] < warn_rtol:
            poor.append(item)
    good = [k for k in range(p) if k not in bad]
    inv = (vt[good].T / sv[good] ** 2) @ vt[good] if good else np.zeros((p, p))
    cov = s2 * inv / safe[:, None] / safe[None, :]
    undet = np.zeros(p, bool)  # the coordinates taking part in an undetermined combination
    for k in bad:
        a = np.abs(vt[k])
        undet |= a >= 0.05 * a.max()
    d = np.sqrt(np.diag(cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / d[:, None] / d[None, :]
    corr = np.where(np.isfinite(corr) & ~np.logical_or.outer(undet, undet), corr, np.nan)
    np.fill_diagonal(corr, 1.0)
    return Analysis(chi2=chi2, dof=dof, s2=s2, covariance=cov, sigma_u=np.where(undet, np.inf, d),
                    correlation=corr, condition_number=cond, singular_values=rel, undetermined=undetermined,
                    poorly_determined=poor)


# ------------------------------------------------------------------------------------------------------------
# The common result
# ------------------------------------------------------------------------------------------------------------


def to_numpy(tree):
    """`tree` with its JAX arrays as NumPy arrays (results hold NumPy)."""
    return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, tree)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeastSquaresResult:
    """What every fit returns (NumPy; `FitResult` and `IdentifyResult` add their own fields).

    - `names`: the fitted coordinates (tied groups as `"a.k=b.k"`, vector components as `"hub.r_BcB_B[2]"`);
      `members`: the parameters each sets; `fields`, `units`: registry field and unit of each; `log`: fitted
      as a log-ratio (else linearly).
    - `values`, `sigma`, `initial`: fitted values, 1-sigma uncertainties (`inf`: not determined) and initial
      guesses [the units].
    - `covariance` (P, P) in the fitted coordinates $u$; `correlation` (P, P); `sigma_note`: the covariance's
      basis in words.
    - `chi2` ($\\sum r^2$ of the weighted residuals), `dof` (residuals - parameters), `chi2_per_dof` (NaN when
      dof <= 0); `cost` = `chi2` / 2.
    - `converged` (the solver's own test, and the model evaluated at the solution), `status` (optimistix
      result name), `message` (plain words), `iterations` (solver steps, all stages and starts).
    - `identifiable` (no undetermined combination), `well_posed` (none poorly determined either),
      `condition_number`, `singular_values` (relative), `undetermined`, `poorly_determined` (see `Analysis`).
    - `scenario`: the input scenario with the fitted values.
    - `solver`, `options` (the settings used), `history` (the cost per solver step), `wall_s` (the whole fit,
      compilation included), `solve_s` (the solver runs alone, compilation included).
    """

    names: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    fields: tuple[str, ...]
    units: tuple[str, ...]
    log: tuple[bool, ...]
    values: np.ndarray
    sigma: np.ndarray
    initial: np.ndarray
    covariance: np.ndarray
    correlation: np.ndarray
    sigma_note: str
    chi2: float
    dof: int
    chi2_per_dof: float
    converged: bool
    status: str
    message: str
    iterations: int
    identifiable: bool
    well_posed: bool
    condition_number: float
    singular_values: np.ndarray
    undetermined: list
    poorly_determined: list
    scenario: Scenario
    solver: str
    options: dict
    history: np.ndarray
    wall_s: float
    solve_s: float

    @property
    def cost(self) -> float:
        """$\\tfrac12\\sum r^2$ at the solution."""
        return 0.5 * self.chi2

    def parameter(self, name: str) -> tuple[float, float]:
        """`(value, sigma)` of one free parameter (`"p0.k"`), also when it is a member of a tied group."""
        for i, members in enumerate(self.members):
            if name == self.names[i] or name in members:
                return float(self.values[i]), float(self.sigma[i])
        raise KeyError(f"{name!r} is not a free parameter; free: {', '.join(self.names)}")


def common_fields(
    coords: Sequence[Coordinate],
    u: np.ndarray,
    a: Analysis,
    *,
    scenario: Scenario,
    history: np.ndarray,
    wall_s: float,
    solve_s: float,
    **settings: Any,
) -> dict[str, Any]:
    """The `LeastSquaresResult` fields of a fit at the coordinates `u` with the analysis `a` (keyword
    arguments for a result type). `settings`: the fields given as they are (`sigma_note`, `converged`,
    `status`, `message`, `iterations`, `solver`, `options`)."""
    values = np.array([float(c.value(u[j])) for j, c in enumerate(coords)], dtype=float).reshape(len(coords))
    return {
        "names": tuple(c.name for c in coords),
        "members": tuple(c.members for c in coords),
        "fields": tuple(c.field for c in coords),
        "units": tuple(c.unit for c in coords),
        "log": tuple(c.log for c in coords),
        "values": values,
        "sigma": a.sigma(coords, values),
        "initial": np.array([c.x0 for c in coords], dtype=float),
        "covariance": a.covariance,
        "correlation": a.correlation,
        "chi2": a.chi2,
        "dof": a.dof,
        "chi2_per_dof": a.chi2 / a.dof if a.dof > 0 else math.nan,
        "identifiable": not a.undetermined,
        "well_posed": not (a.undetermined or a.poorly_determined),
        "condition_number": a.condition_number,
        "singular_values": a.singular_values,
        "undetermined": a.undetermined,
        "poorly_determined": a.poorly_determined,
        "scenario": to_numpy(scenario),
        "history": np.asarray(history, dtype=float),
        "wall_s": float(wall_s),
        "solve_s": float(solve_s),
        **settings,
    }
