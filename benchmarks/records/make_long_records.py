"""Basilisk flight records of the wheeled three-panel spacecraft for issue 39 (multiple shooting): 60 s, 10 min, 1 h.

    python benchmarks/records/make_long_records.py [--only slew60 wheels10min wheels1h] [--no-verify] [--npz DIR]

Requires Basilisk (bsk 2.12.1); jaxhinge and its benchmarks only read the files. Writes into benchmarks/records/,
per record NAME: `NAME.toml` (the NOMINAL model = a fit's starting guess: the hinges of
jaxhinge/examples/closed_loop_slew.toml, t_end = the record's length, rk4 at dt = 1 ms, `[inputs]` = the recorded
wheel torques, no `[control]`), `NAME_inputs.csv` (the wheel motor torques, zero-order hold), `NAME.csv` (gyro
telemetry omega_BN_B_1..3 every 0.1 s + seeded white noise of GYRO_SIGMA), `NAME_fit.toml` (a telemetry FIT.toml:
the six hinge k and c free, defaults otherwise; `jaxhinge fit NAME_fit.toml`), and `truth.json` (the true hinges,
the noise, the seeds, Basilisk's run times and the jaxhinge check of every record).

The spacecraft: closed_loop_slew.toml's (hub 1200 kg, two wings and an antenna boom on hinges, four pyramid wheels
with u_max = 1 N m), the wheels started at OMEGA0 (150-600 rad/s), hub at rest at the example's initial attitude
(30 deg from the reference), no gravity, no external loads. Basilisk runs the TRUE hinges (`TRUTH`, 25-30 % from
the nominal ones, the guess being nominal: (nominal - true) / true in [-0.30, -0.25] or [0.25, 0.30]):

- `slew60`: the closed-loop 30 deg slew, Basilisk's flight software in the loop (tests/data/bsk/bsk_run.py's
  `[control]`: simpleNav, inertial3D, attTrackingError, mrpFeedback K = 60, P = 350, no integral term,
  rwMotorTorque) every 0.5 s, 60 s. The torques the wheels applied (`rw_u_current`, after the u_max clip, one per
  0.5 s control period) are written as the `[inputs]` record; replayed open-loop in Basilisk they give the
  closed-loop run's rates bit for bit at the control times (checked).
- `wheels10min`, `wheels1h`: open loop, each wheel's torque a new seeded pseudo-random value (magnitude uniform
  in [0.05, 0.2] N m, random sign, rounded to 1e-4 N m so that the CSV holds it exactly) held for 1.0-2.0 s
  (uniform in 0.1 s steps), 600 s and 3600 s; wheels10min's commands are the first 600 s of wheels1h's (one
  generator, seed TORQUE_SEED). The attitude wanders by the torques' random walk; no wheel saturates.

Check (unless --no-verify): jaxhinge simulates each TRUE model (rk4, 1 ms, the same `[inputs]`) and its gyro
rates are compared with Basilisk's noiseless ones (the max difference is written to truth.json).
"""

import argparse
import importlib.metadata
import json
import pathlib
import sys
import tempfile
import time
import tomllib

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ next to the data
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "data" / "bsk"))
import bsk_run
import make_wheel_references as mwr  # (to_toml, write_csv: the reference files' writers)

EXAMPLE = ROOT / "jaxhinge" / "examples" / "closed_loop_slew.toml"
TRUTH = {"wing_pY": (390.0, 11.0), "wing_mY": (680.0, 6.2), "antenna": (117.0, 2.7)}  # (k N m/rad, c N m s/rad)
OMEGA0 = {"rw1": 400.0, "rw2": -150.0, "rw3": 250.0, "rw4": -600.0}  # rad/s
DT, SAVE_DT = 1e-3, 0.1
GYRO_SIGMA = 1e-5  # rad/s, white noise on omega_BN_B
NOISE_SEED = {"slew60": 3960, "wheels10min": 39600, "wheels1h": 393600}
TORQUE_SEED = 39
T_END = {"slew60": 60.0, "wheels10min": 600.0, "wheels1h": 3600.0}
GYRO_FMT = {"slew60": "%.10e", "wheels10min": "%.10e", "wheels1h": "%.6e"}  # 1h: 7 digits, 1e-3 of the noise
COLUMNS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3"]
COMMAND = "python benchmarks/records/make_long_records.py"


def bsk_version():
    return importlib.metadata.version("bsk")


def spacecraft(true_hinges, t_end):
    """closed_loop_slew.toml's spacecraft as a dict (no [control]): the true or the nominal hinges, the wheels at
    OMEGA0, rk4 at 1 ms, saved every 0.1 s, `t_end`."""
    scen = tomllib.loads(EXAMPLE.read_text())
    scen.pop("control")
    for p in scen["panels"]:
        if true_hinges:
            p["k"], p["c"] = TRUTH[p["name"]]
    for w in scen["wheels"]:
        w["Omega"] = OMEGA0[w["name"]]
    for key in ("r_CN_NInit", "v_CN_NInit", "omega_BN_BInit"):
        scen["hub"].setdefault(key, [0.0, 0.0, 0.0])
    scen["simulation"] = {"t_end": t_end, "save_dt": SAVE_DT, "integrator": "rk4", "dt": DT}
    return scen


def nominal():
    d = tomllib.loads(EXAMPLE.read_text())
    return {p["name"]: (p["k"], p["c"]) for p in d["panels"]}


def truth_text():
    nom = nominal()
    return ", ".join(f"{n}: k = {k:g} N m/rad, c = {c:g} N m s/rad (nominal {nom[n][0]:g}, {nom[n][1]:g})"
                     for n, (k, c) in TRUTH.items())


# ---------------------------------------------------------------------------------------------------------
# Wheel commands


def closed_loop_commands():
    """Run the closed-loop slew (true hinges) in Basilisk; return (rows [(t, u[4])] of the applied torques, one per
    0.5 s control period, the Basilisk output)."""
    ex = tomllib.loads(EXAMPLE.read_text())
    scen = spacecraft(True, T_END["slew60"])
    ctl = dict(ex["control"])
    # mrpFeedback's controller inertia: with Ki < 0 and an inertial reference (omega_RN = 0) it drops out exactly
    # (basilisk.md section 9); the hub's is given (bsk_run needs one)
    ctl["ISCPntB_B"] = ex["hub"]["IHubPntBc_B"]
    scen["control"] = ctl
    # saved every control period (bsk_run's controller recorders sit in the flight-software task)
    scen["simulation"]["save_dt"] = ctl["control_dt"]
    out = bsk_run.run(scen)
    u = out["rw_u_current"]  # the torque over the step ending at each sample (after u_max): the command of the
    rows = [(k * ctl["control_dt"], u[k + 1].tolist()) for k in range(len(u) - 1)]  # period ending there
    rows.append((T_END["slew60"], rows[-1][1]))
    sat = float(np.mean(np.abs(u[1:]) >= 1.0 - 1e-15))
    return rows, out, {"control": ctl, "saturated_fraction": sat}


def random_commands(t_end, seed=TORQUE_SEED):
    """Seeded pseudo-random wheel torques: a new value per wheel every 1.0-2.0 s (all four switch together),
    |u| uniform in [0.05, 0.2] N m with a random sign, rounded to 1e-4 N m; a prefix of the same sequence for any
    shorter t_end."""
    rng = np.random.default_rng(seed)
    rows, t_ds, end_ds = [], 0, round(t_end * 10)
    while t_ds < end_ds:
        u = np.round(rng.uniform(0.05, 0.2, 4) * rng.choice([-1.0, 1.0], 4), 4)
        rows.append((t_ds / 10, [float(x) for x in u]))
        t_ds += int(rng.integers(10, 21))
    rows.append((t_end, rows[-1][1]))
    return rows


def write_inputs(path, header, rows, names):
    """The `[inputs]` CSV with a `#` header (jaxhinge skips it); the data lines are mwr.write_csv's (repr floats)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = pathlib.Path(tmp) / "inputs.csv"
        mwr.write_csv(plain, names, rows)
        body = plain.read_text()
    path.write_text("".join(f"# {x}\n" for x in header.splitlines()) + body)
    return body


# ---------------------------------------------------------------------------------------------------------
# Files of one record


def write_record(name, rows, what, extra=None):
    """Write NAME.toml, NAME_inputs.csv, run the true model in Basilisk with these inputs, write NAME.csv and
    NAME_fit.toml; return (Basilisk output, facts for truth.json)."""
    t_end = T_END[name]
    names = [w["name"] for w in spacecraft(False, t_end)["wheels"]]
    cmd = f"{COMMAND} --only {name}"
    made = f"Made by Basilisk {bsk_version()} ({cmd})."
    inputs_csv = f"{name}_inputs.csv"
    body = write_inputs(HERE / inputs_csv,
                        f"{name}: the wheel motor torque commands [N m] of the record {name}.csv, zero-order hold.\n"
                        f"{what}\n{made}", rows, names)
    scen = spacecraft(False, t_end)
    scen["inputs"] = {"csv": inputs_csv, "hold": "zoh"}
    (HERE / f"{name}.toml").write_text(mwr.to_toml(
        f"{name}: the spacecraft of jaxhinge/examples/closed_loop_slew.toml (3 hinged panels, 4 pyramid wheels at\n"
        f"150-600 rad/s), no [control]: the recorded wheel torques of {inputs_csv} replayed open-loop.\n{what}\n"
        "The hinge k and c here are NOMINAL (the example's: a fit's starting guess); Basilisk made the record\n"
        f"{name}.csv with the true ones ({', '.join(f'{n} {k:g}/{c:g}' for n, (k, c) in TRUTH.items())}; truth.json).\n"
        f"rk4, dt = 1 ms, {t_end:g} s. {made}", scen) + "\n")
    # Basilisk: the true model, reading the same data lines (bsk_run reads a CSV without '#' lines)
    true = spacecraft(True, t_end)
    true["inputs"] = {"csv": "inputs.csv", "hold": "zoh"}
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "inputs.csv").write_text(body)
        t0 = time.perf_counter()
        out = bsk_run.run(true, base_dir=tmp)
        run_s = time.perf_counter() - t0
    t, om = out["t"], out["omega_BN_B"]
    rng = np.random.default_rng(NOISE_SEED[name])
    gyro = om + GYRO_SIGMA * rng.standard_normal(om.shape)
    fmt = GYRO_FMT[name]
    with open(HERE / f"{name}.csv", "w", newline="") as f:
        f.write(f"# {name}: a {t_end:g} s gyro record of benchmarks/records/{name}.toml's spacecraft with the TRUE "
                f"hinges\n# {truth_text()};\n"
                + "".join(f"# {x}\n" for x in what.splitlines())
                + f"# rk4 at 1 ms in Basilisk. omega_BN_B [rad/s] every {SAVE_DT:g} s ({len(t)} samples) + white "
                f"noise of {GYRO_SIGMA:g} rad/s\n# (numpy default_rng({NOISE_SEED[name]})), written {fmt}. {made}\n")
        f.write("t," + ",".join(COLUMNS) + "\n")
        f.writelines(repr(round(float(tk), 10)) + "," + ",".join(fmt % x for x in g) + "\n" for tk, g in zip(t, gyro))
    (HERE / f"{name}_fit.toml").write_text(
        f"# Identify the six hinge k and c of {name}.toml from the gyro record {name}.csv (Basilisk {bsk_version()},\n"
        f"# true hinges in truth.json), starting from the scenario's nominal hinges, defaults otherwise.\n"
        f"#   jaxhinge fit benchmarks/records/{name}_fit.toml      (or benchmarks/bench_long_records.py {name})\n"
        f"# Made by {cmd}.\n"
        f'scenario = "{name}.toml"\n\n[data]\ncsv = "{name}.csv"\ncolumns = {json.dumps(COLUMNS)}\n'
        f"sigma = {GYRO_SIGMA:g}\n\n[fit]\n"
        'free = ["wing_pY.k", "wing_mY.k", "antenna.k", "wing_pY.c", "wing_mY.c", "antenna.c"]\n\n'
        f'[output]\ndir = "out/{name}"\n')
    facts = {"t_end_s": t_end, "samples": len(t), "input_rows": len(rows), "noise_seed": NOISE_SEED[name],
             "gyro_format": fmt, "basilisk_run_s": run_s, "basilisk_execute_s": float(out["wall_s"]),
             "max_abs_omega_BN_B": float(np.max(np.abs(om))),
             "Omega_range": [float(out["Omega"].min()), float(out["Omega"].max())],
             "min_abs_Omega": float(np.min(np.abs(out["Omega"]))),
             "mrp_switches": int(out["mrp_switch_count"]),
             "max_abs_theta": float(np.max(np.abs(out["theta"]))), **(extra or {})}
    print(f"{name}: {len(t)} samples, {len(rows)} input rows, Basilisk {run_s:.1f} s, max |omega| "
          f"{facts['max_abs_omega_BN_B']:.3g} rad/s, Omega {facts['Omega_range'][0]:.0f}..{facts['Omega_range'][1]:.0f} "
          f"rad/s, max |theta| {facts['max_abs_theta']:.3g} rad", flush=True)
    return out, facts


def verify(name, out):
    """jaxhinge: the TRUE model of NAME.toml (rk4, 1 ms, the same inputs) vs Basilisk's noiseless rates."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxhinge as jh

    sc = jh.load_scenario(HERE / f"{name}.toml")
    sc = jh.apply_parameters(sc, {f"{n}.{q}": v for n, kc in TRUTH.items() for q, v in zip("kc", kc)})
    t0 = time.perf_counter()
    traj = jh.simulate(sc)
    om = np.asarray(traj.omega_BN_B)
    wall = time.perf_counter() - t0
    d = float(np.max(np.abs(om - out["omega_BN_B"])))
    rel = d / float(np.max(np.abs(out["omega_BN_B"])))
    print(f"{name}: jaxhinge (true hinges) vs Basilisk, noiseless gyro rates: max |diff| {d:.2e} rad/s "
          f"({rel:.1e} of max |omega|), jaxhinge {wall:.1f} s", flush=True)
    return {"max_abs_diff_rad_s": d, "max_rel_diff": rel, "jaxhinge_simulate_s": wall}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=list(T_END))
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--npz", help="also save each Basilisk run (bsk_run layout) into this folder")
    a = ap.parse_args(argv)
    path = HERE / "truth.json"
    info = json.loads(path.read_text()) if path.exists() else {}
    info.update({
        "description": "True hinges of the Basilisk records in benchmarks/records/ (the scenario TOMLs hold the "
                       "nominal ones, a fit's starting guess), their noise and how they were made.",
        "bsk_version": bsk_version(), "command": COMMAND,
        "truth": {n: {"k": k, "c": c} for n, (k, c) in TRUTH.items()},
        "nominal": {n: {"k": k, "c": c} for n, (k, c) in nominal().items()},
        "guess_off": {f"{n}.{q}": nominal()[n][i] / TRUTH[n][i] - 1 for n in TRUTH for i, q in enumerate("kc")},
        "Omega0_rad_s": OMEGA0, "gyro_sigma_rad_s": GYRO_SIGMA, "torque_seed": TORQUE_SEED,
        "dt_s": DT, "save_dt_s": SAVE_DT})
    info.setdefault("records", {})
    for name in a.only:
        if name == "slew60":
            rows, out_cl, cl = closed_loop_commands()
            what = ("A closed-loop 30 deg slew: Basilisk's flight software (mrpFeedback K = 60, P = 350, rwMotorTorque, "
                    "every 0.5 s) in the loop;\nthe torques the wheels applied (after u_max = 1 N m), one row per "
                    "control period.")
            out, facts = write_record(name, rows, what, {"controller": cl["control"],
                                                         "saturated_fraction": cl["saturated_fraction"]})
            per = round(cl["control"]["control_dt"] / SAVE_DT)
            same = float(np.max(np.abs(out["omega_BN_B"][::per] - out_cl["omega_BN_B"])))
            print(f"slew60: open-loop replay vs the closed-loop run in Basilisk: max |diff| {same:.1e} rad/s")
            facts["replay_vs_closed_loop_max_abs_diff"] = same
            if same > 1e-15:
                raise RuntimeError("the replayed torques do not reproduce the closed-loop run")
        else:
            rows = random_commands(T_END[name])
            what = (f"Open loop: seeded pseudo-random wheel torques (numpy default_rng({TORQUE_SEED}); |u| uniform "
                    "in [0.05, 0.2] N m, random sign,\nrounded to 1e-4 N m, a new value every 1.0-2.0 s; "
                    "wheels10min's are the first 600 s of wheels1h's).")
            out, facts = write_record(name, rows, what)
        if a.npz:
            pathlib.Path(a.npz).mkdir(parents=True, exist_ok=True)
            bsk_run.save(out, pathlib.Path(a.npz) / f"{name}.npz")
        if not a.no_verify:
            facts["jaxhinge_check"] = verify(name, out)
        info["records"][name] = facts
        path.write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
