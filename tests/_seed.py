"""Basilisk's seed scenarios (reference/basilisk.md §3), built in code with the exact parameter values."""

import numpy as np

import jaxhinge as jh

DEG = np.pi / 180.0
I_PANEL = np.diag([100.0, 50.0, 50.0])
STACKED = dict(r_HB_B=[[0.5, 0.0, 1.0], [-0.5, 0.0, 1.0]], dcm_HB=[np.diag([-1.0, -1.0, 1.0]), np.eye(3)])
PLANAR = dict(
    r_HB_B=[[0.5, 1.0, 0.0], [-0.5, 1.0, 0.0]],
    dcm_HB=[[[-1.0, 0, 0], [0, 0, 1.0], [0, 1.0, 0]], [[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]],
)
MU_EARTH = 0.3986004415e15


def two_panel(
    *,
    geometry=STACKED,
    r_BcB_B=(0.0, 0.0, 1.0),
    k=(100.0, 100.0),
    c=(0.0, 0.0),
    thetaInit=(5 * DEG, 0.0),
    motorTorque=(0.0, 0.0),
    r_CN=(0.1, -0.4, 0.3),
    v_CN=(-0.2, 0.5, 0.1),
    omega=(0.1, -0.1, 0.1),
    mu=None,
    loads=None,
    sim=None,
):
    hub = jh.Hub(750.0, np.diag([900.0, 800.0, 600.0]), r_BcB_B)
    panels = jh.Panels(
        mass=[100.0, 100.0],
        IPntS_S=[I_PANEL, I_PANEL],
        d=[1.5, 1.5],
        k=k,
        c=c,
        thetaRef=[0.0, 0.0],
        thetaDotRef=[0.0, 0.0],
        motorTorque=motorTorque,
        names=("panel1", "panel2"),
        **geometry,
    )
    sc = jh.Spacecraft(hub, panels, None if mu is None else jh.PointMassGravity(mu))
    init = jh.InitialState(r_CN, v_CN, [0.0, 0.0, 0.0], omega, thetaInit, [0.0, 0.0])
    sim = sim or jh.SimulationConfig(t_end=2.5, save_dt=0.01, integrator="rk4", dt=0.001)
    return jh.Scenario(sc, init, loads or jh.Loads(), sim)


def no_gravity(**kw):
    return two_panel(**kw)


def gravity(**kw):
    return two_panel(
        r_CN=(-4020338.690396649, 7490566.741852513, 5248299.211589362),
        v_CN=(-5199.77710904224, -3436.681645356935, 1041.576797498721),
        mu=MU_EARTH,
        **kw,
    )


def damping(**kw):
    return two_panel(c=(6.0, 7.0), **kw)


def planar(k, c, loads, t_end, **kw):
    return two_panel(
        geometry=PLANAR,
        r_BcB_B=(0.0, 0.0, 0.0),
        k=(k, k),
        c=(c, c),
        thetaInit=(0.0, 0.0),
        r_CN=(0.0, 0.0, 0.0),
        v_CN=(0.0, 0.0, 0.0),
        omega=(0.0, 0.0, 0.0),
        loads=loads,
        sim=jh.SimulationConfig(t_end=t_end, save_dt=0.1, integrator="rk4", dt=0.1),
        **kw,
    )


def motor_torque(**kw):
    return two_panel(
        k=(0.0, 0.0),
        c=(0.0, 0.0),
        thetaInit=(0.0, 0.0),
        motorTorque=(2.0, 0.0),
        r_CN=(0.0, 0.0, 0.0),
        v_CN=(0.0, 0.0, 0.0),
        omega=(0.0, 0.0, 0.0),
        sim=jh.SimulationConfig(t_end=10.0, save_dt=0.01, integrator="rk4", dt=0.01),
        **kw,
    )
