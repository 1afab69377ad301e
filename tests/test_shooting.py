"""Multiple shooting for long telemetry records (`identify(shooting=...)`, `jaxhinge._analysis._fitting._shooting`,
`_shooting_solve`) and the automatic integration step (`dt = "auto"`, `_fit_step`).

References: the dense normal equations and the dense chain rule (the block elimination and the condensing must
equal them); single shooting at the multiple-shooting solution (its Jacobian, its Gauss-Newton step, its sigmas:
the two formulations share no residual code); known parameters recovered from a noisy record.
"""

import dataclasses
import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
from _helpers import single_shooting_agrees
from conftest import DATA

import jaxhinge as jh
from jaxhinge._analysis._fitting import _identify as I
from jaxhinge._analysis._fitting import _segments as SEG
from jaxhinge._analysis._fitting import _shooting as MS
from jaxhinge._analysis._fitting import _shooting_solve as MSS
from jaxhinge._errors import FitError
from jaxhinge._jobs._identify import identify_arguments, load_identify
from jaxhinge._model._params import current_value

FREE = ["p0.k", "p1.k", "p0.c", "p1.c"]
COLS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_p0", "theta_p1"]
SIGMA = np.array([1e-5, 1e-5, 1e-5, 1e-4, 1e-4])


def _blocks(S=5, n=3, M=4, P=2, seed=0, R=1):
    """A random linearisation of R records of S segments each (n states, M residuals, P coordinates; the rows run
    record after record) and its dense Jacobian of the data and weighted-defect residuals over (z_0 .. z_{RS-1},
    u), with the residual vector: the defect into a record's first segment is from that record's initial state,
    and no defect joins two records."""
    rng = np.random.default_rng(seed)
    T = R * S
    lin = SEG.Linearisation(r=jnp.asarray(rng.normal(size=(T, M))), phi=jnp.asarray(rng.normal(size=(T, n))),
                            ok=jnp.ones(T, bool), A=jnp.asarray(rng.normal(size=(T, M, n))),
                            G=jnp.asarray(np.eye(n) + 0.3 * rng.normal(size=(T, n, n))),
                            B=jnp.asarray(rng.normal(size=(T, M, P))), H=jnp.asarray(rng.normal(size=(T, n, P))),
                            x0=jnp.asarray(rng.normal(size=(R, n))), X0=jnp.asarray(rng.normal(size=(R, n, P))))
    Z = jnp.asarray(rng.normal(size=(T, n)))
    c = jnp.asarray(rng.uniform(0.1, 2.0, size=n))
    N = T * n + P
    J, r = [], []
    for s in range(T):  # data residuals of segment s
        row = np.zeros((M, N))
        row[:, s * n:(s + 1) * n] = lin.A[s]
        row[:, T * n:] = lin.B[s]
        J.append(row)
        r.append(np.asarray(lin.r[s]))
    for s in range(T):  # the defect into segment s: (Phi_{s-1} - z_s) / c, or (x0 of its record - z_s) / c
        row = np.zeros((n, N))
        row[:, s * n:(s + 1) * n] = -np.eye(n)
        if s % S == 0:
            row[:, T * n:] = lin.X0[s // S]
            e = lin.x0[s // S] - Z[s]
        else:
            row[:, (s - 1) * n:s * n] = lin.G[s - 1]
            row[:, T * n:] = lin.H[s - 1]
            e = lin.phi[s - 1] - Z[s]
        J.append(row / np.asarray(c)[:, None])
        r.append(np.asarray(e / c))
    return lin, Z, c, np.concatenate(J), np.concatenate(r)


@pytest.mark.parametrize("R", [1, 3])
def test_block_elimination_equals_the_dense_normal_equations(R):
    """The Levenberg-Marquardt step by block elimination (`penalty_step`) is the dense solve of
    (J^T J + lam diag(J^T J)) delta = -J^T r over every unknown, to round-off, for one record and for three
    shot together."""
    lin, Z, c, J, r = _blocks(R=R)
    for lam in (0.0, 1e-3, 10.0):
        dZ, du, _ = MSS.penalty_step(lin, Z, c, jnp.asarray(lam))
        Nm = J.T @ J
        want = np.linalg.solve(Nm + lam * np.diag(np.diag(Nm)), -J.T @ r)
        got = np.concatenate([np.asarray(dZ).ravel(), np.asarray(du)])
        assert np.allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max()), np.abs(got - want).max()


@pytest.mark.parametrize("R", [1, 3])
def test_condensing_equals_the_chain_rule(R):
    """Condensing (continuity as linearised constraints): every delta z_s = a_s + S_s delta u, with S_s the product
    of the segments' transition matrices (the chain rule: single shooting's sensitivities), restarting from each
    record's initial state, and a_s the defects carried forward; the data residuals' Jacobian in u alone is
    A_s S_s + B_s."""
    S = 5
    lin, Z, _, _, _ = _blocks(S=S, seed=1, R=R)
    a, Sm, rt, Jt = (np.asarray(x) for x in MSS.condensed(lin, Z))
    S_want, a_want = [], []
    for s in range(Z.shape[0]):
        if s % S == 0:
            S_want.append(np.asarray(lin.X0[s // S]))
            a_want.append(np.asarray(lin.x0[s // S] - Z[s]))
        else:
            S_want.append(np.asarray(lin.G[s - 1]) @ S_want[-1] + np.asarray(lin.H[s - 1]))
            a_want.append(np.asarray(lin.phi[s - 1] - Z[s]) + np.asarray(lin.G[s - 1]) @ a_want[-1])
    assert np.allclose(Sm, S_want, rtol=1e-12, atol=1e-12) and np.allclose(a, a_want, rtol=1e-12, atol=1e-12)
    assert np.allclose(Jt, np.einsum("smn,snp->smp", lin.A, S_want) + lin.B, rtol=1e-12, atol=1e-12)
    assert np.allclose(rt, lin.r + np.einsum("smn,sn->sm", lin.A, a_want), rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def record():
    """A 20 s record of Basilisk's random 3-D two-panel configuration (tests/data/telemetry/random3d_2p.toml,
    the panels' own motor torques and references), gyro and hinge encoders every 50 ms with seeded noise; rk4 at
    10 ms, the truth simulated by jaxhinge (`simulate`, single shooting's own integration, not the segments')."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=20.0, save_dt=0.05, dt=0.01))
    traj = jh.simulate(sc)
    v = np.concatenate([np.asarray(traj.omega_BN_B), np.asarray(traj.theta)], axis=1)
    rng = np.random.default_rng(7)
    tel = jh.telemetry_from_arrays(np.asarray(traj.t), v + rng.normal(size=v.shape) * SIGMA, COLS, SIGMA, sc)
    truth = np.array([float(jnp.asarray(current_value(sc, n))) for n in FREE])
    guess = jh.apply_parameters(sc, dict(zip(FREE, truth * np.array([1.25, 0.72, 0.7, 1.3]))))
    return guess, tel, truth


@pytest.mark.slow
def test_multiple_shooting_recovers_the_parameters_and_equals_single_shooting_at_its_solution(record):
    """From 25-30 % off (7 segments of 3.25 s, one period of the guess's slowest mode): converged in <= 20 steps,
    the continuity defects at round-off (< 1e-8 of their sigma), the truth within 3 sigma; and at the solution
    single shooting (`simulate` through the whole record, forward mode: no code shared with the segments) agrees:
    its Jacobian equals the condensed one (1e-7, rk4 at one step for both), its own Gauss-Newton step from there
    is below 1e-3 sigma in every coordinate (a single-shooting fit started there stays), and the sigmas from its
    Jacobian equal multiple shooting's to 1e-6 relative."""
    guess, tel, truth = record
    res = jh.identify(guess, tel, FREE, shooting=jh.MultipleShooting())
    info = res.shooting
    assert res.converged and info["method"] == "multiple", res.message
    assert info["segments"] == 7 and res.iterations <= 20, info  # measured 17 + 2 (5 of them rejected trials)
    assert info["max_defect"] < 1e-8, info
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    single_shooting_agrees(guess, tel, FREE, res)  # single shooting at the solution


def test_multiple_shooting_is_refused_where_a_record_cannot_be_cut(record):
    """`shooting = "multiple"` where the samples are not uniform on the rk4 grid, or several records fitted
    together differ in their sample times: a FitError naming why, before any compute; `"auto"` falls back to single shooting there."""
    guess, tel, _ = record
    t = np.asarray(tel.t).copy()
    t[5] += 0.013
    odd = jh.telemetry_from_arrays(t, tel.values, COLS, SIGMA, guess)
    with pytest.raises(FitError, match="not uniform on the rk4 grid"):
        I.check_identify(guess, odd, FREE, shooting="multiple")
    short = jh.telemetry_from_arrays(np.asarray(tel.t)[:200], tel.values[:200], COLS, SIGMA, guess)
    with pytest.raises(FitError, match="records 1 and 2 differ in their sample times or columns"):
        I.check_identify(guess, [tel, short], FREE, shooting="multiple")
    I.check_identify(guess, [tel, tel], FREE, shooting="multiple")  # records sharing their times: taken
    with pytest.raises(FitError, match="shooting"):
        jh.identify(guess, tel, FREE, shooting="segments")
    with pytest.raises(FitError, match="continuity_rtol"):
        jh.MultipleShooting(continuity_rtol=2.0)
    scens, tels, _, parts = I.check_identify(guess, odd, FREE)
    assert isinstance(I.choose_shooting("auto", scens, tels, parts), MS.SingleShooting)
    # multiple shooting's phases are Levenberg-Marquardt's: another solver is refused by name, "auto" shoots single
    with pytest.raises(FitError, match="solver = 'dogleg': multiple shooting's phases are Levenberg-Marquardt"):
        jh.identify(guess, tel, FREE, shooting="multiple", solver="dogleg")
    scens, tels, _, parts = I.check_identify(guess, tel, FREE)
    assert isinstance(I.choose_shooting("auto", scens, tels, parts), MS.MultipleShooting)
    assert isinstance(I.choose_shooting("auto", scens, tels, parts, jh.Dogleg()), MS.SingleShooting)


def test_fit_file_shooting_options_are_checked(tmp_path, record):
    """`[fit] shooting`, `segment`, `continuity_rtol` in a FIT.toml: bad values and options without
    `shooting = "multiple"` are refused naming the field, before any compute."""
    guess, tel, _ = record
    jh.dump_scenario(guess, tmp_path / "sc.toml")
    with open(tmp_path / "data.csv", "w") as f:
        f.write("t," + ",".join(COLS) + "\n")
        f.writelines(",".join(repr(float(x)) for x in (t, *row)) + "\n" for t, row in zip(tel.t, tel.values))

    def load(extra):
        (tmp_path / "FIT.toml").write_text(
            f'scenario = "sc.toml"\n[data]\ncsv = "data.csv"\ncolumns = {COLS!r}\nsigma = {SIGMA.tolist()!r}\n'
            f'[fit]\nfree = {FREE!r}\n{extra}\n'.replace("'", '"'))
        return load_identify(tmp_path / "FIT.toml")

    with pytest.raises(FitError, match=r"fit\.shooting"):
        load('shooting = "segments"')
    with pytest.raises(FitError, match=r"fit\.segment.*shooting"):
        load("segment = 2.0")
    with pytest.raises(FitError, match=r"fit\.segment"):
        load('shooting = "multiple"\nsegment = -1.0')
    spec = load('shooting = "multiple"\nsegment = 2.5\ncontinuity_rtol = 1e-4')
    assert identify_arguments(spec.fit_kwargs)["shooting"] == jh.MultipleShooting(segment=2.5, continuity_rtol=1e-4)


def test_candidate_steps_keep_samples_inputs_and_the_run_on_the_grid(record):
    """`dt = "auto"`'s candidates divide the sample interval (50 ms here), start at 2 pi f_max h <= 0.5 for the
    initial model's fastest mode, and keep t_end and every sample on the grid; input switches every 30 ms are on
    the grid of 10 ms, not of 20 ms (a command must act at the same instant at every step tried)."""
    from jaxhinge._analysis._fitting._fit_step import candidate_steps

    guess, tel, _ = record
    f_max = SEG.mode_range(guess)[1]
    steps = candidate_steps(guess, [tel])
    assert steps[0] <= 0.5 / (2 * np.pi * f_max) and steps == sorted(steps, reverse=True)
    assert all(abs(0.05 / h - round(0.05 / h)) < 1e-9 for h in steps) and 0.05 / 2 in steps
    from jaxhinge._analysis._fitting._fit_step import _on_grid

    assert _on_grid([0.0, 0.03, 0.06], 0.01) and not _on_grid([0.0, 0.03, 0.06], 0.02)


def test_richardson_pairs_accept_the_coarsest_step_within_a_tenth_of_sigma(record, monkeypatch):
    """The Richardson check against fits whose error is exactly rk4's a h^4: with a = 0.08 sigma / (0.05 s)^4
    the pair (50 ms, 25 ms) estimates 16/15 (1 - 1/16) a h^4 = a h^4 = 0.08 sigma < 0.1: 50 ms is accepted; with
    a 4 times larger the estimate is 0.32 sigma: rejected, then (25 ms, 12.5 ms) estimates 0.02 sigma: 25 ms is
    accepted, reusing the 25 ms fit (3 fits, not 4)."""
    from jaxhinge._analysis._fitting import _fit_step as FS

    guess, tel, _ = record
    monkeypatch.setattr(FS, "candidate_steps", lambda sc, tels: [0.05, 0.025, 0.0125])

    def fake(scale):
        calls = []

        def fit(sc):
            h = sc.simulation.dt
            calls.append(h)
            res = type("R", (), {})()
            res.values, res.sigma = np.array([1.0 + scale * 0.08 * (h / 0.05) ** 4]), np.array([1.0])
            res.converged = True
            return res
        return fit, calls

    fit, calls = fake(1.0)
    res, rep = FS.richardson(guess, [tel], fit)
    assert rep["dt"] == 0.05 and np.isclose(rep["pairs"][0]["max_error_sigma"], 0.08) and calls == [0.05, 0.025]
    fit, calls = fake(4.0)
    res, rep = FS.richardson(guess, [tel], fit)
    assert [p["accepted"] for p in rep["pairs"]] == [False, True] and rep["dt"] == 0.025
    assert np.isclose(res.values[0], 1.0 + 4.0 * 0.08 / 16)  # the fit at the accepted step
    assert np.isclose(rep["pairs"][1]["max_error_sigma"], 0.32 / 16) and calls == [0.05, 0.025, 0.0125]


def test_worse_than_start_names_why():
    """The stopgap's test of a solution (`worse_than_start`): a failed model (residuals FAIL), a log coordinate at
    its bound (e^30 from the guess) and a chi2 above the start's are each named; a solution better than its start
    is not."""
    from jaxhinge._analysis._fitting._lsq_coords import LOG_CLIP
    from jaxhinge._analysis._fitting._lsq_solver import FAIL, Solution

    coords = I.check_identify(*_tiny_problem())[2]
    P = len(coords)
    r0 = np.full(10, 2.0)  # chi2 40 at the start

    def sol(u, r):
        return Solution(u=np.asarray(u, float), status="successful", steps=3, residuals=np.asarray(r, float),
                        jacobian=np.zeros((10, P)), history=np.zeros(3), wall_s=0.0, initial_residuals=r0)

    assert "does not simulate" in MS.worse_than_start(sol(np.zeros(P), np.full(10, FAIL)), coords)
    u = np.zeros(P)
    u[1] = LOG_CLIP
    assert f"{coords[1].name} reached its bound" in MS.worse_than_start(sol(u, np.ones(10)), coords)
    assert "chi2 rose from 40 to 90" in MS.worse_than_start(sol(np.zeros(P), np.full(10, 3.0)), coords)
    assert MS.worse_than_start(sol(np.full(P, 0.3), np.ones(10)), coords) is None


def _tiny_problem():
    """A scenario, a 3-sample record and the free list (for the coordinates only; nothing is simulated)."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    t = np.array([0.0, 0.05, 0.1])
    tel = jh.telemetry_from_arrays(t, np.zeros((3, 5)), COLS, SIGMA, sc)
    return sc, tel, FREE


@pytest.mark.slow
def test_multiple_shooting_that_ends_worse_than_its_start_falls_back_to_single_shooting(record):
    """From a start as far off as an FEA model and a damping guess give (k x 2 and x 0.5, c x 0.2 and x 5),
    multiple shooting on the 20 s record ends at a model that does not simulate (measured: non-finite after its
    first phase); the fit falls back to single shooting from the same start, says so (progress, message,
    `shooting["fallback"]` with the abandoned run's own block, result.json and the console line) and reaches
    the truth within 3 sigma."""
    from jaxhinge._report._identify import _shooting_json, shooting_line

    _, tel, truth = record
    far = jh.apply_parameters(record[0], dict(zip(FREE, truth * np.array([2.0, 0.5, 0.2, 5.0]))))
    lines = []
    res = jh.identify(far, tel, FREE, shooting="multiple", progress=lines.append)
    fb = res.shooting.get("fallback")
    assert res.shooting["method"] == "single" and fb is not None and fb["from"] == "multiple", res.shooting
    assert "does not simulate" in fb["reason"] and fb["multiple"]["method"] == "multiple", fb
    assert any("falling back to single shooting" in x for x in lines)
    assert "fall-back" in res.message and res.converged, res.message
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    block = json.loads(json.dumps(_shooting_json(res.shooting)))
    assert block["fallback"]["multiple"]["segments"] == fb["multiple"]["segments"] >= 4 and block["fallback"]["reason"] == fb["reason"]
    assert "the fall-back" in shooting_line(res.shooting)
