"""Shared test helpers: random models and states (one definition, imported by the test modules)."""

import jax.numpy as jnp
import numpy as np

from jaxhinge._model._spacecraft import Hub, Panels, PointMassGravity, Spacecraft, State

MU_EARTH = 0.3986004415e15
ZERO3 = np.zeros(3)


def _rotation(rng):
    """A random proper rotation (det +1)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _inertia(rng, lo, hi, full=True):
    """Physical inertia (principal moments satisfy the triangle inequality), rotated if `full`."""
    a, b = rng.uniform(lo, hi, size=2)
    c = rng.uniform(abs(a - b) + 0.1 * lo, a + b)
    J = np.diag([a, b, c])
    if full:
        R = _rotation(rng)
        J = R @ J @ R.T
    return 0.5 * (J + J.T)


def random_spacecraft(rng, n, *, gravity=False, springs=True, motors=True, mu=MU_EARTH):
    hub = Hub(rng.uniform(300.0, 1000.0), _inertia(rng, 400.0, 1000.0), rng.normal(scale=0.3, size=3))
    panels = Panels(
        mass=rng.uniform(20.0, 120.0, n),
        IPntS_S=np.stack([_inertia(rng, 10.0, 100.0, full=False) for _ in range(n)]),
        d=rng.uniform(0.5, 2.0, n),
        k=rng.uniform(50.0, 500.0, n) if springs else np.zeros(n),
        c=rng.uniform(0.5, 20.0, n) if springs else np.zeros(n),
        r_HB_B=rng.normal(size=(n, 3)),
        dcm_HB=np.stack([_rotation(rng) for _ in range(n)]),
        thetaRef=rng.uniform(-0.3, 0.3, n) if springs else np.zeros(n),
        thetaDotRef=rng.uniform(-0.2, 0.2, n) if springs else np.zeros(n),
        motorTorque=rng.uniform(-3.0, 3.0, n) if motors else np.zeros(n),
    )
    return Spacecraft(hub, panels, PointMassGravity(mu) if gravity else None)


def random_state(rng, n, *, orbit=False):
    r = rng.normal(size=3)
    r = (7.0e6 if orbit else rng.uniform(2.0, 5.0)) * r / np.linalg.norm(r)
    s = rng.normal(size=3)
    s = rng.uniform(0.05, 0.95) * s / np.linalg.norm(s)
    return State(
        r_BN_N=jnp.asarray(r),
        v_BN_N=jnp.asarray(rng.normal(size=3) * (7.5e3 if orbit else 1.0)),
        sigma_BN=jnp.asarray(s),
        omega_BN_B=jnp.asarray(rng.normal(scale=0.3, size=3)),
        theta=jnp.asarray(rng.uniform(-1.0, 1.0, n)),
        thetaDot=jnp.asarray(rng.normal(scale=0.5, size=n)),
    )


def zero_loads(n, *, f_B=ZERO3, f_N=ZERO3, tq=ZERO3, u_extra=None):
    """`(extForce_B, extForce_N, extTorquePntB_B, u_extra)`, always arrays of the same shapes (one compile)."""
    u_extra = np.zeros(n) if u_extra is None else u_extra
    return tuple(jnp.asarray(x, dtype=float) for x in (f_B, f_N, tq, u_extra))


def random_loads(rng, n):
    return zero_loads(
        n,
        f_B=rng.normal(scale=5.0, size=3),
        f_N=rng.normal(scale=5.0, size=3),
        tq=rng.normal(scale=3.0, size=3),
        u_extra=rng.normal(scale=1.0, size=n),
    )


def random_chain(rng, L, name):
    """A chain of L random non-identical panels (one `Panels` tree with parents -1, 0, 1, ...)."""
    return Panels.chain_of(
        name,
        r_HB_B=rng.normal(size=3),
        dcm_HB=_rotation(rng),
        mass=rng.uniform(20.0, 120.0, L),
        IPntS_S=np.stack([_inertia(rng, 10.0, 100.0, full=False) for _ in range(L)]),
        d=rng.uniform(0.5, 2.0, L),
        l=rng.uniform(1.0, 3.0, L),
        k=rng.uniform(50.0, 500.0, L),
        c=rng.uniform(0.5, 20.0, L),
        thetaRef=rng.uniform(-0.3, 0.3, L),
        thetaDotRef=rng.uniform(-0.2, 0.2, L),
        motorTorque=rng.uniform(-3.0, 3.0, L),
    )


def mixed(rng, n_single, lengths, gravity=False):
    """Random single panels followed by random chains of the given lengths."""
    sc = random_spacecraft(rng, n_single, gravity=gravity)
    chains = [random_chain(rng, L, f"c{i}") for i, L in enumerate(lengths)]
    return Spacecraft(sc.hub, Panels.concat(sc.panels, *chains), sc.gravity)


class _Namespace:
    """The least-squares core's names in one namespace (`L.solve`, `L.parse_free`, ...): the core is three
    modules (coordinates, solver, analysis); tests address it as one."""

    def __init__(self, *modules):
        for m in modules:
            for k, v in vars(m).items():
                if not k.startswith("__"):
                    setattr(self, k, v)


def _lsq():
    from jaxhinge._analysis._fitting import _lsq_analysis, _lsq_coords, _lsq_solver

    return _Namespace(_lsq_coords, _lsq_solver, _lsq_analysis)


LSQ = _lsq()


def single_shooting_agrees(guess, tel, free, res, atol=1e-7):
    """Single shooting at a multiple-shooting solution (`simulate` through the whole record in forward mode: no
    code shared with the segments but the one propagation): its residuals equal the solution's (`atol` sigma: rk4
    repeats the same steps, 1e-7; an adaptive integrator takes other steps through the whole record than through
    the segments, so its tolerance sets it), its own Gauss-Newton step from there is below 1e-3 sigma in every
    coordinate (a single-shooting fit started there stays) and the sigmas from its Jacobian equal multiple
    shooting's to 1e-6 relative."""
    from jaxhinge._analysis._fitting import _identify as I
    from jaxhinge._analysis._fitting._lsq_analysis import analyse
    from jaxhinge._analysis._fitting._lsq_solver import evaluate

    scens, tels, coords, parts = I.check_identify(guess, tel, free)  # (several records: lists)
    single = I._JointResiduals(tuple(I._record_problem(scens[k], tels[k], mc, idx, fx, sens)
                                     for k, (idx, mc, fx, sens) in enumerate(parts)))
    u = np.array([c.coordinate(v) for c, v in zip(coords, res.values)])
    ev = evaluate(jnp.asarray(u), single)
    J, r = np.asarray(ev.jacobian), np.asarray(ev.residuals)
    mine = np.concatenate([np.asarray(x["residuals"]).reshape(-1) for x in res.records] if len(tels) > 1
                          else [np.asarray(res.residuals).reshape(-1)])
    assert np.allclose(r, mine, rtol=0, atol=atol), np.abs(r - mine).max()
    a = analyse(J, r, coords)
    step = np.linalg.lstsq(J, -r, rcond=None)[0]
    assert np.all(np.abs(step) < 1e-3 * a.sigma_u), step / a.sigma_u
    assert np.allclose(a.sigma(coords, res.values), res.sigma, rtol=1e-6, atol=0)


def with_actuator(scenario, actuator):
    """`scenario` with its controller's actuator replaced (an object or a file name), every other field as it is
    (`jh.Control` built again: its converter maps a name to the object)."""
    import dataclasses

    import jaxhinge as jh

    ctrl = scenario.control
    kw = {f.name: getattr(ctrl, f.name) for f in dataclasses.fields(ctrl)} | {"actuator": actuator}
    return jh.Scenario(spacecraft=scenario.spacecraft, initial=scenario.initial, loads=scenario.loads,
                       simulation=scenario.simulation, control=jh.Control(**kw))
