"""Cold identification of a long Basilisk flight record (issue 39: multiple shooting), one fresh process per run.

    python benchmarks/bench_long_records.py RECORD [--fit JSON] [--kwargs JSON] [--label NAME] [--timeout S]

RECORD is one of benchmarks/records/ (made by benchmarks/records/make_long_records.py): `slew60` (60 s closed-loop
slew, 601 gyro samples), `wheels10min` (600 s, 6 001), `wheels1h` (3 600 s, 36 001); each fitted through its
`RECORD_fit.toml` (the six hinge k and c free from the nominal hinges, 25-30 % off the truth of truth.json).

`--fit` overrides the FIT.toml's `[fit]` settings by the file's names (e.g. '{"max_steps": 1, "horizon": [1.0]}');
`--kwargs` is passed to `jaxhinge.identify` as extra keyword arguments, after the file's (`"scenario_dt": h`
replaces the scenario's rk4 step instead; e.g.
'{"shooting": "multiple"}' once identify takes it). The fit runs in a fresh Python process (no persistent
compilation cache: compilation included, "cold"), which imports jaxhinge, calls `configure_cpu()` as the CLI does,
loads the FIT.toml (`load_identify`) and calls `identify`. Measured: the process's wall time and peak RSS
(`getrusage(RUSAGE_CHILDREN).ru_maxrss`), identify's own wall time, the LM steps in total and per growing-horizon
stage (with each stage's wall time, from identify's progress lines), chi2/dof, the fitted k, c and sigmas, the
errors vs the truth (relative and in sigma units). Passed = converged, every k within 1 %, every c within 10 %,
every truth within 3 sigma (the issue's acceptance for the 10-minute record; printed for every record).

Appends (or replaces, by label) one entry in benchmarks/results_long_records.json. Run it under `nice` on a
shared machine; the 1-minute load average at the start is recorded.
"""

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDS = os.path.join(HERE, "records")
OUT = os.path.join(HERE, "results_long_records.json")
NAMES = ("slew60", "wheels10min", "wheels1h")
STEP = re.compile(r"identify: start \d+/\d+, horizon ([^:]+): step (\d+), cost (\S+)")
STAGE = re.compile(r"identify: start (\d+)/\d+, horizon ([^:]+): (\d+) steps, chi2 (\S+) \((\d+) samples\), (\S+)")


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def stages_of(lines, t_start):
    """The growing-horizon stages from identify's progress lines [(seconds, message)]: horizon, steps, chi2,
    samples, status and wall time of each finished stage (the first from `t_start`); a stage still running when
    the lines end is given as `{"horizon", "steps_so_far", "cost", "wall_s", "running": True}`."""
    stages, last, cur, ticks = [], t_start, None, []

    def per_step():  # median seconds between consecutive step lines (one step each when a step takes > 1 s)
        d = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in itertools.pairwise(ticks) if b[1] > a[1]]
        return sorted(d)[len(d) // 2] if d else None

    for now, msg in lines:
        m = STAGE.search(msg)
        if m:
            stages.append({"start": int(m.group(1)), "horizon": float(m.group(2)), "steps": int(m.group(3)),
                           "chi2": float(m.group(4)), "samples": int(m.group(5)), "status": m.group(6),
                           "wall_s": now - last, "median_step_s": per_step()})
            last, cur, ticks = now, None, []
            continue
        m = STEP.search(msg)
        if m:
            ticks.append((now, int(m.group(2))))
            cur = {"horizon": float(m.group(1)), "steps_so_far": int(m.group(2)), "cost": float(m.group(3)),
                   "wall_s": now - last, "median_step_s": per_step(), "running": True}
    return stages + ([cur] if cur else [])


def worker(record, fit_over, kwargs, result_path):
    """In the fresh process: load RECORD_fit.toml, identify, write the measurements to `result_path`."""
    t_import = time.perf_counter()
    import jaxhinge as jh

    jh.configure_cpu()
    import jax

    jax.config.update("jax_enable_x64", True)
    from jaxhinge._jobs._identify import identify_arguments, load_identify

    sys.path.insert(0, HERE)
    from _common import machine

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:  # identify writes nothing; the loader checks an output folder
        spec = load_identify(os.path.join(RECORDS, f"{record}_fit.toml"), out_dir=tmp)
    load_s = time.perf_counter() - t0
    lines = []
    log = open(result_path + ".progress", "w")  # noqa: SIM115  (read by the parent if the fit is killed)

    def progress(msg):
        now = time.perf_counter() - t0
        lines.append((now, msg))
        print(f"  [{now:7.1f} s] {msg}", flush=True)
        log.write(f"{now:.3f}\t{msg}\n")
        log.flush()

    kwargs = dict(kwargs)
    step = kwargs.pop("scenario_dt", None)  # --kwargs '{"scenario_dt": 0.01}': the scenario's rk4 step replaced
    scenario = spec.scenario if step is None else spec.scenario.with_simulation(dt=step)
    args = {**identify_arguments({**spec.fit_kwargs, **fit_over}), **kwargs}
    t1 = time.perf_counter()
    res = jh.identify(scenario, spec.telemetry, progress=progress, sensors=dict(spec.records[0].sensors),
                      **args)
    identify_s = time.perf_counter() - t1
    truth_file = _read_json(os.path.join(RECORDS, "truth.json"))
    truth = {f"{p}.{q}": v[q] for p, v in truth_file["truth"].items() for q in ("k", "c")}
    stages = stages_of(lines, t1 - t0)
    params = {}
    for n in res.names:
        v, s = (float(x) for x in res.parameter(n))
        p = {"value": v, "sigma": s, "initial": float(res.initial[list(res.names).index(n)])}
        if n in truth:
            p.update(truth=truth[n], error_rel=(v - truth[n]) / truth[n], error_sigma=(v - truth[n]) / s,
                     initial_off=p["initial"] / truth[n] - 1)
        params[n] = p
    ks = [p for n, p in params.items() if n.endswith(".k") and "truth" in p]
    cs = [p for n, p in params.items() if n.endswith(".c") and "truth" in p]
    zs = [abs(p["error_sigma"]) for p in ks + cs]
    out = {
        "record": record, "samples": int(res.telemetry.samples), "t_end_s": float(spec.scenario.simulation.t_end),
        "dt_s": float(spec.scenario.simulation.dt), "integrator": str(spec.scenario.simulation.integrator),
        "fit_overrides": fit_over, "identify_kwargs": kwargs, "options": res.options,
        "converged": bool(res.converged), "status": res.status, "message": res.message,
        "steps": int(res.iterations), "stages": stages, "chi2_per_dof": float(res.chi2_per_dof),
        "parameters": params,
        "max_error_rel_k": max(abs(p["error_rel"]) for p in ks), "max_error_rel_c": max(abs(p["error_rel"]) for p in cs),
        "max_error_sigma": max(zs),
        "pass": bool(res.converged and all(abs(p["error_rel"]) <= 0.01 for p in ks)
                     and all(abs(p["error_rel"]) <= 0.10 for p in cs) and max(zs) <= 3),
        "import_s": t0 - t_import, "load_s": load_s, "identify_s": identify_s, "identify_solve_s": float(res.solve_s),
        "machine": machine(),
    }
    with open(result_path, "w") as f:
        json.dump(out, f, indent=1, default=float)


def run(record, fit_over=None, kwargs=None, timeout=None, nice=None):
    """One cold fit in a fresh process; **returns** the worker's measurements plus the process's wall time and
    peak RSS (or a timed-out / failed entry)."""
    fit_over, kwargs = fit_over or {}, kwargs or {}
    with tempfile.TemporaryDirectory() as tmp:
        res_path = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), record, "--worker", res_path,
               "--fit", json.dumps(fit_over), "--kwargs", json.dumps(kwargs)]
        if nice:
            cmd = ["nice", "-n", str(nice)] + cmd
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, timeout=timeout, check=False)
            rc, timed_out = proc.returncode, False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        wall = time.perf_counter() - t0
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
        if os.path.exists(res_path):
            out = _read_json(res_path)
        else:  # killed or failed: the stages so far, from the progress lines
            lines = []
            if os.path.exists(res_path + ".progress"):
                with open(res_path + ".progress") as f:
                    lines = [(float(a), b) for a, b in (x.rstrip("\n").split("\t", 1) for x in f if "\t" in x)]
            out = {"record": record, "fit_overrides": fit_over, "identify_kwargs": kwargs,
                   "stages": stages_of(lines, lines[0][0] if lines else 0.0),
                   "stages_note": "from the progress lines; the first stage's wall time from its first line"}
    out.update(wall_s=wall, peak_rss_mb=rss_mb, returncode=rc, timed_out=timed_out, loadavg_1min_start=load,
               date_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), command=" ".join(cmd[-8:-6]))
    return out


def report(r):
    print(f"\n{r['record']}: wall {r['wall_s']:.1f} s (process, cold), peak RSS {r['peak_rss_mb']:.0f} MB, "
          f"load {r['loadavg_1min_start']:.2f}" + (" TIMED OUT" if r["timed_out"] else ""))
    if "steps" not in r:
        print(f"  no result (return code {r['returncode']}); stages so far: {r.get('stages')}")
        return
    print(f"  identify {r['identify_s']:.1f} s (import {r['import_s']:.1f} s, load {r['load_s']:.1f} s); "
          f"{'PASS' if r['pass'] else 'FAIL'} converged={r['converged']} steps={r['steps']} "
          f"chi2/dof={r['chi2_per_dof']:.4g}")
    print("  stages (horizon: steps, wall): " + ", ".join(f"{s['horizon']:g}: {s['steps']}, {s['wall_s']:.1f} s"
                                                          for s in r["stages"]))
    for n, p in r["parameters"].items():
        if "truth" in p:
            print(f"  {n:12s} {p['value']:.8g} +- {p['sigma']:.3g} (truth {p['truth']:g}, start "
                  f"{100 * p['initial_off']:+.1f} %): error {p['error_rel']:+.2e} = {p['error_sigma']:+.2f} sigma")
    print(f"  max |error|: k {r['max_error_rel_k']:.2e}, c {r['max_error_rel_c']:.2e}, {r['max_error_sigma']:.2f} sigma")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("record", choices=NAMES)
    ap.add_argument("--fit", default="{}", help="JSON: FIT.toml [fit] overrides, e.g. '{\"max_steps\": 1}'")
    ap.add_argument("--kwargs", default="{}", help="JSON: extra keyword arguments of jaxhinge.identify")
    ap.add_argument("--label", help="the entry's name in the results file (default: record + overrides)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds; the fit is killed after it")
    ap.add_argument("--nice", type=int, default=None, help="run the fit under nice -n N")
    ap.add_argument("--no-save", action="store_true", help="print only")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    fit_over, kwargs = json.loads(a.fit), json.loads(a.kwargs)
    if a.worker:
        worker(a.record, fit_over, kwargs, a.worker)
        return 0
    r = run(a.record, fit_over, kwargs, a.timeout, a.nice)
    r["label"] = a.label or " ".join([a.record] + [f"{k}={json.dumps(v)}" for k, v in {**fit_over, **kwargs}.items()])
    report(r)
    if not a.no_save:
        data = _read_json(OUT) if os.path.exists(OUT) else {
            "description": "Cold identifications of the long Basilisk records of benchmarks/records/ (issue 39), "
                           "one entry per label; written by benchmarks/bench_long_records.py.", "runs": []}
        data["runs"] = [x for x in data["runs"] if x.get("label") != r["label"]] + [r]
        tmp = OUT + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, default=float)
        os.replace(tmp, OUT)
        print(f"wrote {OUT} ({r['label']})")
    return 0 if r.get("returncode") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
