"""(m) MuJoCo, the engine a user would otherwise pick (optional: `pip install jaxhinge[bench]` or `pip install
mujoco`), on the same spacecraft as (a) and (b): a free hub and two spring hinges, RK4 at 1 ms, 10 s.

The MJCF model is written from the jaxhinge scenario (`mjcf`): hub body with a free joint, its CoM at `r_BcB_B`
and principal inertia `IHubPntBc_B` (diagonal); each panel a child body at its hinge point `r_HB_B`, oriented as
its hinge frame (`dcm_HB` rows are the body axes in B), a hinge joint about its second axis with `stiffness = k`,
`damping = c`, its CoM at `-d` along the first axis, inertia `IPntS_S` (diagonal). No gravity, no contacts,
no constraints. The cross-check compares the hinge angles and hub rates after 10 s with jaxhinge's. MuJoCo's
coordinates differ (quaternion, body-origin velocity), but with no gravity the body rates, hinge angles and
hinge rates obey one closed ODE in both models, so the two RK4 runs should agree to round-off: a check of the
MJCF translation and of jaxhinge's dynamics by an independent engine.

Times: one trajectory (`mj_step` loop in C through `rollout`, one thread, no per-step Python), and the threaded
`rollout` of 1024 members with k and c dispersed as in (b), on every core, in chunks of 128 members (the rollout
returns every step's state: 10 000 steps x 128 members is 0.2 GB).
"""

import os
import time

import numpy as np
from _common import print_table, quick_flag, row, seed_scenario


def have_mujoco():
    try:
        import mujoco  # noqa: F401

        return True
    except ImportError:
        return False


def _vec(v):
    return " ".join(f"{float(x):.17g}" for x in np.ravel(v))


def mjcf(scenario, k=None, c=None) -> str:
    """MJCF text of `scenario`'s spacecraft (single panels hung from the hub; diagonal inertias), with the
    hinge stiffnesses `k` and dampings `c` given or the scenario's."""
    hub, p = scenario.spacecraft.hub, scenario.spacecraft.panels
    k = np.asarray(p.k) if k is None else np.asarray(k)
    c = np.asarray(p.c) if c is None else np.asarray(c)
    if any(int(q) != -1 for q in p.parent):
        raise ValueError("mjcf: chains are not written (single panels only)")
    bodies = []
    for j in range(p.count):
        R = np.asarray(p.dcm_HB[j])  # rows: hinge-frame axes in B; MJCF xyaxes: the body's x and y axes
        I = np.diagonal(np.asarray(p.IPntS_S[j]))
        bodies.append(
            f'<body name="p{j}" pos="{_vec(p.r_HB_B[j])}" xyaxes="{_vec(R[0])} {_vec(R[1])}">'
            f'<joint name="h{j}" type="hinge" axis="0 1 0" stiffness="{k[j]:.17g}" damping="{c[j]:.17g}"/>'
            f'<inertial pos="{-float(p.d[j]):.17g} 0 0" mass="{float(p.mass[j]):.17g}" diaginertia="{_vec(I)}"/>'
            "</body>")
    Ih = np.diagonal(np.asarray(hub.IHubPntBc_B))
    dt = scenario.simulation.dt
    return (
        '<mujoco><compiler angle="radian"/>'
        f'<option timestep="{dt:.17g}" integrator="RK4" gravity="0 0 0">'
        '<flag contact="disable" constraint="disable"/></option>'
        '<worldbody><body name="hub"><freejoint/>'
        f'<inertial pos="{_vec(hub.r_BcB_B)}" mass="{float(hub.mHub):.17g}" diaginertia="{_vec(Ih)}"/>'
        + "".join(bodies) + "</body></worldbody></mujoco>")


def initial_state(model, scenario):
    """MuJoCo's full physics state at t = 0: the hub at rest position (orientation identity), its body rates and
    hinge angles from the scenario. The hub's translational velocity does not enter the hinge dynamics (no
    gravity: Galilean invariance), so it is left 0."""
    import mujoco

    data = mujoco.MjData(model)
    init = scenario.initial
    data.qpos[7:] = np.asarray(init.thetaInit)
    data.qvel[3:6] = np.asarray(init.omega_BN_BInit)
    data.qvel[6:] = np.asarray(init.thetaDotInit)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    return state


def _rollout(models, state0, nstep, nthread, chunk=128):
    """Final states of `len(models)` rollouts of `nstep` steps from `state0` (threaded, in chunks)."""
    import mujoco
    from mujoco import rollout

    finals = []
    with rollout.Rollout(nthread=nthread) as r:
        datas = [mujoco.MjData(models[0]) for _ in range(nthread)]
        for s in range(0, len(models), chunk):
            ms = models[s:s + chunk]
            out, _ = r.rollout(ms, datas, np.tile(state0, (len(ms), 1)), nstep=nstep)
            finals.append(out[:, -1].copy())
            del out
    return np.concatenate(finals)


def run(quick=False, members=1024, reference=None):
    """Rows (m): one trajectory, the batched rollout per member, and the agreement with jaxhinge. `reference`:
    the jaxhinge seconds per trajectory and per member measured in the same run (for the ratio column)."""
    if not have_mujoco():
        return [row("(m) MuJoCo", None, None, "s", "mujoco not importable (pip install mujoco)")]
    import mujoco

    import jaxhinge as jh

    t_end = 2.0 if quick else 10.0
    sc = seed_scenario(t_end=t_end, dt=0.001)
    nstep = round(t_end / 0.001)
    model = mujoco.MjModel.from_xml_string(mjcf(sc))
    state0 = initial_state(model, sc)

    best = float("inf")
    for _ in range(2 if quick else 5):
        t0 = time.perf_counter()
        final = _rollout([model], state0, nstep, 1)[0]
        best = min(best, time.perf_counter() - t0)
    # agreement with jaxhinge (state layout: time, qpos (7 + N), qvel (6 + N), ...)
    traj = jh.simulate(sc)
    n = sc.spacecraft.panels.count
    theta_mj = final[1 + 7:1 + 7 + n]
    omega_mj = final[1 + 7 + n + 3:1 + 7 + n + 6]
    d_theta = float(np.max(np.abs(theta_mj - np.asarray(traj.theta[-1]))))
    d_omega = float(np.max(np.abs(omega_mj - np.asarray(traj.omega_BN_B[-1]))))

    rng = np.random.default_rng(0)  # the dispersion of (b)
    ks = np.asarray(sc.spacecraft.panels.k) * rng.uniform(0.8, 1.2, (members, n))
    cs = rng.uniform(0.0, 5.0, (members, n))
    models = [mujoco.MjModel.from_xml_string(mjcf(sc, k, c)) for k, c in zip(ks, cs)]
    nthread = os.cpu_count() or 1
    tb = float("inf")
    for _ in range(1 if quick else 2):
        t0 = time.perf_counter()
        _rollout(models, state0, nstep, nthread)
        tb = min(tb, time.perf_counter() - t0)
    per = tb / members
    one, member = (None, None) if reference is None else reference
    return [
        row(f"(m) MuJoCo {mujoco.__version__}, one trajectory, {t_end:g} s RK4 dt=1 ms", one, best, "s",
            f"per step {best / nstep * 1e6:.2f} us; vs jaxhinge after {t_end:g} s: max |dtheta| {d_theta:.1e} rad, "
            f"max |domega| {d_omega:.1e} rad/s (same ODE: round-off expected)"),
        row(f"(m) MuJoCo rollout, {members} members k,c dispersed, {nthread} threads: per member", member, per, "s",
            f"batch total {tb:.2f} s"),
    ]


if __name__ == "__main__":
    print_table(run(quick_flag()), "MuJoCo")
