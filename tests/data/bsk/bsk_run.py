"""Run a jaxhinge scenario TOML file in Basilisk and save the trajectory as an `.npz`.

Basilisk (`pip install bsk`, tested with bsk 2.12.1) is only needed to *generate* reference data;
jaxhinge itself never imports it.

Usage:

    python tests/data/bsk/bsk_run.py SCENARIO.toml OUT.npz

or, as a module, `run(scenario_dict) -> dict` where `scenario_dict` is the parsed TOML
(`load_scenario(path)`).

What is run:

- `spacecraft.Spacecraft` (default integrator: fixed-step RK4, MRP shadow switch after every step) with
  the task period equal to `simulation.dt`; `simulation.integrator` must be `"rk4"`, `rtol`/`atol` are
  ignored.
- One `HingedRigidBodyStateEffector` per `[[panels]]` entry (file order), with `thetaRef`, `thetaDotRef`
  and, when `motorTorque` is non-zero, a constant `ArrayMotorTorqueMsg`.
- `[[wheels]]`: one `ReactionWheelStateEffector` (model `BalancedWheels`) holding every wheel in file order,
  each an `RWConfigPayload` built directly (not through `simIncludeRW.rwFactory`, which takes `Omega` in RPM and
  would round it): `gsHat_B`, `Js`, `Omega` [rad/s], `u_max` (absent or <= 0: -1, no limit), `cViscous`,
  `fCoulomb`; `u_min = 0`, `Omega_max = -1`, `P_max = -1` (off), `betaStatic = -1` (no Stribeck), `fStatic = 0`,
  `omegaLimitCycle` Basilisk's default 1e-4 rad/s. Balanced wheels add no mass properties in Basilisk (only the
  `JitterFullyCoupled` model does; checked: the wheel `mass`, `rWB_B`, `Jt`, `Jg` change nothing), which is
  jaxhinge's convention "the wheel's mass and transverse inertia are in the hub's"; they are set to 0 anyway.
  The motor torques go through one `ArrayMotorTorqueMsg` subscribed to `rwMotorCmdInMsg`: each wheel's
  constant `u`, or the `[inputs]` CSV column `u_<wheel name>` when there is one.
- `[inputs]`: `csv` (relative to the scenario file: `run(..., base_dir=)`), `hold = "zoh"` only. Columns `t` and
  `u_<wheel name>` (any other column is refused: this runner implements no other input). Rows at
  `t_0 <= 0 < ... < t_last >= t_end`, every `t` in `(0, t_end)` a multiple of `dt`. The run is split at every
  CSV time (as at pulse edges) and the command message is rewritten before each segment with the row in force
  at the segment's start (zero-order hold).
- `[gravity] mu`: a point-mass central body (`GravBodyData`, `isCentralBody = True`).
- `[loads]`: one `extForceTorque` module carrying the constant `extForce_B`, `extForce_N` and
  `extTorquePntB_B`; each `[[loads.pulses]]` entry adds its loads on `t_start <= t < t_end`. Pulses are
  implemented as in Basilisk's own Lagrangian test: the run is split at every pulse edge
  (`ConfigureStopTime` / `ExecuteSimulation` segments) and the module's members are changed between
  segments. A value set before the segment `[a, b]` acts on every RK4 step inside `[a, b]` (zero-order
  hold), so pulse edges must be multiples of `dt`.

Task order (one process, one task, every model at the default priority, so insertion order): the
`extForceTorque` module, the wheel effector, the spacecraft, the panels, the chains, then the recorders. The
wheel effector's `UpdateState(t_k)` reads the command and sets each wheel's `u_current` (clipped to `u_max`)
*before* the spacecraft's `UpdateState(t_k)` integrates the step `[t_{k-1}, t_k]`; so the command written
before the segment `[a, b]` acts on every RK4 step inside `[a, b]`, from the step that starts at `a` (no
one-step delay; basilisk.md section 9, as Basilisk's own `test_reactionWheelStateEffector_integrated.py`
orders its models).

Recording: every `simulation.save_dt` (a multiple of `dt`), samples at `t = k*save_dt`, `k = 0, 1, ...`,
`t <= t_end`, including `t = 0` (the initial state, before any step). All values at a sample are taken after
the RK4 step that ends there and after the MRP switch.

Output arrays (jaxhinge names; `T` samples, `N` panels in file order):

- `t` (T,)
- `r_BN_N`, `v_BN_N`, `r_CN_N`, `v_CN_N`, `sigma_BN`, `omega_BN_B` (T, 3): `scStateOutMsg`
- `theta`, `thetaDot` (T, N): `hingedRigidBodyOutMsg`
- `totOrbEnergy`, `totRotEnergy` (T,), `totOrbAngMomPntN_N`, `totRotAngMomPntC_N` (T, 3): `Spacecraft` members,
  logged with `sc.logger([...])`
- `panel_r_SN_N`, `panel_v_SN_N`, `panel_sigma_SN`, `panel_omega_SN_S` (T, N, 3): each panel's
  `hingedRigidBodyConfigLogOutMsg` (an `SCStatesMsgPayload` read as "body = panel S frame": fields `r_BN_N`,
  `v_BN_N`, `sigma_BN`, `omega_BN_B`), computed from the same post-step state as the other arrays:
  `r_SN_N = r_BN_N + [NB] r_SB_B`, `v_SN_N = v_BN_N + [NB](d thetaDot s3 + omega_BN_B x r_SB_B)` (the true
  inertial velocity of the panel CoM S, N frame; checked to 1e-16 with bsk 2.12.1), `sigma_SN` from
  [SB][BN] (Basilisk's C2MRP, |sigma| <= 1), `omega_SN_S = [SB](omega_BN_B + thetaDot s2)`.
- with `[[wheels]]` only: `Omega` (T, W): `rwSpeedOutMsg.wheelSpeeds[:W]` (written by the spacecraft after the
  step, so the post-step wheel speeds relative to B [rad/s]); `rw_u_current` (T, W): each wheel's
  `rwOutMsgs[i].u_current`, the motor torque after Basilisk's limits that acted over the RK4 step *ending* at
  the sample time (at t = 0: the first command). `totRotEnergy` and `totRotAngMomPntC_N` include the wheels
  (`ReactionWheelStateEffector::updateEnergyMomContributions`: `Js gsHat Omega` and
  `1/2 Js Omega^2 + Js Omega gsHat.omega_BN_B`, the `1/2 Js (gsHat.omega)^2` part being in the hub inertia).
- `mrp_switch_count` (): `hub.MRPSwitchCount` at the end of the run
- `wall_s` (): wall time of the `ExecuteSimulation` calls [s]; `bsk_version` (): string
"""

import csv
import importlib.metadata
import itertools
import pathlib
import sys
import time
import tomllib

import numpy as np

LOAD_KEYS = ("extForce_B", "extForce_N", "extTorquePntB_B")
OUTPUT_KEYS = (
    "t",
    "r_BN_N",
    "v_BN_N",
    "r_CN_N",
    "v_CN_N",
    "sigma_BN",
    "omega_BN_B",
    "theta",
    "thetaDot",
    "totOrbEnergy",
    "totRotEnergy",
    "totOrbAngMomPntN_N",
    "totRotAngMomPntC_N",
    "panel_r_SN_N",
    "panel_v_SN_N",
    "panel_sigma_SN",
    "panel_omega_SN_S",
    "mrp_switch_count",
    "wall_s",
    "bsk_version",
)
WHEEL_OUTPUT_KEYS = ("Omega", "rw_u_current")  # saved only when the scenario has wheels
CONTROL_OUTPUT_KEYS = ("sigma_BR", "omega_BR_B", "Lr")  # saved only when the scenario has [control]
CONTROL_KEYS = {"sigma_R0N", "K", "P", "Ki", "integralLimit", "control_dt", "actuator", "controlAxes_B", "ISCPntB_B",
                "knownTorquePntB_B"}
WHEEL_KEYS = {"name", "gsHat_B", "Js", "Omega", "u", "u_max", "cViscous", "fCoulomb"}


def load_scenario(path):
    """Parse a scenario TOML file into a plain dict."""
    with open(path, "rb") as f:
        return tomllib.load(f)


def _col(v):
    v = [float(x) for x in v]
    if len(v) != 3:
        raise ValueError(f"expected a 3-vector, got {v!r}")
    return [[x] for x in v]


def _mat(m):
    m = [[float(x) for x in row] for row in m]
    if len(m) != 3 or any(len(r) != 3 for r in m):
        raise ValueError(f"expected a 3x3 matrix, got {m!r}")
    return m


def _ns(seconds, what, step_ns=None):
    """Seconds -> integer nanoseconds (Basilisk's `sec2nano` rounding), checked to be a multiple of step."""
    ns = int(seconds * 1e9 + 0.5)
    if seconds < 0 or abs(ns - seconds * 1e9) > max(1e-3, 1e-12 * seconds * 1e9):
        raise ValueError(f"{what} = {seconds!r} s is not representable in integer nanoseconds")
    if step_ns is not None and ns % step_ns:
        raise ValueError(f"{what} = {seconds!r} s must be a multiple of simulation.dt ({step_ns} ns)")
    return ns


def _concat_getter(fns):
    return lambda t: np.concatenate([f(t) for f in fns])


CHAIN_KEYS = {"mass", "IPntS_S", "d", "l", "k", "c", "thetaInit", "thetaDotInit", "thetaRef", "thetaDotRef",
              "motorTorque", "name"}


def _add_chains(sc, chains, keep):
    """Add each `[[chains]]` entry as a Basilisk chain effector; return [(effector, state names, length)].

    - 2 panels: `dualHingedRigidBodyStateEffector` (any two panels; `l` of panel 1 is `l1`; `thetaRef` and
      `thetaDotRef` must be 0 (it has none); motor torques through its `motorTorqueInMsg`).
    - otherwise: `nHingedRigidBodyStateEffector`, whose equations hold only for identical panels with
      hinge-to-hinge length `l = 2 d` (Basilisk PR #1530): anything else is refused; `thetaRef` -> `theta_0`,
      `thetaDotRef` and `motorTorque` must be 0 (it has neither).
    """
    from Basilisk.architecture import messaging
    from Basilisk.simulation import dualHingedRigidBodyStateEffector, nHingedRigidBodyStateEffector

    out = []
    for j, ch in enumerate(chains):
        ps = ch["panels"]
        for i, p in enumerate(ps):
            unknown = set(p) - CHAIN_KEYS
            if unknown:
                raise ValueError(f"chains[{j}].panels[{i}]: unknown keys {sorted(unknown)}")
            if float(p.get("thetaDotRef", 0.0)) != 0.0:
                raise ValueError(f"chains[{j}].panels[{i}].thetaDotRef: Basilisk's chain effectors have none")
        if len(ps) == 2:
            e = dualHingedRigidBodyStateEffector.DualHingedRigidBodyStateEffector()
            e.ModelTag = f"chain_{ch.get('name', j)}"
            p1, p2 = ps
            for i, p in enumerate(ps):
                if float(p.get("thetaRef", 0.0)) != 0.0:
                    raise ValueError(f"chains[{j}].panels[{i}].thetaRef: dualHinged has no reference angle")
            e.mass1, e.mass2 = float(p1["mass"]), float(p2["mass"])
            e.IPntS1_S1, e.IPntS2_S2 = _mat(p1["IPntS_S"]), _mat(p2["IPntS_S"])
            e.d1, e.d2, e.l1 = float(p1["d"]), float(p2["d"]), float(p1["l"])
            e.k1, e.k2, e.c1, e.c2 = float(p1["k"]), float(p2["k"]), float(p1["c"]), float(p2["c"])
            e.r_H1B_B = _col(ch["r_HB_B"])
            e.dcm_H1B = _mat(ch["dcm_HB"])
            e.theta1Init, e.theta1DotInit = float(p1["thetaInit"]), float(p1["thetaDotInit"])
            e.theta2Init, e.theta2DotInit = float(p2["thetaInit"]), float(p2["thetaDotInit"])
            e.nameOfTheta1State, e.nameOfTheta1DotState = f"chain{j}Theta1", f"chain{j}Theta1Dot"
            e.nameOfTheta2State, e.nameOfTheta2DotState = f"chain{j}Theta2", f"chain{j}Theta2Dot"
            u = [float(p.get("motorTorque", 0.0)) for p in ps]
            if any(u):
                pl = messaging.ArrayMotorTorqueMsgPayload()
                pl.motorTorque = u
                msg = messaging.ArrayMotorTorqueMsg().write(pl)
                e.motorTorqueInMsg.subscribeTo(msg)
                keep += [pl, msg]
            names = {"theta": [e.nameOfTheta1State, e.nameOfTheta2State],
                     "thetaDot": [e.nameOfTheta1DotState, e.nameOfTheta2DotState]}
        else:
            ref = ps[0]
            for i, p in enumerate(ps):
                same = all(np.array_equal(np.asarray(p[k], float), np.asarray(ref[k], float))
                           for k in ("mass", "IPntS_S", "d", "k", "c"))
                if not same or (i < len(ps) - 1 and float(p["l"]) != 2.0 * float(p["d"])):
                    raise ValueError(
                        f"chains[{j}]: nHingedRigidBodyStateEffector needs identical panels with l = 2 d"
                    )
                if float(p.get("motorTorque", 0.0)) != 0.0:
                    raise ValueError(f"chains[{j}].panels[{i}].motorTorque: nHinged has no motor input")
            e = nHingedRigidBodyStateEffector.NHingedRigidBodyStateEffector()
            e.ModelTag = f"chain_{ch.get('name', j)}"
            e.r_HB_B = _col(ch["r_HB_B"])
            e.dcm_HB = _mat(ch["dcm_HB"])
            e.nameOfThetaState, e.nameOfThetaDotState = f"chain{j}Theta", f"chain{j}ThetaDot"
            for p in ps:
                hp = nHingedRigidBodyStateEffector.HingedPanel()
                hp.mass, hp.IPntS_S, hp.d = float(p["mass"]), _mat(p["IPntS_S"]), float(p["d"])
                hp.k, hp.c = float(p["k"]), float(p["c"])
                hp.thetaInit, hp.thetaDotInit = float(p["thetaInit"]), float(p["thetaDotInit"])
                hp.theta_0 = float(p.get("thetaRef", 0.0))
                e.addHingedPanel(hp)
                keep.append(hp)
            names = {"theta": e.nameOfThetaState, "thetaDot": e.nameOfThetaDotState}
        sc.addStateEffector(e)
        out.append((e, names, len(ps)))
    return out


def _wheel_names(wheels):
    names = []
    for i, w in enumerate(wheels):
        name = str(w.get("name", f"rw{i}"))
        if name in names:
            raise ValueError(f"wheels[{i}].name = {name!r}: duplicate")
        names.append(name)
    return names


def _add_wheels(sc, wheels):
    """Add every `[[wheels]]` entry to one `ReactionWheelStateEffector` (BalancedWheels); return it, or None.

    Each wheel is an `RWConfigPayload` set member by member (see the module doc); the payloads are kept
    alive by the effector (`ReactionWheelData` holds shared pointers) and returned for the caller to keep too.
    """
    if not wheels:
        return None, []
    from Basilisk.architecture import messaging
    from Basilisk.simulation import reactionWheelStateEffector

    eff = reactionWheelStateEffector.ReactionWheelStateEffector()
    eff.ModelTag = "rwEffector"
    pls = []
    for i, (w, name) in enumerate(zip(wheels, _wheel_names(wheels))):
        unknown = set(w) - WHEEL_KEYS
        if unknown:
            raise ValueError(f"wheels[{i}] ({name!r}): unknown keys {sorted(unknown)}")
        g = np.array([float(x) for x in w["gsHat_B"]])
        if g.shape != (3,) or abs(np.linalg.norm(g) - 1.0) > 1e-12:
            raise ValueError(f"wheels[{i}] ({name!r}).gsHat_B = {w['gsHat_B']!r}: must be a unit 3-vector")
        js = float(w["Js"])
        if not js > 0.0:
            raise ValueError(f"wheels[{i}] ({name!r}).Js = {js!r}: must be > 0")
        rw = reactionWheelStateEffector.RWConfigPayload()
        rw.RWModel = messaging.BalancedWheels
        rw.label = name[:5]
        rw.gsHat_B = _col(g)  # used exactly as written in the file (not renormalised)
        # wheel frame completion as simIncludeRW.rwFactory.setGsHat does (unused by BalancedWheels)
        w2 = np.cross(g, [1.0, 0.0, 0.0])
        if np.linalg.norm(w2) < 0.01:
            w2 = np.cross(g, [0.0, 1.0, 0.0])
        w2 = w2 / np.linalg.norm(w2)
        rw.w2Hat0_B = _col(w2)
        rw.w3Hat0_B = _col(np.cross(g, w2))
        rw.Js = js
        rw.Jt = 0.0  # transverse inertia: in the hub's (unused by BalancedWheels)
        rw.Jg = 0.0
        rw.mass = 0.0  # mass: in the hub's (unused by BalancedWheels)
        rw.rWB_B = _col([0.0, 0.0, 0.0])
        rw.U_s = 0.0
        rw.U_d = 0.0
        rw.Omega = float(w.get("Omega", 0.0))  # rad/s
        rw.theta = 0.0
        u_max = float(w.get("u_max", 0.0))
        rw.u_max = u_max if u_max > 0.0 else -1.0
        rw.u_min = 0.0
        rw.Omega_max = -1.0
        rw.P_max = -1.0
        rw.fCoulomb = float(w.get("fCoulomb", 0.0))
        rw.cViscous = float(w.get("cViscous", 0.0))
        rw.fStatic = 0.0
        rw.betaStatic = -1.0
        if rw.fCoulomb < 0.0 or rw.cViscous < 0.0:
            raise ValueError(f"wheels[{i}] ({name!r}): fCoulomb and cViscous must be >= 0")
        eff.addReactionWheel(rw)
        pls.append(rw)
    sc.addStateEffector(eff)
    return eff, pls


def _add_control(sim, scenario, sc, rw_eff, dt_ns, keep):
    """Basilisk's attitude-control chain for `[control]` (basilisk.md section 9): `simpleNav` (no noise) in the
    dynamics task after the spacecraft; `inertial3D`, `attTrackingError`, `mrpFeedback` and `rwMotorTorque` (or
    `extForceTorque` fed by `mrpFeedback`) in a flight-software task of period `control_dt` in a process of lower
    priority than the dynamics, as `scenarioAttitudeFeedbackRW.py` lays them out. Returns `(task name, the
    modules to record: attTrackingError, mrpFeedback, the hub-torque effector or None)`."""
    from Basilisk.architecture import messaging
    from Basilisk.fswAlgorithms import attTrackingError, inertial3D, mrpFeedback, rwMotorTorque
    from Basilisk.simulation import extForceTorque, simpleNav
    from Basilisk.utilities import fswSetupRW

    c = scenario["control"]
    unknown = set(c) - CONTROL_KEYS
    if unknown:
        raise ValueError(f"control: unknown keys {sorted(unknown)}")
    ctl_ns = _ns(c["control_dt"], "control.control_dt", dt_ns)
    fsw_proc = sim.CreateNewProcess("fswProc", 100)  # below the dynamics process (200)
    fsw_proc.addTask(sim.CreateNewTask("fswTask", ctl_ns))

    nav = simpleNav.SimpleNav()
    nav.ModelTag = "simpleNav"
    nav.scStateInMsg.subscribeTo(sc.scStateOutMsg)
    ref = inertial3D.inertial3D()
    ref.ModelTag = "inertial3D"
    ref.sigma_R0N = [float(x) for x in c.get("sigma_R0N", [0.0, 0.0, 0.0])]
    err = attTrackingError.attTrackingError()
    err.ModelTag = "attTrackingError"
    err.attRefInMsg.subscribeTo(ref.attRefOutMsg)
    err.attNavInMsg.subscribeTo(nav.attOutMsg)
    mrp = mrpFeedback.mrpFeedback()
    mrp.ModelTag = "mrpFeedback"
    mrp.guidInMsg.subscribeTo(err.attGuidOutMsg)
    mrp.K = float(c["K"])
    mrp.P = float(c["P"])
    mrp.Ki = float(c.get("Ki", -1.0))
    mrp.integralLimit = float(c.get("integralLimit", 0.0))
    mrp.knownTorquePntB_B = [float(x) for x in c.get("knownTorquePntB_B", [0.0, 0.0, 0.0])]
    veh = messaging.VehicleConfigMsgPayload()
    veh.ISCPntB_B = [float(x) for row in c["ISCPntB_B"] for x in row]
    veh_msg = messaging.VehicleConfigMsg().write(veh)
    mrp.vehConfigInMsg.subscribeTo(veh_msg)
    keep += [veh, veh_msg, nav, ref, err, mrp]
    wheels = scenario.get("wheels", [])
    if wheels:  # mrpFeedback's gyroscopic term sees the wheels, whatever the actuator
        fswSetupRW.clearSetup()
        for w in wheels:
            u_max = float(w.get("u_max", 0.0))
            fswSetupRW.create([float(x) for x in w["gsHat_B"]], float(w["Js"]), u_max if u_max > 0 else -1.0)
        rw_params = fswSetupRW.writeConfigMessage()
        mrp.rwParamsInMsg.subscribeTo(rw_params)
        mrp.rwSpeedsInMsg.subscribeTo(rw_eff.rwSpeedOutMsg)
        keep.append(rw_params)
    torque_eff = None
    sim.AddModelToTask("fswTask", ref)
    sim.AddModelToTask("fswTask", err)
    sim.AddModelToTask("fswTask", mrp)
    if c.get("actuator", "wheels") == "wheels":
        mot = rwMotorTorque.rwMotorTorque()
        mot.ModelTag = "rwMotorTorque"
        mot.controlAxes_B = [float(x) for row in c.get("controlAxes_B", np.eye(3).tolist()) for x in row]
        mot.vehControlInMsg.subscribeTo(mrp.cmdTorqueOutMsg)
        mot.rwParamsInMsg.subscribeTo(rw_params)
        rw_eff.rwMotorCmdInMsg.subscribeTo(mot.rwMotorTorqueOutMsg)
        sim.AddModelToTask("fswTask", mot)
        keep.append(mot)
    else:
        torque_eff = extForceTorque.ExtForceTorque()
        torque_eff.ModelTag = "controlTorque"
        torque_eff.cmdTorqueInMsg.subscribeTo(mrp.cmdTorqueOutMsg)
        sc.addDynamicEffector(torque_eff)
        keep.append(torque_eff)
    return nav, (err, mrp, torque_eff)


def read_inputs(scenario, base_dir, dt_ns, t_end_ns):
    """The `[inputs]` CSV as [(t_ns, {wheel name: u})] rows (wheel columns only); [] without `[inputs]`."""
    inputs = scenario.get("inputs")
    if not inputs:
        return []
    unknown = set(inputs) - {"csv", "hold"}
    if unknown:
        raise ValueError(f"inputs: unknown keys {sorted(unknown)}")
    hold = inputs.get("hold", "zoh")
    if hold != "zoh":
        raise ValueError(f"inputs.hold = {hold!r}: the Basilisk runner only does 'zoh'")
    if base_dir is None:
        raise ValueError("inputs.csv: run(..., base_dir=<the scenario file's folder>) is needed")
    path = pathlib.Path(base_dir) / inputs["csv"]
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    header = [c.strip() for c in rows[0]]
    names = _wheel_names(scenario.get("wheels", []))
    wheel_cols = {f"u_{n}": n for n in names}
    if header.count("t") != 1 or len(set(header)) != len(header):
        raise ValueError(f"{path}: needs one column 't' and unique column names, got {header}")
    other = [c for c in header if c != "t" and c not in wheel_cols]
    if other:
        raise ValueError(f"{path}: columns {other}: the Basilisk runner only applies u_<wheel> columns")
    out = []
    for line_no, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise ValueError(f"{path}:{line_no}: {len(r)} cells, header has {len(header)}")
        vals = dict(zip(header, (float(c) for c in r)))
        t = vals.pop("t")
        t_ns = round(t * 1e9)
        if 0.0 < t < t_end_ns / 1e9:
            t_ns = _ns(t, f"{path}:{line_no}: t", dt_ns)
        out.append((t_ns, {wheel_cols[c]: v for c, v in vals.items()}))
    ts = [t for t, _ in out]
    if any(b <= a for a, b in itertools.pairwise(ts)):
        raise ValueError(f"{path}: t must be strictly increasing")
    if not out or ts[0] > 0 or ts[-1] < t_end_ns:
        raise ValueError(f"{path}: the rows must cover [0, t_end] (first t <= 0, last t >= t_end)")
    return out


def _wheel_command(wheels, rows, a_ns):
    """Each wheel's commanded torque on a segment starting at a_ns: the CSV row in force (zero-order hold)
    where the CSV has the wheel's column, else the wheel's constant `u`."""
    u = {n: float(w.get("u", 0.0)) for w, n in zip(wheels, _wheel_names(wheels))}
    live = [vals for t, vals in rows if t <= a_ns]
    if live:
        u.update(live[-1])
    return [u[n] for n in _wheel_names(wheels)]


def _segments(loads, t_end_ns, dt_ns, extra_edges=()):
    """Split [0, t_end] at pulse edges (and `extra_edges`); return [(start_ns, stop_ns, {key: 3-vector})] with
    the loads active in each."""
    const = {k: np.array(loads.get(k, [0.0, 0.0, 0.0]), dtype=float) for k in LOAD_KEYS}
    pulses = []
    for j, p in enumerate(loads.get("pulses", [])):
        a = _ns(p["t_start"], f"loads.pulses[{j}].t_start", dt_ns)
        b = _ns(p["t_end"], f"loads.pulses[{j}].t_end", dt_ns)
        if b <= a:
            raise ValueError(f"loads.pulses[{j}]: t_end must be > t_start")
        unknown = set(p) - {"t_start", "t_end", *LOAD_KEYS}
        if unknown:
            raise ValueError(f"loads.pulses[{j}]: unknown keys {sorted(unknown)}")
        pulses.append((a, b, {k: np.array(p.get(k, [0.0, 0.0, 0.0]), dtype=float) for k in LOAD_KEYS}))
    edges = sorted({0, t_end_ns, *(e for a, b, _ in pulses for e in (a, b) if 0 < e < t_end_ns),
                    *(e for e in extra_edges if 0 < e < t_end_ns)})
    segs = []
    for a, b in itertools.pairwise(edges):
        cur = {k: v.copy() for k, v in const.items()}
        for pa, pb, pl in pulses:
            if pa <= a and b <= pb:  # segment lies inside [pa, pb)
                for k in LOAD_KEYS:
                    cur[k] = cur[k] + pl[k]
        segs.append((a, b, cur))
    return segs


def _execute(sim, ft, segments, wheel_cmd=None):
    """Initialize, then run segment by segment, setting the loads (and the wheel commands) before each.

    `wheel_cmd`: None, or (payload, message, f) with f(start_ns) -> the wheel torques of the segment.

    Returns the wall time and the process CPU time [s] spent in `ExecuteSimulation`.
    """
    sim.InitializeSimulation()
    wall = cpu = 0.0
    for start_ns, stop_ns, seg in segments:
        if wheel_cmd is not None:
            pl, msg, f = wheel_cmd
            pl.motorTorque = f(start_ns)
            msg.write(pl)
        if ft is not None:
            ft.extForce_B = _col(seg["extForce_B"])
            ft.extForce_N = _col(seg["extForce_N"])
            ft.extTorquePntB_B = _col(seg["extTorquePntB_B"])
        sim.ConfigureStopTime(stop_ns)
        t0, c0 = time.perf_counter(), time.process_time()
        sim.ExecuteSimulation()
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
    return wall, cpu


def _fsw_command_writer(pl, msg, f):
    """A Python Basilisk module that writes the wheel command f(t) to `msg` at each tick of its task."""
    from Basilisk.architecture import sysModel

    class WheelCommandWriter(sysModel.SysModel):
        def UpdateState(self, CurrentSimNanos):
            pl.motorTorque = f(CurrentSimNanos)
            msg.write(pl, CurrentSimNanos, self.moduleID)

    m = WheelCommandWriter()
    m.ModelTag = "wheelCommandWriter"
    return m


def run(scenario, *, record=True, base_dir=None, wheels_after_spacecraft=False, command_mode="segments"):
    """Run `scenario` (the parsed TOML dict) in Basilisk; return a dict of numpy arrays (see module doc).

    `base_dir`: the scenario file's folder (for `[inputs] csv`). `wheels_after_spacecraft=True` adds the wheel
    effector to the task after the spacecraft instead of before it (only to show the one-step command delay
    that order gives; never used for the references).

    `command_mode="fsw"` (a cross-check of the timing, not used for the references): instead of splitting the
    run at the CSV times, the wheel command is written at every tick by a Python module in a second process
    "fsw" (priority 100) below the dynamics process "proc" (priority 200), basilisk.md section 9's layout: at
    t_k the dynamics integrate to t_k, then the module writes u(t_k) (zero-order hold of the CSV), which the
    wheel effector reads at t_{k+1} for the step [t_k, t_{k+1}].

    With `record=False` no recorder or logger is attached (for timing) and only `wall_s`, `cpu_s` (process
    CPU time of `ExecuteSimulation`) and `bsk_version` are returned.
    """
    from Basilisk.architecture import messaging
    from Basilisk.simulation import extForceTorque, gravityEffector, hingedRigidBodyStateEffector, spacecraft
    from Basilisk.utilities import SimulationBaseClass, macros

    simcfg = scenario["simulation"]
    if simcfg.get("integrator", "rk4") != "rk4":
        raise ValueError(
            f"simulation.integrator = {simcfg['integrator']!r}: the Basilisk runner only does 'rk4'"
        )
    dt_ns = _ns(simcfg["dt"], "simulation.dt")
    if dt_ns != macros.sec2nano(simcfg["dt"]) or dt_ns <= 0:
        raise ValueError(f"simulation.dt = {simcfg['dt']!r}: bad step")
    save_ns = _ns(simcfg["save_dt"], "simulation.save_dt", dt_ns)
    t_end_ns = _ns(simcfg["t_end"], "simulation.t_end", dt_ns)

    if command_mode not in ("segments", "fsw"):
        raise ValueError(f"command_mode = {command_mode!r}")
    fsw_mode = command_mode == "fsw" and bool(scenario.get("wheels"))
    sim = SimulationBaseClass.SimBaseClass()
    if fsw_mode:
        proc = sim.CreateNewProcess("proc", 200)
        proc.addTask(sim.CreateNewTask("task", dt_ns))
        fsw_proc = sim.CreateNewProcess("fsw", 100)
        fsw_proc.addTask(sim.CreateNewTask("fswTask", dt_ns))
    else:  # with [control], the flight-software process ("fswProc", 100) runs after this one at each time
        proc = sim.CreateNewProcess("proc", 200) if scenario.get("control") else sim.CreateNewProcess("proc")
        proc.addTask(sim.CreateNewTask("task", dt_ns))

    sc = spacecraft.Spacecraft()
    sc.ModelTag = "spacecraftBody"
    h = scenario["hub"]
    sc.hub.mHub = float(h["mHub"])
    sc.hub.IHubPntBc_B = _mat(h["IHubPntBc_B"])
    sc.hub.r_BcB_B = _col(h.get("r_BcB_B", [0.0, 0.0, 0.0]))
    sc.hub.r_CN_NInit = _col(h["r_CN_NInit"])
    sc.hub.v_CN_NInit = _col(h["v_CN_NInit"])
    sc.hub.sigma_BNInit = _col(h["sigma_BNInit"])
    sc.hub.omega_BN_BInit = _col(h["omega_BN_BInit"])

    keep = []  # keep message objects alive for the whole run
    panels = []
    for i, p in enumerate(scenario.get("panels", [])):
        e = hingedRigidBodyStateEffector.HingedRigidBodyStateEffector()
        name = p.get("name", f"p{i}")
        e.ModelTag = f"panel_{name}"
        e.mass = float(p["mass"])
        e.IPntS_S = _mat(p["IPntS_S"])
        e.d = float(p["d"])
        e.k = float(p["k"])
        e.c = float(p["c"])
        e.r_HB_B = _col(p["r_HB_B"])
        e.dcm_HB = _mat(p["dcm_HB"])
        e.thetaInit = float(p["thetaInit"])
        e.thetaDotInit = float(p["thetaDotInit"])
        e.thetaRef = float(p.get("thetaRef", 0.0))
        e.thetaDotRef = float(p.get("thetaDotRef", 0.0))
        e.nameOfThetaState = f"hingedRigidBodyTheta_{i}_{name}"
        e.nameOfThetaDotState = f"hingedRigidBodyThetaDot_{i}_{name}"
        u = float(p.get("motorTorque", 0.0))
        if u != 0.0:
            pl = messaging.ArrayMotorTorqueMsgPayload()
            pl.motorTorque = [u]
            msg = messaging.ArrayMotorTorqueMsg().write(pl)
            e.motorTorqueInMsg.subscribeTo(msg)
            keep += [pl, msg]
        sc.addStateEffector(e)
        panels.append(e)

    chain_states = _add_chains(sc, scenario.get("chains", []), keep)

    wheels = scenario.get("wheels", [])
    rw_eff, rw_pls = _add_wheels(sc, wheels)
    keep += rw_pls
    rows = read_inputs(scenario, base_dir, dt_ns, t_end_ns)
    if rows and not wheels:
        raise ValueError("inputs: a CSV without [[wheels]]: nothing to apply")
    wheel_cmd = None
    control = scenario.get("control")
    if control is not None and (rows or any(float(w.get("u", 0.0)) != 0.0 for w in wheels)):
        raise ValueError("control: the wheel command message is the controller's; no [inputs] or wheel u with it")
    if rw_eff is not None and control is None:
        cmd_pl = messaging.ArrayMotorTorqueMsgPayload()
        cmd_msg = messaging.ArrayMotorTorqueMsg()
        rw_eff.rwMotorCmdInMsg.subscribeTo(cmd_msg)
        keep += [cmd_pl, cmd_msg]
        wheel_cmd = (cmd_pl, cmd_msg, lambda a_ns: _wheel_command(wheels, rows, a_ns))

    mu = float(scenario.get("gravity", {}).get("mu", 0.0))
    if mu > 0.0:
        earth = gravityEffector.GravBodyData()
        earth.planetName = "earth_planet_data"
        earth.mu = mu
        earth.isCentralBody = True
        sc.gravField.gravBodies = spacecraft.GravBodyVector([earth])

    loads = scenario.get("loads", {})
    unknown = set(loads) - {"pulses", *LOAD_KEYS}
    if unknown:
        raise ValueError(f"loads: unknown keys {sorted(unknown)}")
    segments = _segments(loads, t_end_ns, dt_ns, extra_edges=[] if fsw_mode else [t for t, _ in rows])
    if fsw_mode:  # the command is written by a module, not between segments
        cmd_pl, cmd_msg, f = wheel_cmd
        cmd_pl.motorTorque = f(0)
        cmd_msg.write(cmd_pl)  # what the wheels read at t = 0 (for the zero-length first step)
        writer = _fsw_command_writer(cmd_pl, cmd_msg, f)
        sim.AddModelToTask("fswTask", writer)
        keep.append(writer)
        wheel_cmd = None
    ft = None
    if any(np.any(v != 0.0) for _, _, seg in segments for v in seg.values()):
        ft = extForceTorque.ExtForceTorque()
        ft.ModelTag = "extForceTorque"
        sc.addDynamicEffector(ft)

    nav = fsw_rec = None
    if control is not None:
        nav, fsw_rec = _add_control(sim, scenario, sc, rw_eff, dt_ns, keep)
        if fsw_rec[2] is not None:
            sim.AddModelToTask("task", fsw_rec[2])

    # Task order: loads, wheels (read the command, set u_current for the step [t_{k-1}, t_k]), spacecraft
    # (integrates to t_k, then computes energy/momentum and the MRP switch), panels (write their messages from
    # the post-step state), then the recorders.
    if ft is not None:
        sim.AddModelToTask("task", ft)
    if rw_eff is not None and not wheels_after_spacecraft:
        sim.AddModelToTask("task", rw_eff)
    sim.AddModelToTask("task", sc)
    if rw_eff is not None and wheels_after_spacecraft:
        sim.AddModelToTask("task", rw_eff)
    for e in panels:
        sim.AddModelToTask("task", e)
    for e, _, _ in chain_states:
        sim.AddModelToTask("task", e)
    if nav is not None:  # the navigation message holds the state at the end of each step
        sim.AddModelToTask("task", nav)

    if not record:
        wall, cpu = _execute(sim, ft, segments, wheel_cmd)
        return {
            "wall_s": np.asarray(wall),
            "cpu_s": np.asarray(cpu),
            "bsk_version": np.asarray(importlib.metadata.version("bsk")),
        }

    st_rec = sc.scStateOutMsg.recorder(save_ns)
    sim.AddModelToTask("task", st_rec)
    th_recs, cfg_recs = [], []
    for e in panels:
        r = e.hingedRigidBodyOutMsg.recorder(save_ns)
        c = e.hingedRigidBodyConfigLogOutMsg.recorder(save_ns)
        sim.AddModelToTask("task", r)
        sim.AddModelToTask("task", c)
        th_recs.append(r)
        cfg_recs.append(c)
    for e, _, n_ch in chain_states:  # chain panels' config logs follow the single panels'
        msgs = (e.dualHingedRigidBodyConfigLogOutMsgs if hasattr(e, "dualHingedRigidBodyConfigLogOutMsgs")
                else e.nHingedRigidBodyConfigLogOutMsgs)
        for i in range(n_ch):
            c = msgs[i].recorder(save_ns)
            sim.AddModelToTask("task", c)
            cfg_recs.append(c)
    chain_log = None
    if chain_states:
        from Basilisk.utilities import pythonVariableLogger

        def getter(name):
            return lambda _: np.asarray(sc.dynManager.getStateObject(name).getState(), dtype=float).ravel()

        fns = {}
        for j, (_, names, _) in enumerate(chain_states):
            for q in ("theta", "thetaDot"):
                fns[f"c{j}_{q}"] = getter(names[q]) if isinstance(names[q], str) else _concat_getter(
                    [getter(nm) for nm in names[q]]
                )
        chain_log = pythonVariableLogger.PythonVariableLogger(fns, save_ns)
        sim.AddModelToTask("task", chain_log)
    rw_recs = []
    if rw_eff is not None:
        rw_recs = [rw_eff.rwSpeedOutMsg.recorder(save_ns)] + [
            rw_eff.rwOutMsgs[i].recorder(save_ns) for i in range(len(wheels))
        ]
        for r in rw_recs:
            sim.AddModelToTask("task", r)
    ctl_recs = []
    if fsw_rec is not None:  # in the flight-software task, after its modules: the values written at each call
        ctl_recs = [fsw_rec[0].attGuidOutMsg.recorder(save_ns), fsw_rec[1].cmdTorqueOutMsg.recorder(save_ns)]
        for r in ctl_recs:
            sim.AddModelToTask("fswTask", r)
    em_names = ["totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"]
    em_log = sc.logger(em_names, save_ns)
    sim.AddModelToTask("task", em_log)

    wall, cpu = _execute(sim, ft, segments, wheel_cmd)

    # --- collect and check the sample times
    times = np.asarray(st_rec.times(), dtype=np.int64)
    expected = np.arange(0, t_end_ns + 1, save_ns, dtype=np.int64)
    for name, rec_t in [("scStateOutMsg", times), ("logger", np.asarray(em_log.times(), dtype=np.int64))] + [
        (f"panel {i}", np.asarray(r.times(), dtype=np.int64)) for i, r in enumerate(th_recs + cfg_recs)
    ] + [(f"wheel recorder {i}", np.asarray(r.times(), dtype=np.int64)) for i, r in enumerate(rw_recs)] + [
        (f"control recorder {i}", np.asarray(r.times(), dtype=np.int64)) for i, r in enumerate(ctl_recs)
    ]:
        if rec_t.shape != expected.shape or np.any(rec_t != expected):
            raise RuntimeError(f"{name} recorder sample times do not match k*save_dt: {rec_t[:5]}...")
    T, N = len(expected), len(panels)

    def stack3(recs, field):
        if not recs:
            return np.zeros((T, 0, 3))
        return np.stack([np.asarray(getattr(r, field), dtype=float).reshape(T, 3) for r in recs], axis=1)

    def stack1(recs, field):
        if not recs:
            return np.zeros((T, 0))
        return np.stack([np.asarray(getattr(r, field), dtype=float).reshape(T) for r in recs], axis=1)

    out = {
        "t": expected / 1e9,
        "r_BN_N": np.asarray(st_rec.r_BN_N, dtype=float),
        "v_BN_N": np.asarray(st_rec.v_BN_N, dtype=float),
        "r_CN_N": np.asarray(st_rec.r_CN_N, dtype=float),
        "v_CN_N": np.asarray(st_rec.v_CN_N, dtype=float),
        "sigma_BN": np.asarray(st_rec.sigma_BN, dtype=float),
        "omega_BN_B": np.asarray(st_rec.omega_BN_B, dtype=float),
        "theta": stack1(th_recs, "theta"),
        "thetaDot": stack1(th_recs, "thetaDot"),
        "totOrbEnergy": np.asarray(em_log.totOrbEnergy, dtype=float).reshape(T),
        "totRotEnergy": np.asarray(em_log.totRotEnergy, dtype=float).reshape(T),
        "totOrbAngMomPntN_N": np.asarray(em_log.totOrbAngMomPntN_N, dtype=float).reshape(T, 3),
        "totRotAngMomPntC_N": np.asarray(em_log.totRotAngMomPntC_N, dtype=float).reshape(T, 3),
        "panel_r_SN_N": stack3(cfg_recs, "r_BN_N"),
        "panel_v_SN_N": stack3(cfg_recs, "v_BN_N"),
        "panel_sigma_SN": stack3(cfg_recs, "sigma_BN"),
        "panel_omega_SN_S": stack3(cfg_recs, "omega_BN_B"),
        "mrp_switch_count": np.asarray(int(sc.hub.MRPSwitchCount)),
        "wall_s": np.asarray(wall),
        "cpu_s": np.asarray(cpu),  # returned, not saved
        "bsk_version": np.asarray(importlib.metadata.version("bsk")),
    }
    if chain_log is not None:
        if np.any(np.asarray(chain_log.times(), dtype=np.int64) != expected):
            raise RuntimeError("chain logger sample times do not match k*save_dt")
        th = [out["theta"]] + [np.asarray(getattr(chain_log, f"c{j}_theta")).reshape(T, -1)
                               for j in range(len(chain_states))]
        thd = [out["thetaDot"]] + [np.asarray(getattr(chain_log, f"c{j}_thetaDot")).reshape(T, -1)
                                   for j in range(len(chain_states))]
        out["theta"], out["thetaDot"] = np.concatenate(th, 1), np.concatenate(thd, 1)
    if rw_recs:
        W = len(wheels)
        out["Omega"] = np.asarray(rw_recs[0].wheelSpeeds, dtype=float).reshape(T, -1)[:, :W].copy()
        out["rw_u_current"] = np.stack(
            [np.asarray(r.u_current, dtype=float).reshape(T) for r in rw_recs[1:]], axis=1
        )
    if ctl_recs:
        out["sigma_BR"] = np.asarray(ctl_recs[0].sigma_BR, dtype=float).reshape(T, 3)
        out["omega_BR_B"] = np.asarray(ctl_recs[0].omega_BR_B, dtype=float).reshape(T, 3)
        out["Lr"] = np.asarray(ctl_recs[1].torqueRequestBody, dtype=float).reshape(T, 3)
    for k in ("r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N", "sigma_BN", "omega_BN_B"):
        if out[k].shape != (T, 3):
            raise RuntimeError(f"{k}: unexpected shape {out[k].shape}")
    assert N + sum(len(c["panels"]) for c in scenario.get("chains", [])) == out["theta"].shape[1]
    return out


def save(out, path):
    keys = OUTPUT_KEYS + WHEEL_OUTPUT_KEYS + CONTROL_OUTPUT_KEYS
    np.savez_compressed(path, **{k: out[k] for k in keys if k in out})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python tests/data/bsk/bsk_run.py SCENARIO.toml OUT.npz", file=sys.stderr)
        return 2
    scen = load_scenario(argv[0])
    out = run(scen, base_dir=pathlib.Path(argv[0]).resolve().parent)
    save(out, argv[1])
    n_steps = round(scen["simulation"]["t_end"] / scen["simulation"]["dt"])
    print(
        f"{argv[0]} -> {argv[1]}: {len(out['t'])} samples, {out['theta'].shape[1]} panels, "
        f"{out['Omega'].shape[1] if 'Omega' in out else 0} wheels, "
        f"{n_steps} steps, wall {float(out['wall_s']):.4f} s, MRP switches {int(out['mrp_switch_count'])}, "
        f"bsk {out['bsk_version']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
