"""`MRPSwitch`: a diffrax solver wrapper doing Basilisk's MRP shadow switch, for the adaptive integrators.

After every accepted step it maps $\\sigma_{BN}$ to its shadow set when $|\\sigma| > 1$ (as Basilisk's
`HubEffector::modifyStates`). After a switch, FSAL solvers re-evaluate their first stage (the cached derivative
belongs to the unswitched $\\sigma$). Dense output is left in the step's own (unswitched) coordinates, which keeps
interpolation consistent within a step; outputs are mapped to $|\\sigma| \\le 1$ afterwards. (The fixed-step rk4
integrator is not a diffrax solver: it is the `lax.scan` of `_simulate.py`.)
"""

import diffrax
import equinox as eqx
import jax.numpy as jnp

from .._math import mrp_shadow


class MRPSwitch(diffrax.AbstractWrappedSolver):
    """Wraps `solver`; shadow-switches the MRP after each step."""

    solver: diffrax.AbstractSolver

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
        y1, y_error, dense_info, inner_state, result = self.solver.step(
            terms, t0, t1, y0, args, inner_state, made_jump | switched_before
        )
        sigma = y1.sigma_BN
        switched = jnp.sum(sigma * sigma) > 1.0
        y1 = eqx.tree_at(lambda y: y.sigma_BN, y1, mrp_shadow(sigma))
        return y1, y_error, dense_info, (inner_state, switched), result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)
