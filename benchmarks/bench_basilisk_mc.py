"""(m) Campaigns against Basilisk's Monte Carlo framework (issue 38): per-member time of the same 1 000-run
campaign in Basilisk's `MonteCarlo.Controller` (its process pool) and in `jh.run_campaign`, on this machine.

The campaign (both sides): the two-panel seed scenario (`jaxhinge/examples/two_panel.toml`: hub and two
`HingedRigidBodyStateEffector` panels, no gravity), rk4 at dt = 1 ms (Basilisk's task period), t_end = 0.5 s,
with the bundled sweep's four dispersions (`jaxhinge/examples/sweep.toml`): p0.k and p1.k uniform on
[80, 120] N m/rad, p0.c uniform on [0, 5] N m s/rad, hub.omega_BN_BInit normal about its nominal with standard
deviation 0.01 rad/s per component. The draws differ (Basilisk's `random` against jaxhinge's counter-based keys),
the distributions are the same.

Basilisk (bsk 2.12.1, in this process; nothing of JAX is imported here, so the pool's `fork` is safe):
`Controller` with `setThreadCount(os.cpu_count())`, `UniformDispersion` x 3 and `NormalVectorCartDispersion` on
`hub.omega_BN_BInit`; the creation function builds the spacecraft as `tests/data/bsk/bsk_run.py` does, the
execution function runs `InitializeSimulation`, `ConfigureStopTime(0.5 s)`, `ExecuteSimulation`. Measured: the
wall time of `executeSimulations()` (it builds each run's simulation, applies the draws, runs it, retains), and
the controller's setup (construction, dispersions, retention policy) separately. Three variants:

- `retained`: Basilisk's retention of the same histories jaxhinge keeps (`scStateOutMsg.omega_BN_B`,
  `sigma_BN` and each panel's `hingedRigidBodyOutMsg.theta`, `thetaDot`, recorded every 10 ms) through a
  `RetentionPolicy` and an archive folder. A policy applies to every run (the Controller has no way to retain
  one run in 1000), so every run's histories are kept: more than jaxhinge keeps. `SimulationExecutor` sleeps
  1 s after handing each retained run to the data writer (`time.sleep(1)`, Controller.py), which is part of
  Basilisk's cost as shipped;
- `retained_nosleep`: the same with that `time.sleep(1)` made a no-op (the cost of the retention itself);
- `none`: no recorder, no retention policy, no archive: the lower bound of the framework.

jaxhinge (in a child process: JAX must not be started in a process that forks): the bundled sweep at `--runs`
members, t_end = 0.5 s, chunk_size 256, `[retain] every = 1000` (the four histories of member 0, 1000, ...;
the metrics `peak_hub_rate`, `final_theta`, `peak_abs_theta` of every member), run by `jh.run_campaign` into a
Zarr store after a one-chunk campaign compiled the program (its time is the setup); per member = the wall time
of the `run_campaign` call / runs (minimum of 2). For reference, `jh.simulate_batch` of the same members
in-process (compiled first). A cross-check: Basilisk's retained run 0 (its drawn parameters) run again by
`jh.simulate`, the largest hinge-angle difference.

    python benchmarks/bench_basilisk_mc.py [--runs 1000] [--skip nosleep] [--out FILE.json]

The ratio printed is Basilisk's per-member time / jaxhinge's. Each Basilisk variant runs once (1 000 retained
runs take over 500 s on 2 cores); the machine may be shared: the load average is printed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCENARIO = os.path.join(ROOT, "jaxhinge", "examples", "two_panel.toml")
T_END = 0.5
with open(SCENARIO, "rb") as _fh:
    SCEN = tomllib.load(_fh)
DT_NS = round(SCEN["simulation"]["dt"] * 1e9)  # 1 ms
SAVE_NS = round(SCEN["simulation"]["save_dt"] * 1e9)  # 10 ms
T_END_NS = round(T_END * 1e9)
PANELS = [p["name"] for p in SCEN["panels"]]


def _col(v):
    return [[float(x)] for x in v]


def _mat(m):
    return [[float(x) for x in row] for row in m]


def _build(recorded):
    """The seed scenario in Basilisk, as `tests/data/bsk/bsk_run.py` builds it (one process, one task at dt,
    spacecraft then panels, then the recorders); the spacecraft and the panels are attributes `sc`, `p0`, `p1`
    of the simulation, the names the dispersions use."""
    from Basilisk.simulation import hingedRigidBodyStateEffector, spacecraft
    from Basilisk.utilities import SimulationBaseClass

    sim = SimulationBaseClass.SimBaseClass()
    sim.CreateNewProcess("proc").addTask(sim.CreateNewTask("task", DT_NS))
    sc = spacecraft.Spacecraft()
    sc.ModelTag = "spacecraftBody"
    h = SCEN["hub"]
    sc.hub.mHub = float(h["mHub"])
    sc.hub.IHubPntBc_B = _mat(h["IHubPntBc_B"])
    sc.hub.r_BcB_B = _col(h["r_BcB_B"])
    sc.hub.r_CN_NInit = _col(h["r_CN_NInit"])
    sc.hub.v_CN_NInit = _col(h["v_CN_NInit"])
    sc.hub.sigma_BNInit = _col(h["sigma_BNInit"])
    sc.hub.omega_BN_BInit = _col(h["omega_BN_BInit"])
    sim.sc = sc
    effs = []
    for i, p in enumerate(SCEN["panels"]):
        e = hingedRigidBodyStateEffector.HingedRigidBodyStateEffector()
        e.ModelTag = f"panel_{p['name']}"
        e.mass, e.IPntS_S, e.d = float(p["mass"]), _mat(p["IPntS_S"]), float(p["d"])
        e.k, e.c = float(p["k"]), float(p["c"])
        e.r_HB_B, e.dcm_HB = _col(p["r_HB_B"]), _mat(p["dcm_HB"])
        e.thetaInit, e.thetaDotInit = float(p["thetaInit"]), float(p["thetaDotInit"])
        e.thetaRef, e.thetaDotRef = float(p["thetaRef"]), float(p["thetaDotRef"])
        e.nameOfThetaState = f"hingedRigidBodyTheta_{i}_{p['name']}"
        e.nameOfThetaDotState = f"hingedRigidBodyThetaDot_{i}_{p['name']}"
        sc.addStateEffector(e)
        setattr(sim, p["name"], e)
        effs.append(e)
    sim.AddModelToTask("task", sc)
    for e in effs:
        sim.AddModelToTask("task", e)
    sim.msgRecList = {}
    if recorded:
        sim.msgRecList["scState"] = sc.scStateOutMsg.recorder(SAVE_NS)
        sim.AddModelToTask("task", sim.msgRecList["scState"])
        for name, e in zip(PANELS, effs):
            sim.msgRecList[name] = e.hingedRigidBodyOutMsg.recorder(SAVE_NS)
            sim.AddModelToTask("task", sim.msgRecList[name])
    return sim


def create_recorded():
    return _build(True)


def create_bare():
    return _build(False)


def execute(sim):
    sim.InitializeSimulation()
    sim.ConfigureStopTime(T_END_NS)
    sim.ExecuteSimulation()


class _NoSleep:
    """`time` for Controller.py with `sleep` a no-op (variant `retained_nosleep`)."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(_s):
        return None


def basilisk_mc(runs, variant, folder):
    """One `executeSimulations()` of `runs` runs: {setup_s, wall_s, per_member_s, failed, ...}."""
    import Basilisk.utilities.MonteCarlo.Controller as ctl
    from Basilisk.utilities.MonteCarlo.Dispersions import NormalVectorCartDispersion, UniformDispersion
    from Basilisk.utilities.MonteCarlo.RetentionPolicy import RetentionPolicy

    ctl.time = _NoSleep() if variant == "retained_nosleep" else time
    retained = variant != "none"
    t0 = time.perf_counter()
    mc = ctl.Controller()
    mc.setSimulationFunction(create_recorded if retained else create_bare)
    mc.setExecutionFunction(execute)
    mc.setExecutionCount(runs)
    mc.setThreadCount(os.cpu_count())
    mc.setVerbose(False)
    mc.setShowProgressBar(False)
    mc.addDispersion(UniformDispersion("p0.k", [80.0, 120.0]))
    mc.addDispersion(UniformDispersion("p1.k", [80.0, 120.0]))
    mc.addDispersion(UniformDispersion("p0.c", [0.0, 5.0]))
    mc.addDispersion(NormalVectorCartDispersion("sc.hub.omega_BN_BInit", mean=list(SCEN["hub"]["omega_BN_BInit"]),
                                                stdDeviation=[0.01, 0.01, 0.01]))
    archive = os.path.join(folder, variant)
    if retained:
        mc.setArchiveDir(archive)
        policy = RetentionPolicy()
        policy.addMessageLog("scState", ["omega_BN_B", "sigma_BN"])
        for name in PANELS:
            policy.addMessageLog(name, ["theta", "thetaDot"])
        mc.addRetentionPolicy(policy)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    failed = mc.executeSimulations()
    wall = time.perf_counter() - t0
    ctl.time = time
    out = {"variant": variant, "runs": runs, "processes": os.cpu_count(), "setup_s": setup, "wall_s": wall,
           "per_member_s": wall / runs, "failed": len(failed)}
    if retained:
        d = mc.getRetainedData(0)
        p = mc.getParameters(0)
        out["run0"] = {"params": {k: ctl.SimulationExecutor.parseModificationValue(v) for k, v in p.items()},
                       "theta": np.stack([d["messages"][f"{n}.theta"][:, 1] for n in PANELS], axis=1).tolist(),
                       "samples": int(d["messages"]["p0.theta"].shape[0])}
        out["archive_mb"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(archive)
                                for f in fs) / 1e6
    shutil.rmtree(archive, ignore_errors=True)
    return out


def basilisk_serial(repeats=5):
    """One run in this process, the minimum over `repeats`: build (creation function), InitializeSimulation,
    ExecuteSimulation of 0.5 s (no recorder): what each pool run costs before the framework's own work."""
    best = {"build_s": np.inf, "init_s": np.inf, "execute_s": np.inf}
    for _ in range(repeats):
        t0 = time.perf_counter()
        sim = create_bare()
        t1 = time.perf_counter()
        sim.InitializeSimulation()
        t2 = time.perf_counter()
        sim.ConfigureStopTime(T_END_NS)
        sim.ExecuteSimulation()
        t3 = time.perf_counter()
        for k, v in (("build_s", t1 - t0), ("init_s", t2 - t1), ("execute_s", t3 - t2)):
            best[k] = min(best[k], v)
    return best


def jax_child(runs, chunk, run0_path):
    """The jaxhinge side, in its own process (JSON on the last stdout line)."""
    import jax

    from jaxhinge import configure_cpu

    if not os.environ.get("JAXHINGE_BENCH_XLA_DEFAULTS"):
        configure_cpu()
    jax.config.update("jax_enable_x64", True)
    from bench_campaign import _write_sweep

    import jaxhinge as jh

    out = {"runs": runs, "chunk": chunk, "device": jax.devices()[0].device_kind, "jax": jax.__version__}
    with tempfile.TemporaryDirectory() as w:  # the setup: compile, on a one-chunk campaign of the same size
        t0 = time.perf_counter()
        jh.run_campaign(_write_sweep(w, chunk, chunk))
        out["compile_first_chunk_s"] = time.perf_counter() - t0
    walls, loops = [], []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as d:
            path = _write_sweep(d, runs, chunk)
            t0 = time.perf_counter()
            res = jh.run_campaign(path)
            walls.append(time.perf_counter() - t0)
            loops.append(res.wall_s)
            out["failed"] = int((~res.success).sum())
            ds = jh.open_campaign(res.store)
            out["retained_members"] = int(ds["retained"].values.sum())
            out["samples"] = int(ds.sizes["time"])
            out["store_mb"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(res.store)
                                  for f in fs) / 1e6
            sweep = jh.load_sweep(path)
    out["campaign_wall_s"] = min(walls)
    out["campaign_chunk_loop_s"] = min(loops)
    out["per_member_s"] = min(walls) / runs
    p = jh.sample_dispersions(sweep.scenario, sweep.dispersions, runs, sweep.seed)
    jh.simulate_batch(sweep.scenario, p, chunk_size=chunk).theta.block_until_ready()  # compile
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        jh.simulate_batch(sweep.scenario, p, chunk_size=chunk).theta.block_until_ready()
        best = min(best, time.perf_counter() - t0)
    out["batch_wall_s"] = best
    out["batch_per_member_s"] = best / runs
    if run0_path:  # Basilisk's run 0 again in jaxhinge, with its drawn parameters
        with open(run0_path) as fh:
            r0 = json.load(fh)
        pr = r0["params"]
        params = {"p0.k": np.array([pr["p0.k"]]), "p1.k": np.array([pr["p1.k"]]), "p0.c": np.array([pr["p0.c"]]),
                  "hub.omega_BN_BInit": np.array([pr["sc.hub.omega_BN_BInit"]])}
        tr = jh.simulate_batch(sweep.scenario, params, chunk_size=1)
        th = np.asarray(tr.theta)[0]
        ref = np.asarray(r0["theta"])
        n = min(len(th), len(ref))
        out["run0_max_abs_dtheta"] = float(np.max(np.abs(th[:n] - ref[:n])))
        out["run0_samples"] = [len(th), len(ref)]
    return out


def jaxhinge_side(runs, chunk, run0):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(run0, fh)
        r0 = fh.name if run0 else ""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")]))
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--jax-child", str(runs), "--chunk",
                              str(chunk), "--run0", r0], capture_output=True, text=True, env=env, check=False)
    finally:
        os.unlink(fh.name)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--skip", default="", help="comma list of variants to skip: none, retained, nosleep")
    ap.add_argument("--out")
    ap.add_argument("--jax-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--run0", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.jax_child:
        print(json.dumps(jax_child(a.jax_child, min(a.chunk, a.jax_child), a.run0)))
        return 0
    import importlib.metadata

    skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    info = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
            "loadavg_start": os.getloadavg(), "bsk": importlib.metadata.version("bsk"),
            "python": sys.version.split()[0]}
    print(f"{info['date_utc']}, {info['cores']} cores, load average {info['loadavg_start'][0]:.2f}, "
          f"bsk {info['bsk']}; {a.runs} runs of 0.5 s (rk4, 1 ms)", flush=True)
    serial = basilisk_serial()
    print(f"Basilisk, one run in this process: build {serial['build_s'] * 1e3:.1f} ms, init "
          f"{serial['init_s'] * 1e3:.1f} ms, execute {serial['execute_s'] * 1e3:.1f} ms", flush=True)
    mc, run0 = {}, None
    with tempfile.TemporaryDirectory() as folder:
        for variant, key in (("none", "none"), ("retained_nosleep", "nosleep"), ("retained", "retained")):
            if key in skip:
                continue
            r = basilisk_mc(a.runs, variant, folder)
            run0 = r.pop("run0", None) or run0
            mc[variant] = r
            print(f"Basilisk MonteCarlo Controller, {variant}: setup {r['setup_s'] * 1e3:.1f} ms, "
                  f"executeSimulations {r['wall_s']:.1f} s, {r['per_member_s'] * 1e3:.2f} ms per member, "
                  f"{r['failed']} failed" + (f", archive {r['archive_mb']:.1f} MB" if "archive_mb" in r else ""),
                  flush=True)
    jx = jaxhinge_side(a.runs, a.chunk, run0)
    print(f"jaxhinge run_campaign ({jx['device']}, chunk {jx['chunk']}): compile on one chunk "
          f"{jx['compile_first_chunk_s']:.1f} s; {jx['campaign_wall_s']:.2f} s for {a.runs} members "
          f"({jx['per_member_s'] * 1e3:.3f} ms per member, chunk loop {jx['campaign_chunk_loop_s']:.2f} s), "
          f"{jx['retained_members']} histories kept, {jx['failed']} failed, store {jx['store_mb']:.2f} MB; "
          f"simulate_batch {jx['batch_per_member_s'] * 1e3:.3f} ms per member", flush=True)
    if "run0_max_abs_dtheta" in jx:
        print(f"Basilisk run 0 rerun in jaxhinge: max |dtheta| {jx['run0_max_abs_dtheta']:.1e} rad over "
              f"{jx['run0_samples']} samples", flush=True)
    ratios = {v: r["per_member_s"] / jx["per_member_s"] for v, r in mc.items()}
    for v, q in ratios.items():
        print(f"ratio Basilisk ({v}) / jaxhinge campaign per member: {q:.1f}x")
    info["loadavg_end"] = os.getloadavg()
    print(f"load average at the end {info['loadavg_end'][0]:.2f}")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"machine": info, "basilisk_serial": serial, "basilisk_mc": mc, "jaxhinge": jx,
                       "ratio_basilisk_over_jaxhinge": ratios}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
