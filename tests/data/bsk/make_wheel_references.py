"""Generate the Basilisk reaction-wheel references in tests/data/bsk/ and check them.

Requires Basilisk (`pip install bsk==2.12.1`); jaxhinge's tests only read the files.

    python tests/data/bsk/make_wheel_references.py [OUT_DIR]

Writes (OUT_DIR defaults to tests/data/bsk):

- `wheels_mixed.toml`, `wheels_mixed_inputs.csv`, `wheels_mixed.npz`: hub (750 kg, diag(900, 800, 600), CoM
  offset) + two single hinged panels + one dualHinged chain of two panels (`wingA` of
  make_chain_references.py's `chain_dual_mixed`) + four balanced wheels in a pyramid (spin axes
  [+-1, +-1, 1]/sqrt(3), 54.74 deg from b3); motor torques [0.05, -0.03, 0.02, -0.04] N m on [0, 15) s, then
  [-0.02, 0.04, -0.05, 0.01] N m on [15, 30] s (wheel rw3 has u_max = 0.04 N m, so its -0.05 is clipped to
  -0.04); no gravity; rk4, dt = 1 ms, 30 s, saved every 0.1 s.
- `wheels_conserve.toml`, `wheels_conserve.npz`: the same spacecraft, u = 0, c = 0 on every hinge, no
  friction, no gravity: Basilisk's own energy and momentum drift with wheels.
- `wheels_slew_record.toml`, `wheels_slew_record_inputs.csv`, `wheels_slew_record.npz`: the bundled example
  `jaxhinge/examples/wheels_slew.toml` (three panels, four pyramid wheels at 100-600 rad/s, its recorded 60 s
  slew with an identification burst of wheel torque commands) with the "true" hinges of `RECORD_TRUTH` (the example holds the nominal
  values a fit starts from), rk4, dt = 5 ms, saved every 0.1 s; and from it the flight-like record
  `jaxhinge/examples/wheels_slew_record.csv`: gyro rates `omega_BN_B_1..3` + white noise of 1e-5 rad/s and
  wheel speeds `Omega_rw1..4` + white noise of 0.01 rad/s (numpy default_rng(RECORD_SEED)), 601 samples.
- `rw_unit/*.toml` (+ `_inputs.csv`, `.npz`) and `rw_unit_tests.json`: Basilisk's own wheel unit tests
  (`test_reactionWheelStateEffector_integrated.py`, `test_reactionWheelStateEffector_ConfigureRWRequests.py`)
  as scenario files, their truth values (file, lines, tolerance) and what bsk 2.12.1 gives here.

Checks run on the way (the script fails if one does not hold):

- timing: the wheel's inertial spin momentum h_i = Js_i (Omega_i + gsHat_i . omega_BN_B) obeys dh_i/dt = u_i
  exactly for balanced wheels without friction (RK4 integrates it exactly), so h_i(t) - h_i(0) is the integral
  of the applied torque: it must equal u1 t up to 15 s and u1 15 + u2 (t - 15) after, i.e. the new command acts
  from the step that *starts* at 15 s; the run with the wheel effector after the spacecraft in the task shows
  the one-step (1 ms) delay instead; the "fsw" layout of basilisk.md section 9 (a command-writing module in a
  lower-priority process) gives the same bits as the segment switch;
- wheel mass properties: the wheel `mass`, `rWB_B`, `Jt`, `Jg`, `U_s`, `U_d` change nothing (BalancedWheels);
- energy/momentum: Basilisk's totals equal hub + wheel formulas recomputed from the logged state (no panels);
- Basilisk's unit-test truths, run both the way the test file builds them (rwFactory) and through
  bsk_run.py on the scenario files here (same bits).
"""

import copy
import csv
import json
import math
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ next to the data
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bsk_run
import make_chain_references as mcr
from make_references import _table

RPM = 2.0 * math.pi / 60.0  # Basilisk macros.RPM
MU = 0.3986004415e15
BSK_SRC_COMMIT = "babdff7a60ae9654f269059f28d83c604ed8c5ad"  # AVSLab/basilisk develop, 2026-07-22 (2.12.0b0)
RW_TEST_DIR = "src/simulation/dynamics/reactionWheels/_UnitTest"
FAILS = []


def check(name, ok, detail=""):
    print(f"  [{'ok' if ok else 'FAIL'}] {name} {detail}", flush=True)
    if not ok:
        FAILS.append(name)
    return bool(ok)


# ---------------------------------------------------------------------------------------------------------
# Writing scenario files (jaxhinge's dump_scenario does not know [[wheels]] yet)


def to_toml(header, scen):
    lines = [f"# {x}" for x in header.splitlines()]
    lines += ["# jaxhinge scenario (SI units, radians; Basilisk names and frames)", ""]
    _table(lines, "[hub]", scen["hub"])
    for p in scen.get("panels", []):
        _table(lines, "[[panels]]", p)
    for ch in scen.get("chains", []):
        _table(lines, "[[chains]]", {k: v for k, v in ch.items() if k != "panels"})
        for p in ch["panels"]:
            _table(lines, "[[chains.panels]]", p)
    for w in scen.get("wheels", []):
        _table(lines, "[[wheels]]", w)
    if "inputs" in scen:
        _table(lines, "[inputs]", scen["inputs"])
    if "gravity" in scen:
        _table(lines, "[gravity]", scen["gravity"])
    if "control" in scen:
        _table(lines, "[control]", scen["control"])
    _table(lines, "[simulation]", scen["simulation"])
    return "\n".join(lines)


def write_csv(path, names, rows):
    with open(path, "w", newline="") as f:
        wr = csv.writer(f, lineterminator="\n")
        wr.writerow(["t"] + [f"u_{n}" for n in names])
        for t, u in rows:
            wr.writerow([repr(float(t))] + [repr(float(x)) for x in u])


def write_case(out_dir, name, header, scen, csv_rows=None):
    """Write NAME.toml (+ NAME_inputs.csv), run it through bsk_run exactly as read back, save NAME.npz."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scen = copy.deepcopy(scen)
    if csv_rows is not None:
        scen["inputs"] = {"csv": f"{name}_inputs.csv", "hold": "zoh"}
        write_csv(out_dir / f"{name}_inputs.csv", [w["name"] for w in scen["wheels"]], csv_rows)
    toml = out_dir / f"{name}.toml"
    toml.write_text(to_toml(f"{name}: {header}", scen))
    read = bsk_run.load_scenario(toml)
    out = bsk_run.run(read, base_dir=out_dir)
    bsk_run.save(out, out_dir / f"{name}.npz")
    print(
        f"{name}: {len(out['t'])} samples, theta {out['theta'].shape}, Omega {out['Omega'].shape}, "
        f"wall {float(out['wall_s']):.2f} s, MRP switches {int(out['mrp_switch_count'])}",
        flush=True,
    )
    return read, out


# ---------------------------------------------------------------------------------------------------------
# The spacecraft of wheels_mixed / wheels_conserve

PYRAMID = [(1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)]  # b1, b2 signs; b3 component +1; / sqrt(3)
JS = [0.12, 0.159, 0.18, 0.14]
OMEGA0 = [150.0, 320.0, 480.0, 260.0]  # rad/s
U1 = [0.05, -0.03, 0.02, -0.04]  # N m on [0, 15) s
U2 = [-0.02, 0.04, -0.05, 0.01]  # N m on [15, 30] s
U_MAX = [0.2, 0.2, 0.04, None]  # rw3: its U2 (-0.05) is clipped to -0.04; rw4: no limit
T_SWITCH, T_END, DT, SAVE_DT = 15.0, 30.0, 1e-3, 0.1


def _gs(sx, sy):
    g = np.array([sx, sy, 1.0]) / math.sqrt(3.0)
    return [float(x) for x in g]


def wheels(u):
    out = []
    for i in range(4):
        w = {"name": f"rw{i + 1}", "gsHat_B": _gs(*PYRAMID[i]), "Js": JS[i], "Omega": OMEGA0[i], "u": u[i]}
        if U_MAX[i] is not None:
            w["u_max"] = U_MAX[i]
        out.append(w)
    return out


def spacecraft(damped):
    wing_a = copy.deepcopy(mcr.dual_mixed()["chains"][0])  # "wingA": non-identical two-panel dualHinged chain
    for p in wing_a["panels"]:
        p.setdefault("thetaRef", 0.0)
        p.setdefault("thetaDotRef", 0.0)
        p.setdefault("motorTorque", 0.0)
        if not damped:
            p["c"] = 0.0
    panels = [
        {
            "name": "boom",
            "mass": 20.0,
            "IPntS_S": [[8.0, 0.0, 0.0], [0.0, 6.0, 0.0], [0.0, 0.0, 4.0]],
            "d": 0.9,
            "k": 80.0,
            "c": 1.5 if damped else 0.0,
            "r_HB_B": [0.0, 0.8, -0.6],
            "dcm_HB": mcr._rot([1, 2, 3], 0.7),
            "thetaInit": 0.05,
            "thetaDotInit": -0.02,
        },
        {
            "name": "wing",
            "mass": 100.0,
            "IPntS_S": [[100.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]],
            "d": 1.5,
            "k": 150.0,
            "c": 4.0 if damped else 0.0,
            "r_HB_B": [-0.5, 0.0, 1.0],
            "dcm_HB": mcr.EYE,
            "thetaInit": -0.08,
            "thetaDotInit": 0.0,
        },
    ]
    for p in panels:
        p.update(thetaRef=0.0, thetaDotRef=0.0, motorTorque=0.0)
    return {
        "hub": {
            "mHub": 750.0,
            "IHubPntBc_B": mcr.HUB["IHubPntBc_B"],
            "r_BcB_B": [0.03, -0.02, 0.05],
            "r_CN_NInit": [0.1, -0.4, 0.3],
            "v_CN_NInit": [-0.02, 0.05, 0.01],
            "sigma_BNInit": [0.1, -0.2, 0.05],
            "omega_BN_BInit": [0.03, -0.02, 0.04],
        },
        "panels": panels,
        "chains": [wing_a],
        "simulation": {"t_end": T_END, "save_dt": SAVE_DT, "integrator": "rk4", "dt": DT},
    }


def wheels_mixed():
    scen = spacecraft(damped=True)
    scen["wheels"] = wheels([0.0] * 4)  # the commands are all in the [inputs] CSV (jaxhinge adds u and the CSV)
    rows = [(0.0, U1), (T_SWITCH, U2), (T_END, U2)]
    return scen, rows


RECORD_TRUTH = {"wing_pY": (540.0, 9.5), "wing_mY": (470.0, 7.0), "antenna": (160.0, 2.1)}  # (k, c)
RECORD_SEED = 29
RECORD_SIGMA = {"omega_BN_B": 1e-5, "Omega": 0.01}  # gyro [rad/s], wheel tachometer [rad/s]
EXAMPLES = HERE.parents[2] / "jaxhinge" / "examples"


def wheels_slew_record():
    """The bundled wheel example with the true hinges, and its recorded commands (as rows of the CSV)."""
    import tomllib

    scen = tomllib.loads((EXAMPLES / "wheels_slew.toml").read_text())
    for p in scen["panels"]:
        p["k"], p["c"] = RECORD_TRUTH[p["name"]]
        for key in ("thetaRef", "thetaDotRef", "motorTorque"):
            p.setdefault(key, 0.0)
    for key in ("r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit"):
        scen["hub"].setdefault(key, [0.0, 0.0, 0.0])
    scen.pop("inputs")
    scen["simulation"]["dt"] = 0.005
    rows = []
    with open(EXAMPLES / "wheels_slew_inputs.csv") as f:
        for r in csv.reader(f):
            if r and not r[0].startswith("#") and r[0] != "t":
                rows.append((float(r[0]), [float(x) for x in r[1:]]))
    return scen, rows


def write_record(out, path):
    """The flight-like telemetry CSV of the slew: Basilisk's rates and wheel speeds plus white noise."""
    rng = np.random.default_rng(RECORD_SEED)
    gyro = out["omega_BN_B"] + RECORD_SIGMA["omega_BN_B"] * rng.standard_normal(out["omega_BN_B"].shape)
    tach = out["Omega"] + RECORD_SIGMA["Omega"] * rng.standard_normal(out["Omega"].shape)
    truth = ", ".join(f"{n}: k = {k:g} N m/rad, c = {c:g} N m s/rad" for n, (k, c) in RECORD_TRUTH.items())
    with open(path, "w", newline="") as f:
        f.write("# A 60 s slew record of jaxhinge/examples/wheels_slew.toml, made by Basilisk 2.12.1\n"
                f"# (tests/data/bsk/make_wheel_references.py) with the true hinges {truth},\n"
                "# the recorded wheel torque commands of wheels_slew_inputs.csv, rk4 at 5 ms. Gyro rates + white\n"
                f"# noise of {RECORD_SIGMA['omega_BN_B']:g} rad/s, wheel speeds + white noise of "
                f"{RECORD_SIGMA['Omega']:g} rad/s (seed {RECORD_SEED}).\n")
        wr = csv.writer(f, lineterminator="\n")
        wr.writerow(["t"] + [f"omega_BN_B_{i}" for i in (1, 2, 3)] + [f"Omega_rw{i}" for i in (1, 2, 3, 4)])
        for t, g, w in zip(out["t"], gyro, tach):
            wr.writerow([repr(round(float(t), 10))] + [f"{x:.10e}" for x in g] + [f"{x:.8f}" for x in w])


def make_record(out_dir):
    """Run `wheels_slew_record` in Basilisk, write its files and the noisy CSV record; its drifts."""
    scen, rows = wheels_slew_record()
    truth = "; ".join(f"{n} k = {k:g}, c = {c:g}" for n, (k, c) in RECORD_TRUTH.items())
    _, out = write_case(
        out_dir,
        "wheels_slew_record",
        f"jaxhinge/examples/wheels_slew.toml with the true hinges of a flight-like record\n({truth}) and the "
        "example's recorded wheel torque commands (zero-order hold). No gravity.\nrk4, dt = 5 ms, 60 s. "
        "Generated by tests/data/bsk/make_wheel_references.py; Basilisk reference: the .npz\nof the same name; "
        "the noisy record made from it: jaxhinge/examples/wheels_slew_record.csv.",
        scen,
        rows,
    )
    write_record(out, EXAMPLES / "wheels_slew_record.csv" if out_dir == HERE else out_dir / "wheels_slew_record.csv")
    return {k: v for k, v in drift(out).items() if "Orb" not in k}


def wheels_conserve():
    scen = spacecraft(damped=False)
    scen["wheels"] = wheels([0.0] * 4)
    return scen


# ---------------------------------------------------------------------------------------------------------
# Checks on the generated data


def _dcm_BN(s):
    s = np.asarray(s, float)
    s2 = s @ s
    st = np.array([[0, -s[2], s[1]], [s[2], 0, -s[0]], [-s[1], s[0], 0]])
    return np.eye(3) + (8 * st @ st - 4 * (1 - s2) * st) / (1 + s2) ** 2


def applied_torque(u):
    """The command after Basilisk's u_max clip (|u| > u_max > 0 -> +-u_max)."""
    return np.array([min(max(x, -m), m) if m else x for x, m in zip(u, U_MAX)])


def spin_momentum(scen, out):
    G = np.array([w["gsHat_B"] for w in scen["wheels"]])
    Js = np.array([w["Js"] for w in scen["wheels"]])
    return Js * (out["Omega"] + out["omega_BN_B"] @ G.T)


def check_mixed(scen, rows, out, out_dir):
    print("checks: wheels_mixed")
    t = out["t"]
    u1, u2 = applied_torque(rows[0][1]), applied_torque(rows[1][1])
    h = spin_momentum(scen, out)
    dh = h - h[0]
    expect = np.where(t[:, None] <= T_SWITCH, u1 * t[:, None], u1 * T_SWITCH + u2 * (t[:, None] - T_SWITCH))
    err = float(np.max(np.abs(dh - expect)))
    check(
        "timing: h_i(t) - h_i(0) = integral of u_i, switch acting from the step starting at 15 s",
        err < 1e-10,
        f"(max |error| {err:.2e} N m s; a 1 ms shift would be {np.max(np.abs(u2 - u1)) * 1e-3:.1e})",
    )
    # the logged torque: u_current at sample t acted over the step ending at t
    uc = out["rw_u_current"]
    ok = np.all(uc[t <= T_SWITCH] == u1) and np.all(uc[t > T_SWITCH] == u2)
    check(
        "rw_u_current = u1 for t <= 15 s (the step ending at 15 s), clipped u2 after",
        ok,
        f"(u2 applied {u2.tolist()})",
    )
    # one-step delay when the wheel effector runs after the spacecraft
    late = bsk_run.run(scen, base_dir=out_dir, wheels_after_spacecraft=True)
    dh_late = spin_momentum(scen, late) - spin_momentum(scen, late)[0]
    shift = (dh_late - expect)[t > T_SWITCH]
    err_late = float(np.max(np.abs(shift - (u1 - u2) * DT)))
    check(
        "wheel effector after the spacecraft: the switch acts 1 ms late (h shifted by (u1 - u2) dt)",
        err_late < 1e-10,
        f"(max |error| {err_late:.2e})",
    )
    # basilisk.md section 9 layout: a command module in a lower-priority FSW process
    fsw = bsk_run.run(scen, base_dir=out_dir, command_mode="fsw")
    same = all(np.array_equal(fsw[k], out[k]) for k in out if k not in ("wall_s", "cpu_s"))
    check(
        "fsw layout (dynamics priority 200 > fsw 100, command written each tick) == segment switch, bit for bit",
        same,
    )
    return {"timing_max_err": err, "late_variant_shift_err": err_late, "fsw_layout_identical": same}


def check_mass_props(scen, out_dir):
    """Wheel mass, position, transverse inertia and imbalance must change nothing (BalancedWheels)."""
    print("checks: wheel mass properties")
    orig = bsk_run._add_wheels

    def heavy(sc, ws):
        eff, pls = orig(sc, ws)
        for i, rw in enumerate(pls):
            rw.mass = 12.0
            rw.rWB_B = [[0.3 * (i + 1)], [-0.2], [0.5]]
            rw.Jt = 0.7
            rw.Jg = 0.9
            rw.U_s = 1e-3
            rw.U_d = 1e-4
        return eff, pls

    short = copy.deepcopy(scen)
    short["simulation"].update(t_end=2.0)
    ref = bsk_run.run(short, base_dir=out_dir)
    bsk_run._add_wheels = heavy
    try:
        mod = bsk_run.run(short, base_dir=out_dir)
    finally:
        bsk_run._add_wheels = orig
    same = all(np.array_equal(mod[k], ref[k]) for k in ref if k not in ("wall_s", "cpu_s"))
    check(
        "wheel mass = 12 kg, rWB_B != 0, Jt, Jg, U_s, U_d != 0: identical trajectory (no mass properties)",
        same,
    )
    return same


def hub_wheel_energy_momentum(scen, out):
    """Hub + balanced wheels (no panels): Basilisk's totRotEnergy / totRotAngMomPntC_N from the logged state."""
    I = np.array(scen["hub"]["IHubPntBc_B"], float)
    G = np.array([w["gsHat_B"] for w in scen["wheels"]])
    Js = np.array([w["Js"] for w in scen["wheels"]])
    E, H = [], []
    for k in range(len(out["t"])):
        w = out["omega_BN_B"][k]
        Om = out["Omega"][k]
        # about C = Bc for a hub alone: rotational energy 1/2 w.I w, momentum I w (r_BcB_B terms cancel against
        # the -m c x cDot and -1/2 m cDot^2 shifts)
        e = 0.5 * w @ I @ w + np.sum(0.5 * Js * Om**2 + Js * Om * (G @ w))
        hb = I @ w + (Js * Om) @ G
        E.append(e)
        H.append(_dcm_BN(out["sigma_BN"][k]).T @ hb)
    return np.array(E), np.array(H)


def check_conserve(scen, out):
    print("checks: wheels_conserve")
    E, H = out["totRotEnergy"], out["totRotAngMomPntC_N"]
    dE = float(np.max(np.abs(E - E[0])) / abs(E[0]))
    dH = float(np.max(np.linalg.norm(H - H[0], axis=1)) / np.linalg.norm(H[0]))
    Eo, Ho = out["totOrbEnergy"], out["totOrbAngMomPntN_N"]
    dEo = float(np.max(np.abs(Eo - Eo[0])) / abs(Eo[0]))
    dHo = float(np.max(np.linalg.norm(Ho - Ho[0], axis=1)) / np.linalg.norm(Ho[0]))
    check("totRotEnergy conserved", dE < 1e-10, f"(max rel drift {dE:.2e})")
    check("totRotAngMomPntC_N conserved", dH < 1e-10, f"(max rel drift {dH:.2e})")
    check("totOrbEnergy, totOrbAngMomPntN_N conserved", max(dEo, dHo) < 1e-10, f"({dEo:.2e}, {dHo:.2e})")
    return {"totRotEnergy": dE, "totRotAngMomPntC_N": dH, "totOrbEnergy": dEo, "totOrbAngMomPntN_N": dHo}


def drift(out):
    E, H = out["totRotEnergy"], out["totRotAngMomPntC_N"]
    return {
        "totRotEnergy_max_rel_drift": float(np.max(np.abs(E - E[0])) / abs(E[0])),
        "totRotAngMomPntC_N_max_rel_drift": float(
            np.max(np.linalg.norm(H - H[0], axis=1)) / np.linalg.norm(H[0])
        ),
        "totOrbEnergy_max_rel_drift": float(
            np.max(np.abs(out["totOrbEnergy"] - out["totOrbEnergy"][0])) / abs(out["totOrbEnergy"][0])
        ),
        "totOrbAngMomPntN_N_max_rel_drift": float(
            np.max(np.linalg.norm(out["totOrbAngMomPntN_N"] - out["totOrbAngMomPntN_N"][0], axis=1))
            / np.linalg.norm(out["totOrbAngMomPntN_N"][0])
        ),
    }


# ---------------------------------------------------------------------------------------------------------
# Basilisk's own wheel unit tests

# test_reactionWheelStateEffector_integrated.py, BalancedWheels and BOE cases (file lines at BSK_SRC_COMMIT)
HR16_JS = 100.0 / (
    6000.0 * RPM
)  # maxMomentum 100 N m s / Omega_max 6000 RPM (rwFactory: Js = maxMomentum/Omega_max)
ORBIT = {
    "r_CN_NInit": [-4020338.690396649, 7490566.741852513, 5248299.211589362],
    "v_CN_NInit": [-5199.77710904224, -3436.681645356935, 1041.576797498721],
}
BAL_TRUE_POS = [-4.02553766e06, 7.48712857e06, 5.24933964e06]  # lines 305-307
BAL_TRUE_SIGMA = [1.99853994e-02, 2.45647716e-03, 8.45356279e-06]  # lines 309-311


def _bsk_integrated_test(case):
    """The test's own set-up (lines 71-266, rwFactory, every step logged), run with the installed bsk."""
    from Basilisk.architecture import messaging
    from Basilisk.simulation import gravityEffector, reactionWheelStateEffector, spacecraft
    from Basilisk.utilities import SimulationBaseClass, macros, simIncludeRW

    sc = spacecraft.Spacecraft()
    sc.ModelTag = "spacecraftBody"
    sim = SimulationBaseClass.SimBaseClass()
    step = 0.0001 if case == "BalancedWheels" else 0.1
    sim.CreateNewProcess("TestProcess").addTask(sim.CreateNewTask("unitTask", macros.sec2nano(step)))
    f = simIncludeRW.rwFactory()
    model = reactionWheelStateEffector.BalancedWheels
    if case == "BalancedWheels":
        f.create(
            "Honeywell_HR16",
            [1, 0, 0],
            Omega=500.0,
            rWB_B=[0.1, 0.0, 0.0],
            maxMomentum=100.0,
            RWModel=model,
            fCoulomb=10,
            fStatic=5,
            cViscous=3,
            useRWfriction=True,
        )
        f.rwList["RW1"].fCoulomb = 0.0
        f.rwList["RW1"].fStatic = 0.0
        f.rwList["RW1"].cViscous = 0.0
        f.create(
            "Honeywell_HR16", [0, 1, 0], Omega=200.0, rWB_B=[0.0, 0.1, 0.0], maxMomentum=100.0, RWModel=model
        )
        f.create(
            "Honeywell_HR16", [0, 0, 1], Omega=-150.0, rWB_B=[0.0, 0.0, 0.1], maxMomentum=100.0, RWModel=model
        )
    else:
        f.create(
            "Honeywell_HR16", [0, 0, 1], Omega=100.0, rWB_B=[0.0, 0.0, 0.0], maxMomentum=100.0, RWModel=model
        )
    for rw in f.rwList.values():
        rw.U_d *= 1e4
        rw.U_s *= 1e4
    eff = reactionWheelStateEffector.ReactionWheelStateEffector()
    f.addToSpacecraft("ReactionWheels", eff, sc)
    cmd = messaging.ArrayMotorTorqueMsgPayload()
    cmd.motorTorque = [0.20, 0.10, -0.50] if case == "BalancedWheels" else [0.0]
    cmd_msg = messaging.ArrayMotorTorqueMsg().write(cmd)
    eff.rwMotorCmdInMsg.subscribeTo(cmd_msg)
    sim.AddModelToTask("unitTask", eff)
    sim.AddModelToTask("unitTask", sc)
    if case == "BalancedWheels":
        earth = gravityEffector.GravBodyData()
        earth.planetName = "earth_planet_data"
        earth.mu = MU
        earth.isCentralBody = True
        sc.gravField.gravBodies = spacecraft.GravBodyVector([earth])
    st = sc.scStateOutMsg.recorder()
    sp = eff.rwSpeedOutMsg.recorder()
    sim.AddModelToTask("unitTask", st)
    sim.AddModelToTask("unitTask", sp)
    if case == "BalancedWheels":
        sc.hub.r_BcB_B = [[-0.0002], [0.0001], [0.1]]
        sc.hub.r_CN_NInit = [[x] for x in ORBIT["r_CN_NInit"]]
        sc.hub.v_CN_NInit = [[x] for x in ORBIT["v_CN_NInit"]]
        sc.hub.omega_BN_BInit = [[0.08], [0.01], [0.0]]
        sc.hub.mHub = 750.0
        sc.hub.IHubPntBc_B = [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]]
        sc.hub.sigma_BNInit = [[0.0], [0.0], [0.0]]
    else:
        js = 100.0 / (6000.0 * macros.RPM)
        sc.hub.mHub = 5.0
        sc.hub.IHubPntBc_B = [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0 + js]]
        sc.hub.sigma_BNInit = [[0.0], [0.0], [0.0]]
        sc.hub.omega_BN_BInit = [[0.0], [0.0], [0.35]]
        sc.hub.r_CN_NInit = [[0.0], [0.0], [0.0]]
        sc.hub.v_CN_NInit = [[0.0], [0.0], [0.0]]
    log = sc.logger(["totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy", "totRotEnergy"])
    sim.AddModelToTask("unitTask", log)
    sim.InitializeSimulation()
    stop = 1.0 if case == "BalancedWheels" else 10.0
    sim.ConfigureStopTime(macros.sec2nano(stop / 2))
    sim.ExecuteSimulation()
    cmd.motorTorque = [0.0, 0.0, 0.0] if case == "BalancedWheels" else [0.2]
    cmd_msg.write(cmd)
    sim.ConfigureStopTime(macros.sec2nano(stop))
    sim.ExecuteSimulation()
    return {
        "t": np.asarray(st.times()) * 1e-9,
        "r_BN_N": np.asarray(st.r_BN_N),
        "sigma_BN": np.asarray(st.sigma_BN),
        "omega_BN_B": np.asarray(st.omega_BN_B),
        "Omega": np.asarray(sp.wheelSpeeds)[:, : len(f.rwList)],
        "totOrbAngMomPntN_N": np.asarray(log.totOrbAngMomPntN_N),
        "totRotAngMomPntC_N": np.asarray(log.totRotAngMomPntC_N),
        "totOrbEnergy": np.asarray(log.totOrbEnergy),
        "totRotEnergy": np.asarray(log.totRotEnergy),
    }


def _np(o):
    """numpy scalars and arrays for json."""
    if isinstance(o, (np.generic, np.ndarray)):
        return o.tolist()
    raise TypeError(type(o))


def _rel(a, b):
    """isArrayEqualRelative's measure: max over components of |a - b| / |b|."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def _scen_balanced():
    hub = {
        "mHub": 750.0,
        "IHubPntBc_B": [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]],
        "r_BcB_B": [-0.0002, 0.0001, 0.1],
        **ORBIT,
        "sigma_BNInit": [0.0, 0.0, 0.0],
        "omega_BN_BInit": [0.08, 0.01, 0.0],
    }
    axes = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    rpm = [500.0, 200.0, -150.0]
    u0 = [0.2, 0.1, -0.5]
    ws = [
        {
            "name": f"rw{i + 1}",
            "gsHat_B": axes[i],
            "Js": HR16_JS,
            "Omega": rpm[i] * RPM,
            "u": 0.0,  # the commands are in the [inputs] CSV (jaxhinge adds u and the CSV)
            "u_max": 0.2,
        }
        for i in range(3)
    ]
    scen = {
        "hub": hub,
        "wheels": ws,
        "gravity": {"mu": MU},
        "simulation": {"t_end": 1.0, "save_dt": 0.01, "integrator": "rk4", "dt": 0.0001},
    }
    return scen, [(0.0, u0), (0.5, [0.0] * 3), (1.0, [0.0] * 3)]


def _scen_boe():
    hub = {
        "mHub": 5.0,
        "IHubPntBc_B": [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0 + HR16_JS]],
        "r_BcB_B": [0.0, 0.0, 0.0],
        "r_CN_NInit": [0.0, 0.0, 0.0],
        "v_CN_NInit": [0.0, 0.0, 0.0],
        "sigma_BNInit": [0.0, 0.0, 0.0],
        "omega_BN_BInit": [0.0, 0.0, 0.35],
    }
    ws = [
        {
            "name": "rw1",
            "gsHat_B": [0.0, 0.0, 1.0],
            "Js": HR16_JS,
            "Omega": 100.0 * RPM,
            "u": 0.0,
            "u_max": 0.2,
        }
    ]
    scen = {
        "hub": hub,
        "wheels": ws,
        "simulation": {"t_end": 10.0, "save_dt": 0.1, "integrator": "rk4", "dt": 0.1},
    }
    return scen, [(0.0, [0.0]), (5.0, [0.2]), (10.0, [0.2])]


def _boe_truth():
    """The test's back-of-envelope solution (lines 281-294): torque 0.2 N m from t = 5 s, I1Hub = 2."""
    w0, u, I1, js, om0 = 0.35, 0.2, 2.0, HR16_JS, 100.0 * RPM
    out = []
    for t in [2.0, 4.0, 6.0, 8.0, 10.0]:
        if t > 5.0:
            out.append(
                {
                    "t": t,
                    "omega_BN_B_3": w0 - u / I1 * (t - 5.0),
                    "theta": w0 * (t - 5.0) - 0.5 * u / I1 * (t - 5.0) ** 2 + w0 * 5.0,
                    "Omega": om0 + (I1 + js) * u / (I1 * js) * (t - 5.0),
                }
            )
        else:
            out.append({"t": t, "omega_BN_B_3": w0, "theta": w0 * t, "Omega": om0})
    return out


def _scen_saturation():
    hub = {
        "mHub": 750.0,
        "IHubPntBc_B": [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]],
        "r_BcB_B": [0.0, 0.0, 0.0],
        "r_CN_NInit": [0.0, 0.0, 0.0],
        "v_CN_NInit": [0.0, 0.0, 0.0],
        "sigma_BNInit": [0.0, 0.0, 0.0],
        "omega_BN_BInit": [0.0, 0.0, 0.0],
    }
    u_cmd, u_max = [-1.2, 1.5, 2.5], [1.0, 2.0, 2.0]
    ws = [
        {
            "name": f"rw{i + 1}",
            "gsHat_B": [1.0, 0.0, 0.0],
            "Js": 1.0,
            "Omega": 0.0,
            "u": u_cmd[i],
            "u_max": u_max[i],
        }
        for i in range(3)
    ]
    return {
        "hub": hub,
        "wheels": ws,
        "simulation": {"t_end": 1.0, "save_dt": 0.1, "integrator": "rk4", "dt": 0.01},
    }


def _configure_requests_test(case):
    """test_reactionWheelStateEffector_ConfigureRWRequests.py as written: the module alone, ConfigureRWRequests(0)."""
    from Basilisk.architecture import messaging
    from Basilisk.simulation import reactionWheelStateEffector

    eff = reactionWheelStateEffector.ReactionWheelStateEffector()

    def default():
        rw = reactionWheelStateEffector.RWConfigPayload()
        rw.rWB_B = [[0.0], [0.0], [0.0]]
        rw.gsHat_B = [[1.0], [0.0], [0.0]]
        rw.w2Hat0_B = [[0.0], [1.0], [0.0]]
        rw.w3Hat0_B = [[0.0], [0.0], [1.0]]
        rw.RWModel = reactionWheelStateEffector.BalancedWheels
        return rw

    rws = [default(), default(), default()] if case != "minimum" else [default(), default()]
    if case == "saturation":
        rws[0].u_max, rws[1].u_max, rws[2].u_max = 1.0, 2.0, 2.0
        u_cmd = [-1.2, 1.5, 2.5]
    elif case == "minimum":
        rws[0].u_min, rws[1].u_min = 0.1, 0.0
        u_cmd = [-0.09, 0.0001]
    elif case == "speedSaturation":
        for rw, om in zip(rws, [49.0, 51.0, -52.0]):
            rw.Omega_max, rw.Omega = 50.0, om
        u_cmd = [1.5, 1.5, 1.5]
    else:  # powerSaturation
        for rw in rws:
            rw.P_max, rw.Omega = 1.0, 50.0
        u_cmd = [0.01, -0.04, 0.04]
    vec = messaging.RWCmdMsgPayloadVector(len(rws))
    for i, u in enumerate(u_cmd):
        c = messaging.RWCmdMsgPayload()
        c.u_cmd = u
        vec[i] = c
    eff.NewRWCmds = vec
    for rw in rws:
        eff.addReactionWheel(rw)
    eff.ConfigureRWRequests(0.0)
    return [float(eff.ReactionWheelData[i].u_current) for i in range(len(rws))]


CONFIGURE_TRUTH = {  # expOut['u_current'], compared with `!=` (exact) at line 175
    "saturation": ([-1.0, 1.5, 2.0], "118-126"),
    "minimum": ([0.0, 0.0001], "128-134"),
    "speedSaturation": ([1.5, 0.0, 1.5], "136-147"),
    "powerSaturation": ([0.01, -0.02, 0.02], "149-160"),
}


def rw_unit_tests(out_dir, energy_momentum):
    """Run Basilisk's wheel unit tests (their way and through the scenario files); return the JSON record."""
    import importlib.metadata

    unit_dir = out_dir / "rw_unit"
    integ = f"{RW_TEST_DIR}/test_reactionWheelStateEffector_integrated.py"
    conf = f"{RW_TEST_DIR}/test_reactionWheelStateEffector_ConfigureRWRequests.py"
    cases = []

    # --- integrated, BalancedWheels
    print("Basilisk unit test: integrated BalancedWheels")
    own = _bsk_integrated_test("BalancedWheels")
    scen, rows = _scen_balanced()
    read, out = write_case(
        unit_dir,
        "rw_integrated_balanced",
        "Basilisk test_reactionWheelStateEffector_integrated.py, case 'BalancedWheels' (lines 71-266):\n"
        "3 Honeywell_HR16 wheels (maxMomentum 100 N m s: Js = 100/(6000 RPM); u_max 0.2 N m; friction off) on\n"
        "b1, b2, b3 at 500, 200, -150 RPM; commands [0.2, 0.1, -0.5] N m (the -0.5 clipped to -0.2) on [0, 0.5) s,\n"
        "then 0; 750 kg hub, LEO point-mass gravity; rk4, dt = 1e-4 s, 1 s. The test's rWB_B, wheel mass and\n"
        "imbalances do nothing for BalancedWheels and are left out; its Omega_max = 6000 RPM is never reached.\n"
        "Truth (final r_BN_N, sigma_BN, conservation): tests/data/bsk/rw_unit_tests.json.",
        scen,
        rows,
    )
    t_half = int(len(own["totRotEnergy"]) / 2) + 1
    meas = {
        "final r_BN_N vs truePos": _rel(own["r_BN_N"][-1], BAL_TRUE_POS),
        "final sigma_BN vs trueSigma": _rel(own["sigma_BN"][-1], BAL_TRUE_SIGMA),
        "totOrbAngMomPntN_N final vs initial": _rel(
            own["totOrbAngMomPntN_N"][-1], own["totOrbAngMomPntN_N"][0]
        ),
        "totRotAngMomPntC_N final vs initial": _rel(
            own["totRotAngMomPntC_N"][-1], own["totRotAngMomPntC_N"][0]
        ),
        "totOrbEnergy final vs initial": _rel(own["totOrbEnergy"][-1], own["totOrbEnergy"][0]),
        "totRotEnergy final vs t = 0.5001 s (index len/2 + 1)": _rel(
            own["totRotEnergy"][-1], own["totRotEnergy"][t_half]
        ),
    }
    tol = {k: (1e-7 if "true" in k else 1e-10) for k in meas}
    for k, v in meas.items():
        check(f"BalancedWheels (test's own set-up): {k}", v <= tol[k], f"(rel {v:.2e} <= {tol[k]:g})")
    same = (
        np.array_equal(out["r_BN_N"][-1], own["r_BN_N"][-1])
        and np.array_equal(out["sigma_BN"][-1], own["sigma_BN"][-1])
        and np.array_equal(out["Omega"], own["Omega"][::100])
        and np.array_equal(out["omega_BN_B"], own["omega_BN_B"][::100])
    )
    check(
        "BalancedWheels: bsk_run on rw_integrated_balanced.toml == the test's own set-up, bit for bit", same
    )
    E, H = energy_momentum(read, out)
    eerr = _rel(E, out["totRotEnergy"])
    herr = float(np.max(np.abs(H - out["totRotAngMomPntC_N"])) / np.max(np.abs(out["totRotAngMomPntC_N"])))
    check(
        "BalancedWheels: totRotEnergy = 1/2 w.I w + sum(1/2 Js Omega^2 + Js Omega gs.w) from the logged state",
        eerr < 1e-13,
        f"(rel {eerr:.1e})",
    )
    check(
        "BalancedWheels: totRotAngMomPntC_N = [NB](I w + sum Js Omega gs)", herr < 1e-13, f"(rel {herr:.1e})"
    )
    applied = out["rw_u_current"]
    check(
        "BalancedWheels: rw_u_current = [0.2, 0.1, -0.2] to 0.5 s, then 0",
        np.all(applied[out["t"] <= 0.5] == [0.2, 0.1, -0.2]) and np.all(applied[out["t"] > 0.5] == 0.0),
    )
    cases.append(
        {
            "name": "integrated_BalancedWheels",
            "basilisk_test": {
                "file": integ,
                "function": "reactionWheelIntegratedTest(show_plots, useFlag, 'BalancedWheels')",
                "setup_lines": "71-266",
                "truth_lines": "304-311",
                "check_lines": "457-495",
            },
            "scenario": "rw_unit/rw_integrated_balanced.toml",
            "reference_npz": "rw_unit/rw_integrated_balanced.npz",
            "truth": {
                "final_r_BN_N": {
                    "value": BAL_TRUE_POS,
                    "tolerance": 1e-7,
                    "compare": "isArrayEqualRelative: per component |x - truth| / |truth| <= 1e-7 (lines 457-463)",
                    "note": "r_BN_N of point B (not C) at t = 1 s; truth written to 9 digits",
                },
                "final_sigma_BN": {
                    "value": BAL_TRUE_SIGMA,
                    "tolerance": 1e-7,
                    "compare": "isArrayEqualRelative, per component relative, 1e-7 (lines 465-469)",
                },
                "conservation": {
                    "tolerance": 1e-10,
                    "compare": "isArrayEqualRelative, per component relative (lines 471-495)",
                    "checks": [
                        "totOrbAngMomPntN_N(t=1) vs t=0",
                        "totRotAngMomPntC_N(t=1) vs t=0",
                        "totOrbEnergy(t=1) vs t=0",
                        (
                            "totRotEnergy(t=1) vs totRotEnergy at index len/2+1 = t 0.5001 s (torques off from "
                            "0.5 s; the test logs every 1e-4 s step)"
                        ),
                    ],
                    "note": "rotational energy changes while the motors run (0-0.5 s); rotational angular momentum about C "
                    "is conserved throughout (motor torques are internal)",
                },
            },
            "bsk_2_12_1": {
                "how": "the test's own set-up (rwFactory, every step logged), transcribed in make_wheel_references.py "
                "(_bsk_integrated_test), run with bsk 2.12.1; and bsk_run.py on the scenario file: same bits",
                "final_r_BN_N": own["r_BN_N"][-1].tolist(),
                "final_sigma_BN": own["sigma_BN"][-1].tolist(),
                "rel_errors": meas,
                "passes": all(meas[k] <= tol[k] for k in meas),
                "bsk_run_identical_to_test_setup": bool(same),
                "totRotEnergy_t0.5_equals_t0.5001_rel": _rel(
                    own["totRotEnergy"][5000], own["totRotEnergy"][t_half]
                ),
            },
        }
    )

    # --- integrated, BOE
    print("Basilisk unit test: integrated BOE")
    own = _bsk_integrated_test("BOE")
    scen, rows = _scen_boe()
    read, out = write_case(
        unit_dir,
        "rw_integrated_boe",
        "Basilisk test_reactionWheelStateEffector_integrated.py, case 'BOE' (lines 71-266, truth 281-294):\n"
        "5 kg hub, inertia diag(2, 2, 2 + Js), spinning at 0.35 rad/s about b3; one HR16 wheel on b3 at 100 RPM;\n"
        "motor torque 0 on [0, 5) s, 0.2 N m on [5, 10] s; no gravity; rk4, dt = 0.1 s, 10 s.\n"
        "Truth: the back-of-envelope solution at t = 2, 4, 6, 8, 10 s (tests/data/bsk/rw_unit_tests.json).",
        scen,
        rows,
    )
    boe = _boe_truth()
    rows_meas = []
    for b in boe:
        k = int(b["t"] / 0.1)
        for nm, sim_v in (
            ("omega_BN_B_3", own["omega_BN_B"][k, 2]),
            ("theta", 4.0 * np.arctan(own["sigma_BN"][k, 2])),
            ("Omega", own["Omega"][k, 0]),
        ):
            rows_meas.append((b["t"], nm, float(sim_v), b[nm], abs((b[nm] - sim_v) / b[nm])))
    worst = max(r[4] for r in rows_meas)
    check(
        "BOE (test's own set-up): omega_3, theta = 4 atan(sigma_3), Omega at t = 2..10 s vs BOE",
        worst <= 1e-8,
        f"(max rel {worst:.2e} <= 1e-8)",
    )
    same = all(np.array_equal(out[k], own[k]) for k in ("r_BN_N", "sigma_BN", "omega_BN_B", "Omega"))
    check("BOE: bsk_run on rw_integrated_boe.toml == the test's own set-up, bit for bit", same)
    E, H = energy_momentum(read, out)
    eerr = _rel(E, out["totRotEnergy"])
    herr = float(np.max(np.abs(H - out["totRotAngMomPntC_N"])) / np.max(np.abs(out["totRotAngMomPntC_N"])))
    check(
        "BOE: totRotEnergy and totRotAngMomPntC_N = hub + wheel formulas",
        max(eerr, herr) < 1e-13,
        f"(rel {eerr:.1e}, {herr:.1e})",
    )
    cases.append(
        {
            "name": "integrated_BOE",
            "basilisk_test": {
                "file": integ,
                "function": "reactionWheelIntegratedTest(show_plots, useFlag, 'BOE')",
                "setup_lines": "71-266",
                "truth_lines": "278-294",
                "check_lines": "497-508",
            },
            "scenario": "rw_unit/rw_integrated_boe.toml",
            "reference_npz": "rw_unit/rw_integrated_boe.npz",
            "truth": {
                "formulas": {
                    "omega_BN_B_3": "0.35 - u/I1Hub (t - 5) for t > 5, else 0.35",
                    "theta": "0.35 (t - 5) - u/(2 I1Hub) (t - 5)^2 + 0.35*5 for t > 5, else 0.35 t  (theta = 4 atan(sigma_BN_3))",
                    "Omega": "100 RPM + (I1Hub + Js) u / (I1Hub Js) (t - 5) for t > 5, else 100 RPM",
                    "constants": {"u": 0.2, "I1Hub": 2.0, "Js": HR16_JS, "RPM": RPM, "torque_on": 5.0},
                },
                "values": boe,
                "tolerance": 1e-8,
                "compare": "|(BOE - sim)/BOE| <= 1e-8 at sample index int(t/0.1) (lines 497-508)",
                "note": "the torque switched between ExecuteSimulation segments at 5 s acts from the step starting at "
                "5 s (else omega_3(6 s) would be off by u/I1Hub*dt = 0.01 rad/s); this test is Basilisk's own "
                "confirmation of the no-delay timing",
            },
            "bsk_2_12_1": {
                "values": [
                    {"t": r[0], "quantity": r[1], "basilisk": r[2], "boe": r[3], "rel_error": r[4]}
                    for r in rows_meas
                ],
                "max_rel_error": worst,
                "passes": worst <= 1e-8,
                "bsk_run_identical_to_test_setup": bool(same),
            },
        }
    )

    # --- ConfigureRWRequests
    print("Basilisk unit test: ConfigureRWRequests")
    conf_meas = {}
    for case, (truth, lines) in CONFIGURE_TRUTH.items():
        got = _configure_requests_test(case)
        conf_meas[case] = got
        check(
            f"ConfigureRWRequests '{case}' (module alone): u_current == {truth}", got == truth, f"(got {got})"
        )
    scen = _scen_saturation()
    read, out = write_case(
        unit_dir,
        "rw_configure_saturation",
        "Basilisk test_reactionWheelStateEffector_ConfigureRWRequests.py, case 'saturation' (lines 118-126),\n"
        "made a spacecraft run: 3 wheels of the test's defaultReactionWheel() (RWConfigPayload defaults: Js = 1,\n"
        "Omega = 0, gsHat_B = b1), u_max = [1, 2, 2] N m, commands [-1.2, 1.5, 2.5] N m -> applied [-1, 1.5, 2].\n"
        "The test calls ConfigureRWRequests on the module alone (no spacecraft); the hub here (750 kg,\n"
        "diag(900, 800, 600), at rest) is this file's choice. rk4, dt = 0.01 s, 1 s.",
        scen,
    )
    truth = CONFIGURE_TRUTH["saturation"][0]
    check(
        "saturation scenario: rw_u_current == [-1, 1.5, 2] at every sample",
        np.all(out["rw_u_current"] == truth),
    )
    # closed form (this file's, not Basilisk's): omega stays along b1, (Ixx - sum Js) omega_1' = -sum u
    t = out["t"]
    w1 = -sum(truth) * t / (900.0 - 3.0)
    om = np.array(truth)[None, :] * t[:, None] / 1.0 - w1[:, None]
    cf = max(float(np.max(np.abs(out["omega_BN_B"][:, 0] - w1))), float(np.max(np.abs(out["Omega"] - om))))
    check(
        "saturation scenario: omega_1 = -2.5 t/897, Omega_i = u_i t/Js + 2.5 t/897 (closed form)",
        cf < 1e-13 and np.all(out["omega_BN_B"][:, 1:] == 0.0),
        f"(max abs {cf:.1e})",
    )
    cases.append(
        {
            "name": "ConfigureRWRequests_saturation",
            "basilisk_test": {
                "file": conf,
                "function": "unitSimReactionWheel(show_plots, useFlag, 'saturation')",
                "setup_lines": "58-65, 103-126, 165-168",
                "truth_lines": "126",
                "check_lines": "170-181",
            },
            "scenario": "rw_unit/rw_configure_saturation.toml",
            "reference_npz": "rw_unit/rw_configure_saturation.npz",
            "truth": {
                "u_current": truth,
                "tolerance": 0.0,
                "compare": "exact: expOut['u_current'][i] != u_current fails (line 175; the accuracy 1e-10 of line 171 is "
                "not used)",
                "u_cmd": [-1.2, 1.5, 2.5],
                "u_max": [1.0, 2.0, 2.0],
                "note": "the test has no spacecraft: it calls ConfigureRWRequests(0.) on the module; the scenario's hub is "
                "this file's choice, and its closed form (omega_1 = -2.5 t/897, Omega_i = u_i t/Js + 2.5 t/897) is "
                "this file's, not Basilisk's",
            },
            "bsk_2_12_1": {
                "u_current_module_alone": conf_meas["saturation"],
                "u_current_spacecraft_run": out["rw_u_current"][-1].tolist(),
                "closed_form_max_abs_error": cf,
                "passes": conf_meas["saturation"] == truth,
            },
        }
    )

    skipped = [
        {
            "name": "integrated_JitterSimple",
            "file": integ,
            "lines": "99-100, 313-320",
            "reason": "jitter wheel model (static/dynamic imbalance): jaxhinge has balanced wheels only",
            "truth": {
                "final_r_BN_N": [-4.02553766e06, 7.48712857e06, 5.24933964e06],
                "final_sigma_BN": [1.98964221e-02, 2.24474932e-03, -5.66618270e-05],
                "tolerance": 1e-7,
            },
        },
        {
            "name": "integrated_JitterFullyCoupled",
            "file": integ,
            "lines": "101-102, 322-329",
            "reason": "fully coupled jitter model (wheel mass properties, imbalance): not in jaxhinge",
            "truth": {
                "final_r_BN_N": [-4.02085866e06, 7.49022306e06, 5.24840326e06],
                "final_sigma_BN": [1.98708924e-03, 2.26086385e-04, -1.60335529e-05],
                "tolerance": 1e-7,
            },
        },
        {
            "name": "integrated_FrictionSpinDown / FrictionSpinUp",
            "file": integ,
            "lines": "141-176, 295-299, 424-455",
            "reason": "Stribeck friction (fStatic, betaStatic > 0, omegaLimitCycle = 0.001) is not in jaxhinge's schema; "
            "and the test has no truth values for these cases (plots only)",
        },
        {
            "name": "ConfigureRWRequests_minimum",
            "file": conf,
            "lines": CONFIGURE_TRUTH["minimum"][1],
            "reason": "u_min (dead band) is not in jaxhinge's schema",
            "truth": {
                "u_min": [0.1, 0.0],
                "u_cmd": [-0.09, 0.0001],
                "u_current": CONFIGURE_TRUTH["minimum"][0],
            },
            "bsk_2_12_1": {"u_current": conf_meas["minimum"]},
        },
        {
            "name": "ConfigureRWRequests_speedSaturation",
            "file": conf,
            "lines": CONFIGURE_TRUTH["speedSaturation"][1],
            "reason": "the wheel speed limit Omega_max is not in jaxhinge's schema (Basilisk: u = 0 when |Omega| >= "
            "Omega_max > 0 and Omega*u >= 0)",
            "truth": {
                "Omega_max": [50.0, 50.0, 50.0],
                "Omega": [49.0, 51.0, -52.0],
                "u_cmd": [1.5, 1.5, 1.5],
                "u_current": CONFIGURE_TRUTH["speedSaturation"][0],
            },
            "bsk_2_12_1": {"u_current": conf_meas["speedSaturation"]},
        },
        {
            "name": "ConfigureRWRequests_powerSaturation",
            "file": conf,
            "lines": CONFIGURE_TRUTH["powerSaturation"][1],
            "reason": "the power limit P_max is not in jaxhinge's schema",
            "truth": {
                "P_max": [1.0, 1.0, 1.0],
                "Omega": [50.0, 50.0, 50.0],
                "u_cmd": [0.01, -0.04, 0.04],
                "u_current": CONFIGURE_TRUTH["powerSaturation"][0],
            },
            "bsk_2_12_1": {"u_current": conf_meas["powerSaturation"]},
        },
    ]
    rec = {
        "description": "Basilisk's own reaction-wheel unit tests as jaxhinge scenarios: truth values copied from the "
        "test files, with their tolerances, and what bsk 2.12.1 gives here. Made by "
        "tests/data/bsk/make_wheel_references.py.",
        "basilisk_source": {
            "repo": "AVSLab/basilisk",
            "commit": BSK_SRC_COMMIT,
            "note": "develop snapshot of 2026-07-22 (version string 2.12.0b0); both test files last changed 2026-06-22 "
            "(25ffe60bc). The bsk 2.12.1 wheel does not ship the tests; line numbers refer to this commit.",
        },
        "bsk_version": importlib.metadata.version("bsk"),
        "cases": cases,
        "skipped": skipped,
    }
    (out_dir / "rw_unit_tests.json").write_text(json.dumps(rec, indent=1, default=_np) + "\n")
    return {c["name"]: c["bsk_2_12_1"].get("passes") for c in cases}


def main(argv):
    out_dir = pathlib.Path(argv[0]) if argv else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}

    scen, rows = wheels_mixed()
    read, out = write_case(
        out_dir,
        "wheels_mixed",
        "hub + 2 single panels + 1 dualHinged chain (2 panels) + 4 balanced wheels in a pyramid.\n"
        "Wheel motor torques from wheels_mixed_inputs.csv (zero-order hold): [0.05, -0.03, 0.02, -0.04] N m on\n"
        "[0, 15) s (the wheels' `u` below), then [-0.02, 0.04, -0.05, 0.01] N m on [15, 30] s; rw3 has\n"
        "u_max = 0.04 N m, so it applies -0.04 after 15 s. No gravity. rk4, dt = 1 ms, 30 s.\n"
        "Generated by tests/data/bsk/make_wheel_references.py; Basilisk reference: the .npz of the same name.",
        scen,
        rows,
    )
    results["wheels_mixed"] = check_mixed(read, rows, out, out_dir)
    results["mass_props_ignored"] = check_mass_props(read, out_dir)
    results["wheels_mixed_drift"] = drift(out)

    scen = wheels_conserve()
    read, out = write_case(
        out_dir,
        "wheels_conserve",
        "the wheels_mixed spacecraft with u = 0, c = 0 on every hinge, no friction, no gravity:\n"
        "total energy and angular momentum (wheels included) are conserved.\n"
        "Generated by tests/data/bsk/make_wheel_references.py; Basilisk reference: the .npz of the same name.",
        scen,
    )
    results["wheels_conserve"] = check_conserve(read, out)

    results["wheels_slew_record"] = make_record(out_dir)

    results["rw_unit_tests"] = rw_unit_tests(out_dir, hub_wheel_energy_momentum)

    print()
    print(json.dumps(results, indent=1, default=_np))
    if FAILS:
        print(f"FAILED: {FAILS}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
