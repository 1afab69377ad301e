"""The least-squares core (`jaxhinge._analysis._fitting._lsq_coords`, `_lsq_solver`, `_lsq_analysis`), against references: the solver's Jacobian against
`jax.jacfwd` of the plain residuals; the covariance and solution of a linear least-squares problem against
the normal equations; an exactly rank-deficient Jacobian named by the identifiability report; coordinates
(log, linear, tied) against the values they write into a scenario.

Cheap on purpose: the residuals are closed-form functions of scenario parameters (no simulation, no modes),
so the file compiles a few small programs only."""

import math
import os
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh
from _helpers import LSQ as L
from jaxhinge._model._params import current_value
from jaxhinge._model._spacecraft import strip_labels

SCENARIO = os.path.join(DATA, "telemetry", "random3d_2p.toml")


@pytest.fixture(scope="module")
def scenario():
    return jh.load_scenario(SCENARIO)


def _coord(name, log=False, x0=0.0, scale=1.0):
    return L.Coordinate(name=name, targets=(), log=log, x0=x0, scale=scale, field="x", unit="1")


# ------------------------------------------------------------------------------------------------------------
# Coordinates
# ------------------------------------------------------------------------------------------------------------


FREE = ["p0.k", "p1.c = p0.c", "p0.thetaInit", "hub.omega_BN_BInit", "p1.IPntS_S[3]", "hub.mHub"]


def test_coordinates_round_trip(scenario):
    """u -> values written into the scenario -> coordinates read back: the identity, for log-ratio (k, mHub,
    tied c, an inertia factor) and linear (an angle, a vector's 3 components) coordinates."""
    c = L.parse_free(scenario, FREE)
    assert [x.name for x in c] == ["p0.k", "p1.c=p0.c", "p0.thetaInit", "hub.omega_BN_BInit[1]",
                                   "hub.omega_BN_BInit[2]", "hub.omega_BN_BInit[3]", "p1.IPntS_S[3]", "hub.mHub"]
    assert [x.log for x in c] == [True, True, False, False, False, False, True, True]
    assert c[1].members == ("p1.c", "p0.c")
    c0 = [float(current_value(scenario, n)) for n in ("p0.c", "p1.c")]
    assert c[1].x0 == pytest.approx(math.sqrt(c0[0] * c0[1]), rel=1e-15)  # tied log: geometric mean
    assert c[3].scale == jh.FIELDS["omega_BN_BInit"].scale and c[2].scale == jh.FIELDS["thetaInit"].scale
    u = np.random.default_rng(0).uniform(-0.5, 0.5, len(c))
    s2 = L.apply_coordinates(scenario, c, u)
    for j, x in enumerate(c):
        if x.field == "IPntS_S":  # a scale factor of the inertia: the diagonal entry scales by it
            I0, I1 = (np.asarray(s.spacecraft.panels.IPntS_S[1])[2, 2] for s in (scenario, s2))
            back = x.coordinate(I1 / I0)
        else:
            vals = [float(current_value(s2, m)) for m in x.members]
            assert all(v == vals[0] for v in vals)  # every member of a tie gets the one value
            back = x.coordinate(vals[0])
        assert back == pytest.approx(u[j], abs=1e-12), x.name
    # the compiled form applies the same values
    np.testing.assert_allclose(L.Coordinates(c).values(jnp.asarray(u)), [x.value(u[j]) for j, x in enumerate(c)],
                               rtol=1e-15)


@pytest.mark.parametrize("free, words", [
    (["p0.k = p1.c"], "cannot tie p0.k [N m/rad] to p1.c [N m s/rad]: only the same field"),
    (["p0.k", "p1.k = p0.k"], "free[1] = 'p1.k = p0.k': p0.k is already free in free[0]"),
    (["hub.omega_BN_BInit[2]", "hub.omega_BN_BInit"], "hub.omega_BN_BInit[2] is already free in free[0]"),
    (["p0.kk"], "free[0] = 'p0.kk': unknown field 'kk' (did you mean 'k'?)"),
    ("p0.k", "must be a non-empty list"),
])
def test_bad_free_lists(scenario, free, words):
    with pytest.raises(jh.FitError, match=re.escape(words)) as e:
        L.parse_free(scenario, free)
    assert "\n" not in str(e.value) and e.value.field.startswith("free")


def test_seed_for_a_positive_parameter_at_zero(scenario):
    """A positive field at 0 cannot start a log-ratio: refused, unless `seed` gives a start."""
    sc = jh.apply_parameters(scenario, {"p0.c": 0.0})
    with pytest.raises(jh.FitError, match=r"p0.c = 0 must start > 0 \(it is fitted in log space\)"):
        L.parse_free(sc, ["p0.c"])
    (c,) = L.parse_free(sc, ["p0.c"], seed=lambda par: 2.5 if par.name == "p0.c" else None)
    assert c.x0 == 2.5 and c.log


# ------------------------------------------------------------------------------------------------------------
# Residuals and Jacobian
# ------------------------------------------------------------------------------------------------------------


class _Toy(L.AbstractResiduals):
    """Closed-form nonlinear residuals of scenario parameters (products, a log, a sine)."""

    scenario: jh.Scenario
    coordinates: L.Coordinates
    data: jax.Array
    fail: jax.Array  # True: the evaluation reports failure

    def __call__(self, u):
        s = self.coordinates.apply(self.scenario, u)
        p, w = s.spacecraft.panels, s.initial.omega_BN_BInit
        y = jnp.stack([p.k[0] * p.c[1] / 100.0, jnp.log(p.c[0]) * w[1], jnp.sin(s.initial.thetaInit[0]) + w[0] * w[2],
                       p.IPntS_S[1, 2, 2] * s.spacecraft.hub.mHub / 1e4, w[0] - w[1]])
        return y - self.data, ~self.fail, y


@pytest.fixture(scope="module")
def toy(scenario):
    c = L.parse_free(scenario, FREE)
    return _Toy(jh.Scenario(strip_labels(scenario.spacecraft), scenario.initial),
                L.Coordinates(c), jnp.arange(5.0), jnp.asarray(False)), c


def test_solver_jacobian_equals_jacfwd_of_the_plain_residuals(toy):
    """The Jacobian the solver sees (the custom JVP of `_residuals_lm`, one Jacobian per point), in forward
    mode (LM) and reverse mode (the optax minimisers), the one it keeps at its last point and the one
    `evaluate` reports all equal `jax.jacfwd` of the plain residuals (float resolution)."""
    problem, c = toy
    jacfwd = eqx.filter_jit(jax.jacfwd(lambda v, p: p(v)[0]))
    u = jnp.asarray(np.random.default_rng(1).uniform(-0.3, 0.3, len(c)))
    ref = jacfwd(u, problem)
    assert np.max(np.abs(np.asarray(ref))) > 0.1
    lm = L._residuals_lm
    both = eqx.filter_jit(lambda v, p: (jax.jacfwd(lm)(v, p), jax.jacrev(lm)(v, p)))
    for J in (*both(u, problem), L.evaluate(u, problem).jacobian):
        np.testing.assert_allclose(J, ref, rtol=1e-14, atol=1e-14)
    sol = L.solve(problem, u, jh.LevenbergMarquardt(rtol=1e-10, atol=1e-10).optimiser(), max_steps=5)
    np.testing.assert_allclose(sol.jacobian, jacfwd(jnp.asarray(sol.u), problem), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(sol.residuals, problem(jnp.asarray(sol.u))[0], rtol=1e-14, atol=1e-14)


def test_failed_evaluation_gives_large_residuals_and_zero_jacobian(toy):
    problem, c = toy
    bad = type(problem)(problem.scenario, problem.coordinates, problem.data, jnp.asarray(True))
    ev = L.evaluate(jnp.zeros(len(c)), bad)
    assert not bool(ev.ok)
    np.testing.assert_array_equal(ev.residuals, L.FAIL)
    np.testing.assert_array_equal(ev.jacobian, 0.0)


# ------------------------------------------------------------------------------------------------------------
# A linear least-squares problem with a known answer
# ------------------------------------------------------------------------------------------------------------


class _Linear(L.AbstractResiduals):
    A: jax.Array
    y: jax.Array

    def __call__(self, u):
        return self.A @ u - self.y, jnp.asarray(True), None


def test_linear_least_squares_solution_and_covariance():
    """r = A u - y: LM reaches the normal-equation solution, and the covariance is s^2 (A^T A)^-1 with
    s^2 = r^T r / (n - p); sigmas of log coordinates scale by the value."""
    rng = np.random.default_rng(2)
    n, p = 30, 3
    A = rng.normal(size=(n, p)) * [1.0, 10.0, 0.1]
    y = A @ np.array([0.3, -0.2, 1.5]) + 0.05 * rng.normal(size=n)
    sol = L.solve(_Linear(jnp.asarray(A), jnp.asarray(y)), np.zeros(p), jh.LevenbergMarquardt(rtol=1e-12, atol=1e-12).optimiser(),
                  max_steps=50)
    u_ref, *_ = np.linalg.lstsq(A, y, rcond=None)
    r_ref = A @ u_ref - y
    assert sol.converged and sol.steps < 20
    np.testing.assert_allclose(sol.u, u_ref, rtol=1e-9)
    assert sol.chi2 == pytest.approx(r_ref @ r_ref, rel=1e-12)
    assert len(sol.history) == sol.steps and sol.history[-1] <= sol.history[0]
    # progress between compiled chunks (`every=0`: one step per chunk, a line after each): "step N, cost C" with
    # C the cost history's N-th entry, which is the accepted point's 1/2 sum r^2 (the last one: at the solution)
    lines = []
    again = L.solve(_Linear(jnp.asarray(A), jnp.asarray(y)), np.zeros(p), jh.LevenbergMarquardt(rtol=1e-12, atol=1e-12).optimiser(),
                    max_steps=50, progress=lines.append, every=0.0)
    assert [int(x.split(",")[0].split()[1]) for x in lines] == list(range(1, again.steps + 1))
    np.testing.assert_allclose([float(x.split("cost ")[1]) for x in lines], again.history, rtol=1e-6)
    assert again.history[-1] == pytest.approx(0.5 * sol.chi2, rel=1e-12)
    np.testing.assert_array_equal(again.u, sol.u)

    coords = [_coord("a"), _coord("b", log=True, x0=2.0), _coord("c", scale=0.5)]
    a = L.analyse(A, r_ref, coords)
    s2 = (r_ref @ r_ref) / (n - p)
    cov = s2 * np.linalg.inv(A.T @ A)
    assert a.dof == n - p and a.s2 == pytest.approx(s2, rel=1e-14)
    np.testing.assert_allclose(a.covariance, cov, rtol=1e-10)
    np.testing.assert_allclose(a.sigma_u, np.sqrt(np.diag(cov)), rtol=1e-10)
    d = np.sqrt(np.diag(cov))
    np.testing.assert_allclose(a.correlation, cov / np.outer(d, d), rtol=1e-9, atol=1e-14)
    values = np.array([0.3, 2.0 * math.exp(-0.2), 1.5])
    np.testing.assert_allclose(a.sigma(coords, values), [d[0], values[1] * d[1], 0.5 * d[2]], rtol=1e-10)
    assert not a.undetermined and not a.poorly_determined
    assert a.condition_number == pytest.approx(np.linalg.cond(A / np.linalg.norm(A, axis=0)) ** 2, rel=1e-8)
    # the stated uncertainties as a floor (the modal fit): s^2 = max(1, chi^2/dof) = 1 here
    assert L.analyse(A, r_ref, coords, s2_floor=1.0).s2 == 1.0


def test_identifiability_names_an_exactly_rank_deficient_combination():
    """Column 3 equals column 1: u1 - u3 leaves the residuals unchanged. The report names that combination
    (and only it), gives both parameters sigma = inf, and keeps the determined one finite."""
    rng = np.random.default_rng(3)
    a, b, e = rng.normal(size=(3, 12))
    J = np.stack([a, b, a], axis=1)
    r = 0.1 * rng.normal(size=12)
    coords = [_coord("p0.k", log=True, x0=1.0), _coord("hub.mHub", log=True, x0=1.0), _coord("p1.k", log=True, x0=1.0)]
    res = L.analyse(J, r, coords)
    (item,) = res.undetermined
    assert set(item["coefficients"]) == {"p0.k", "p1.k"}
    assert item["coefficients"]["p0.k"] * item["coefficients"]["p1.k"] < 0
    assert item["ratio"] < 1e-12
    assert item["combination"] in ("+1.00 log(p0.k) -1.00 log(p1.k)", "+1.00 log(p1.k) -1.00 log(p0.k)")
    assert "equal and opposite relative changes (ratio 1) are not seen in the data" in item["description"]
    assert np.isinf(res.sigma_u[[0, 2]]).all() and np.isfinite(res.sigma_u[1])
    assert res.condition_number == np.inf or res.condition_number > 1e24
    assert not res.poorly_determined
    # nearly equal columns (an independent 1e-3 difference): poorly determined, not undetermined
    near = L.analyse(np.stack([a, b, a + 1e-3 * e], axis=1), r, coords)
    assert not near.undetermined and len(near.poorly_determined) == 1
    assert np.all(np.isfinite(near.sigma_u))


def test_component_index_is_one_based_in_every_entry_point():
    """Issue 14 item 4: `hub.omega_BN_BInit[1]` is the x component (about b1) in a sensitivity study, a fit's
    free list and `apply_parameters` alike (it used to be y in SENS.toml and x in FIT.toml), and
    `[0]` is refused everywhere, naming the allowed indices."""
    from jaxhinge._analysis._studies._sensitivity import parse_parameters
    from jaxhinge._errors import ParameterError

    sc = jh.apply_parameters(jh.load_scenario(jh.example_path("two_panel.toml")),
                             {"hub.omega_BN_BInit": jnp.array([0.11, -0.22, 0.33])})
    name = "hub.omega_BN_BInit[1]"
    # sensitivity: the differentiated scalar
    (par,) = parse_parameters(sc, [name])
    assert float(current_value(sc, par)) == 0.11
    # fit: the coordinate's value at the initial guess
    (coord,) = L.parse_free(sc, [name])
    assert coord.name == name and float(coord.value(0.0)) == 0.11
    # the API (and sweeps, whose members are applied with it; a dispersion names the whole vector)
    np.testing.assert_array_equal(np.asarray(jh.apply_parameters(sc, {name: 0.5}).initial.omega_BN_BInit),
                                  [0.5, -0.22, 0.33])
    for refuse in (lambda: parse_parameters(sc, ["hub.omega_BN_BInit[0]"]),
                   lambda: L.parse_free(sc, ["hub.omega_BN_BInit[0]"]),
                   lambda: jh.apply_parameters(sc, {"hub.omega_BN_BInit[0]": 0.5})):
        with pytest.raises((ParameterError, ValueError)) as e:
            refuse()
        assert "hub.omega_BN_BInit[0]" in str(e.value) and "[1]" in str(e.value), str(e.value)
