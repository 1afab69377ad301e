"""diffrax solvers for jaxhinge: Basilisk's RK4 and a wrapper doing Basilisk's MRP shadow switch.

- `RK4`: the classic 4-stage Runge-Kutta with Basilisk's tableau (`svIntegratorRK4`), as a
  `diffrax.AbstractERK`. diffrax has no RK4 class of its own.
- `MRPSwitch`: wraps any diffrax solver; after every accepted step it maps $\\sigma_{BN}$ to its shadow set
  when $|\\sigma| > 1$ (as Basilisk's `HubEffector::modifyStates`), and it tells the vector field the step's
  start time so loads can be zero-order held over the step (`zoh=True`, Basilisk's task-rate semantics).
  After a switch, FSAL solvers re-evaluate their first stage (the cached derivative belongs to the
  unswitched $\\sigma$). Dense output is left in the step's own (unswitched) coordinates, which keeps
  interpolation consistent within a step; outputs are mapped to $|\\sigma| \\le 1$ afterwards.
"""

from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._math import mrp_shadow

_rk4_tableau = diffrax.ButcherTableau(
    a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    b_error=np.zeros(4),
    c=np.array([0.5, 0.5, 1.0]),
)


class RK4(diffrax.AbstractERK):
    """Classic fourth-order Runge-Kutta (Basilisk's `svIntegratorRK4`): $a_{21}=a_{32}=1/2$, $a_{43}=1$,
    $b = [1/6, 1/3, 1/3, 1/6]$. Fixed step only (no error estimate); third-order Hermite dense output."""

    tableau: ClassVar[diffrax.ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar[Callable[..., diffrax.ThirdOrderHermitePolynomialInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        del terms
        return 4


class MRPSwitch(diffrax.AbstractWrappedSolver):
    """Wraps `solver`; shadow-switches the MRP after each step; optionally zero-order-holds loads.

    `args` must be a tuple whose last element is `t_hold`: `None` as given to `diffeqsolve`; with `zoh` the
    wrapper replaces it by the step's start time, at which the vector field then evaluates loads.
    """

    solver: diffrax.AbstractSolver
    zoh: bool = eqx.field(static=True, default=False)

    @property
    def scan_kind(self):
        # diffrax's adjoints set `scan_kind` on Runge-Kutta solvers (and see through wrappers); the inner
        # solver is built with it already set (see `_simulate._solve`).
        return self.solver.scan_kind

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args), jnp.array(False)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner_state, switched_before = solver_state
        step_args = args[:-1] + (t0,) if self.zoh else args
        y1, y_error, dense_info, inner_state, result = self.solver.step(
            terms, t0, t1, y0, step_args, inner_state, made_jump | switched_before
        )
        sigma = y1.sigma_BN
        switched = jnp.sum(sigma * sigma) > 1.0
        y1 = eqx.tree_at(lambda y: y.sigma_BN, y1, mrp_shadow(sigma))
        return y1, y_error, dense_info, (inner_state, switched), result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)
