"""Command-line interface: `jaxhinge simulate | sweep | modes | fit | sensitivity ...`."""

import argparse
import os
import re
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._io._files import output_dir_problem, output_file_problem, write_output_files
from ._io._scenario_file import example_path

EXAMPLE = "two_panel.toml"


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


CPU_CODEGEN_FLAG = "--xla_cpu_use_fusion_emitters=false"
SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000


def configure_cpu() -> None:
    """Set the XLA:CPU options jaxhinge is measured with (`benchmarks/RESULTS.md`), by adding them to
    `XLA_FLAGS`. Call it before JAX runs its first computation (XLA reads `XLA_FLAGS` once, when its backend
    starts); after that it changes nothing for the running process.

    - `--xla_cpu_use_fusion_emitters=false` (`CPU_CODEGEN_FLAG`): XLA's elemental CPU emitters instead of its MLIR
      fusion emitters: the same programs compile in 40-70 % of the time and run as fast or faster
      (`benchmarks/bench_codegen.py`).
    - `--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000` (`SMALL_LOOP_OPTION`,
      `SMALL_LOOP_BYTES`): XLA:CPU compiles a loop whose body touches fewer bytes than this into one function
      instead of calling one kernel per fused operation on every iteration (its default is 1024 bytes). The
      integration loop of one trajectory, of a batch of up to ~16 members and their gradients fall under it: one
      trajectory of the seed scenario runs 2.6x faster, its reverse-mode gradient 3x (A/B in
      `benchmarks/bench_codegen.py`); larger batches keep XLA's kernels, which are faster there.

    A choice already in `XLA_FLAGS` is kept (`--xla_cpu_use_fusion_emitters=true`, or the byte threshold in
    your own `--xla_backend_extra_options`; a threshold of 0 turns the loop compilation off). The CLI calls this
    when it owns the process, as do the tests' and the benchmarks' set-up; importing jaxhinge sets nothing. In
    your own scripts and notebooks, call `jaxhinge.configure_cpu()` first: called after JAX has started its
    backend, it warns that the options take effect only in a new process. Other backends (GPU) ignore both."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" not in flags:
        flags = f"{flags} {CPU_CODEGEN_FLAG}".strip()
    if SMALL_LOOP_OPTION not in flags:
        option = f"{SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
        extra = re.search(r"--xla_backend_extra_options=(\S*)", flags)
        if extra:  # one map flag: add the option to the user's others
            value = f"{extra.group(1)},{option}" if extra.group(1) else option
            flags = f"{flags[:extra.start()]}--xla_backend_extra_options={value}{flags[extra.end():]}"
        else:
            flags = f"{flags} --xla_backend_extra_options={option}"
    if flags != os.environ.get("XLA_FLAGS", "") and _backend_started():
        warnings.warn("jaxhinge.configure_cpu() was called after JAX started its backend: XLA has read its flags "
                      "already, so the options take effect only in a new process (call it before the first JAX "
                      "computation)", stacklevel=2)
    os.environ["XLA_FLAGS"] = flags


def _backend_started() -> bool:
    """Whether JAX has started a backend in this process (and so read `XLA_FLAGS`); False if JAX cannot say."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a JAX without this private helper: no warning
        return False


def compile_cache_dir() -> str:
    """Where the CLI keeps compiled programs: `$JAXHINGE_CACHE_DIR`, else `$XDG_CACHE_HOME/jaxhinge/xla`
    (`~/.cache/jaxhinge/xla`)."""
    if os.environ.get("JAXHINGE_CACHE_DIR"):
        return os.path.abspath(os.path.expanduser(os.environ["JAXHINGE_CACHE_DIR"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxhinge", "xla")


def cache_problem(path: str) -> str | None:
    """What is wrong with `path` as the compile-cache folder, in words, or `None` when it can be used: it is
    created with its parents when missing, then checked as any output folder (`output_dir_problem`)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"{e.strerror or e}"
    return output_dir_problem(path)


def _compile_cache(enabled: bool, as_program: bool = False) -> None:
    """JAX's persistent compilation cache for this CLI run, so that a second run on the same model structure
    loads its compiled programs instead of compiling them again. Off with `--no-cache` or
    `JAXHINGE_CACHE_DIR=off`; a cache the user configured for JAX itself (`JAX_COMPILATION_CACHE_DIR`) is
    used as is. A folder that cannot be created or written gives a warning and a run without the cache; JAX
    skips unreadable (corrupt) entries with a warning and compiles.

    As a program (`as_program`), with the cache on and `EQX_ON_ERROR` not set by the user, equinox's runtime
    checks (`error_if`, inside diffrax's adaptive solves) return NaN instead of raising through a host callback:
    a program with a host callback cannot be cached. A run they would have stopped ends with a non-finite state
    instead, which every command already reports as a failed run (`Trajectory.success`, `failure_reason`).

    As a program, the traced programs are kept as well (`jaxhinge._programs`: `jax.export`, in `jaxhinge-programs/`
    inside the compile cache folder), so that a second
    run skips tracing the model too, not only XLA's compilation."""
    import jax

    if not enabled or os.environ.get("JAXHINGE_CACHE_DIR", "").lower() in ("off", "0", "none"):
        return
    if as_program and "EQX_ON_ERROR" not in os.environ:
        try:
            import equinox._errors as eqx_errors  # read at trace time by `error_if` (equinox 0.11-0.13)

            if getattr(eqx_errors, "EQX_ON_ERROR", None) == "raise":
                eqx_errors.EQX_ON_ERROR = "nan"
        except ImportError:  # another equinox layout: its checks stay, the programs holding them are not cached
            pass
    path = jax.config.jax_compilation_cache_dir
    if not path:
        path = compile_cache_dir()
        problem = cache_problem(path)
        if problem:
            print(f"jaxhinge: warning: compile cache folder {path!r} is not usable ({problem}); running without "
                  "it (set JAXHINGE_CACHE_DIR to another folder, or pass --no-cache)", file=sys.stderr)
            return
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if as_program:  # traced programs too (`_programs`), next to the compiled ones
        from . import _programs

        _programs.enable(os.path.join(path, "jaxhinge-programs"))


def _check_out_path(path: str | None, suffixes: tuple[str, ...], what: str) -> None:
    """An output file given on the command line, checked before any compute (`output_file_problem`)."""
    if path is None:
        return
    problem = output_file_problem(path, suffixes)
    if problem:
        raise CLIError(f"{what} = {path!r}: {problem}")


def _check_out_dir(path: str | None, what: str) -> str | None:
    """An output folder given on the command line, checked before any compute (`output_dir_problem`);
    **returns** its absolute path (`None` for none given)."""
    if path is None:
        return None
    problem = output_dir_problem(path)
    if problem:
        raise CLIError(f"{what} = {path!r}: {problem}")
    return os.path.abspath(path)


def _fmt(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_simulate(args) -> int:
    from ._io._plot import plot_trajectory
    from ._io._scenario_file import load_scenario
    from ._simulation._simulate import check_memory, failure_reason, simulate

    path = args.scenario or str(example_path(EXAMPLE))
    _check_out_path(args.out, (".npz",), "--out")
    _check_out_path(args.plot, (".png", ".pdf", ".svg"), "--plot")
    scenario = load_scenario(path)
    cfg = scenario.simulation
    names = scenario.spacecraft.panels.labels
    check_memory(cfg, len(names))  # before the progress line: a refusal is the only line
    _log(
        f"jaxhinge: {path}: {len(names)} panel(s), t_end = {cfg.t_end} s, integrator {cfg.integrator}, "
        f"dt = {cfg.dt} s; compiling and running..."
    )
    t0 = time.perf_counter()
    traj = simulate(scenario)
    traj.t.block_until_ready()
    wall = time.perf_counter() - t0
    if not bool(traj.success):
        raise CLIError(
            f"{path}: integration failed after {int(traj.num_steps)} steps: "
            f"{failure_reason(int(traj.result), scenario)}. Nothing was written."
        )
    out = traj.as_dict()
    writers = {args.out: lambda f: np.savez(f, panel_names=np.array(names, dtype=str), **out),
               args.plot: lambda f: plot_trajectory(out, names, f, title=os.path.basename(path), fmt=_fmt(args.plot))}
    for w in write_output_files(".", {k: v for k, v in writers.items() if k}):  # both or neither
        _log(f"jaxhinge: wrote {os.path.relpath(w)}")
    print(f"scenario            {path}")
    print(f"samples             {len(out['t'])} (t = 0 .. {out['t'][-1]:g} s), {int(traj.num_steps)} steps, "
          f"{wall:.2f} s wall (incl. compilation)")
    for i, n in enumerate(names):
        print(f"theta[{n}]".ljust(20) + f"final {out['theta'][-1, i]: .9e} rad, "
              f"max |theta| {np.abs(out['theta'][:, i]).max():.6e} rad")
    print("omega_BN_B final    " + np.array2string(out["omega_BN_B"][-1], precision=9))
    print("sigma_BN final      " + np.array2string(out["sigma_BN"][-1], precision=9))
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        print(f"{key:<20}max relative drift {traj.relative_drift(key).max():.3e}")
    warning = traj.drift_warning(scenario)
    if warning:
        _log(f"jaxhinge: warning: {path}: {warning}")
    return 1 if warning else 0


def cmd_sweep(args) -> int:
    from ._analysis._batch import sample_dispersions, simulate_batch, summarize
    from ._io._sweep_file import load_sweep, sweep_summary, write_outputs

    path = args.sweep or str(example_path("sweep"))  # the bundled example writes into ./sweep_out
    out_dir = args.out_dir or (None if args.sweep else "sweep_out")
    sweep = load_sweep(path, out_dir=_check_out_dir(out_dir, "--out-dir" if args.out_dir else "output folder"))
    params = sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    cfg = sweep.scenario.simulation
    size = min(sweep.chunk_size, sweep.members)
    chunks = -(-sweep.members // size)
    _log(
        f"jaxhinge: {path}: {sweep.members} members x {len(params)} dispersed parameter(s), t_end = {cfg.t_end} s, "
        f"integrator {cfg.integrator}; compiling and running {chunks} chunk(s) of {size} members..."
    )
    t0 = time.perf_counter()

    def progress(done, total):
        _log(f"jaxhinge: {done}/{total} members done, {time.perf_counter() - t0:.1f} s")

    traj = simulate_batch(sweep.scenario, params, chunk_size=sweep.chunk_size, progress=progress)
    wall = time.perf_counter() - t0
    summary = sweep_summary(sweep, params, traj, wall)
    env = summarize(traj, ("omega_BN_B", "theta"))
    for w in write_outputs(sweep, params, traj, summary, env):
        _log(f"jaxhinge: wrote {w}")
    print(f"sweep               {path}: {sweep.members} members, {summary['succeeded']} succeeded, "
          f"{summary['failed']} failed, {wall:.2f} s wall (incl. compilation)")
    for key, st in summary["statistics (successful members)"].items():
        if st:
            print(f"{key:<36} p5 {st['p5']: .6e}  p50 {st['p50']: .6e}  p95 {st['p95']: .6e}")
    print(f"output              {sweep.out_dir}")
    return 0


def _modes_table(m, path: str) -> list[str]:
    rows = m.as_dict()["modes"]
    parts = list(m.participants)
    excluded = "6 rigid-body modes excluded" if m.boundary == "free" else "hub fixed"
    lines = [
        f"scenario            {path}",
        (f"boundary            {m.boundary} ({excluded}); linearised about theta = thetaRef, hub at rest, "
         "no gravity, loads or motor torque"),
        f"flexible modes      {len(rows)}",
    ]
    if not rows:
        return lines
    head = f"{'mode':>4}  {'freq [Hz]':>12}  {'damping':>10}  {'damped [Hz]':>12}  {'undamped [Hz]':>13}"
    label = {"hub_translation": "hub transl.", "hub_rotation": "hub rot."}
    head += "".join(f"  {label.get(p, p)[:12]:>12}" for p in parts)
    lines += ["", "kinetic energy share per mode (hub translation, hub rotation, each panel):", head]
    for r in rows:
        def f(x, w, fmt):
            return f"{'-':>{w}}" if x is None else f"{x:{w}{fmt}}"

        line = (f"{r['mode']:>4}  {f(r['frequency_hz'], 12, '.6f')}  {f(r['damping_ratio'], 10, '.6f')}  "
                f"{f(r['damped_frequency_hz'], 12, '.6f')}  {f(r['natural_frequency_hz'], 13, '.6f')}")
        line += "".join(f"  {f(None if r['energy_fraction'][p] is None else 100 * r['energy_fraction'][p], 11, '.1f')}%"
                        for p in parts)
        if r["overdamped"]:
            line += "  (overdamped)"
        lines.append(line)
    lines.append("")
    lines.append("freq = |lambda|/2pi, damping = -Re(lambda)/|lambda| (MATLAB damp); damped = |Im lambda|/2pi; "
                 "undamped: C = 0")
    return lines


def cmd_modes(args) -> int:
    import json

    from ._analysis._modes import modes
    from ._io._scenario_file import load_scenario

    scenario = load_scenario(args.scenario)
    boundary = "clamped" if args.clamped else "free"
    m = modes(scenario, boundary)
    if args.json:
        d = m.as_dict()
        out = {"scenario": args.scenario, "boundary": boundary,
               "rigid_body_modes_excluded": 6 if boundary == "free" else 0,
               "panels": list(m.panel_names), "modes": d["modes"]}
        print(json.dumps(out, allow_nan=False))
    else:
        print("\n".join(_modes_table(m, args.scenario)))
    return 0


def _fit_report(result, data: dict, written: list[str]) -> list[str]:
    lines = [f"fit                 {data['fit_file']}",
             f"scenario            {data['scenario']} (boundary {result.boundary}, solver {result.solver})",
             f"status              {result.message}", ""]
    lines.append(f"{'parameter':<28} {'value':>14} {'sigma':>12} {'initial':>14}  unit")
    for i, name in enumerate(result.names):
        sig = result.sigma[i]
        sig_s = f"{sig:12.4g}" if np.isfinite(sig) else f"{'undetermined':>12}"
        lines.append(f"{name:<28} {result.values[i]:14.8g} {sig_s} {result.initial[i]:14.8g}  {result.units[i]}")
    lines += ["", (f"{'mode':>4} {'target [Hz]':>12} {'model [Hz]':>12} {'rel. error':>11} {'simulated [Hz]':>15}"
                   f" {'target zeta':>12} {'model zeta':>11} {'simulated zeta':>15}")]
    for r in data["targets"]:
        def f(key, w, fmt, r=r):
            x = r.get(key)
            return f"{'-':>{w}}" if x is None else f"{x:{w}{fmt}}"

        lines.append(f"{r['mode']:>4} {f('target_frequency_hz', 12, '.6f')} {f('model_frequency_hz', 12, '.6f')} "
                     f"{f('frequency_relative_error', 11, '.2e')} {f('simulated_frequency_hz', 15, '.6f')} "
                     f"{f('target_damping_ratio', 12, '.6f')} {f('model_damping_ratio', 11, '.6f')} "
                     f"{f('simulated_damping_ratio', 15, '.6f')}")
    if result.pairing:
        lines += ["", (f"{'FEA mode':>8} {'FEA [Hz]':>12} {'model mode':>10} {'model [Hz]':>12} {'MAC start':>9} "
                       f"{'MAC end':>8}  effective mass FEA / model [kg, kg m^2] T1 T2 T3 R1 R2 R3")]
        for p in result.pairing:
            def mac(x):
                return f"{'-':>8}" if x is None else f"{x:8.4f}"

            em = "" if p["fea_effective_mass"] is None else " ".join(
                f"{a:.3g}/{b:.3g}" for a, b in zip(p["fea_effective_mass"], p["model_effective_mass"]))
            lines.append(f"{p['fea_mode']:>8} {p['fea_frequency_hz']:12.6f} {p['model_mode']:>10} "
                         f"{p['model_frequency_hz']:12.6f} {mac(p['mac_initial']):>9} {mac(p['mac'])}  {em}")
    t = data["timing_s"]
    lines += ["", f"timing              fit {t['fit']:.2f} s (solver {t['solver']:.2f} s, compilation included)"
              + (f", simulation check {t['check']:.2f} s" if t.get("check") is not None else "")]
    lines += [f"wrote               {os.path.relpath(w)}" for w in written]
    return lines


def cmd_fit(args) -> int:
    from ._analysis._lsq import FitError
    from ._io._fit_file import result_dict, run_fit, write_outputs
    from ._io._fit_files import load_fit_file
    from ._io._identify_file import IdentifySpec

    try:
        spec = load_fit_file(args.fit, out_dir=_check_out_dir(args.out, "--out"))
        if isinstance(spec, IdentifySpec):
            return _cmd_identify(args, spec)
        if args.no_check:
            import dataclasses

            spec = dataclasses.replace(spec, check=None)
        n_t = f"FEA modes of {spec.fit_kwargs['fea'].source}" if spec.targets_hz is None else \
            f"{len(spec.targets_hz)} target(s)"
        _log(f"jaxhinge: {args.fit}: {n_t}, free: "
             f"{', '.join(map(str, spec.fit_kwargs.get('free', [])))}")
        result, timing = run_fit(spec, progress=_log)
        written = write_outputs(result, spec, extra=timing)
    except FitError as e:
        raise CLIError(str(e)) from None
    data = result_dict(result, spec)
    data["timing_s"].update(timing)
    print("\n".join(_fit_report(result, data, written)))
    if not (result.converged and result.targets_reached):
        what = "converge" if not result.converged else (
            f"reach its targets (fit.reach_rtol = {result.options['reach_rtol']:g}; outputs written, not a solution)")
        _log(f"jaxhinge: warning: the fit did not {what}: {result.message}")
        return 1
    return 0


def cmd_sensitivity(args) -> int:
    from ._io._sens_file import load_study, run_study, write_outputs

    study = load_study(args.study, out_dir=_check_out_dir(args.out_dir, "--out-dir"))
    cfg = study.scenario.simulation
    _log(f"jaxhinge: {args.study}: {len(study.outputs)} output(s), t_end = {cfg.t_end} s, integrator "
         f"{cfg.integrator}; compiling and differentiating ({study.mode} mode)...")
    t0 = time.perf_counter()
    result = run_study(study)
    wall = time.perf_counter() - t0
    written = write_outputs(result, study)
    for w in written:
        _log(f"jaxhinge: wrote {w}")
    print(f"sensitivity         {args.study}: {len(result.parameter_names)} parameter(s) x "
          f"{len(result.output_names)} output row(s), {result.mode} mode, {wall:.2f} s wall (incl. compilation)")
    rows = result.scalar_rows()
    if rows:
        print()
        print(f"{'output':<32} {'value':>14}  unit      d ln y / d ln p (largest first)")
        for r in rows:
            i = result.row(r)
            top = ", ".join(f"{n} {v:+.3g}" for n, v in result.ranking(r)[:3] if v is not None)
            print(f"{r:<32} {result.output_values[i]:14.8g}  {result.output_units[i]:<8}  {top}")
    for note in result.notes:
        print(f"note                {note}")
    print(f"output              {study.out_dir}")
    if not result.success:
        _log("jaxhinge: warning: the simulation failed; the sensitivities are not valid")
        return 1
    return 0


def _cmd_identify(args, spec) -> int:
    """`jaxhinge fit` for a telemetry FIT.toml (one with a [data] table)."""
    from ._analysis._lsq import FitError
    from ._io._identify_file import report_lines, run_identify, write_outputs

    try:
        tel = spec.telemetry
        what = (f"{tel.samples} samples x {len(tel.columns)} columns" if len(spec.records) <= 1 else
                f"{len(spec.records)} records, {sum(r.telemetry.values.size for r in spec.records)} values")
        _log(f"jaxhinge: {args.fit}: telemetry {what}, free: {', '.join(map(str, spec.fit_kwargs['free']))}")
        result = run_identify(spec, progress=_log)
        written = write_outputs(result, spec)
    except FitError as e:
        raise CLIError(str(e)) from None
    print("\n".join(report_lines(result, spec, written)))
    if not result.converged:
        _log(f"jaxhinge: warning: the fit did not converge: {result.message}")
        return 1
    if not result.identifiable:
        _log("jaxhinge: note: some parameter combinations are not determined by the data (see result.json "
             "identifiability)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jaxhinge",
        description="Differentiable simulator of a spacecraft hub with hinged panels (Basilisk-exact).",
    )
    from ._version import __version__

    p.add_argument("--version", action="version", version=f"jaxhinge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--no-cache", action="store_true",
                        help="do not use the persistent compilation cache (default: kept in "
                        "$JAXHINGE_CACHE_DIR or ~/.cache/jaxhinge/xla, so a second run on the same model "
                        "structure skips compilation)")

    def add(name, **kw):
        return sub.add_parser(name, parents=[common], **kw)

    s = add(
        "simulate",
        help="simulate a scenario TOML file",
        description="Simulate a scenario. With no SCENARIO, runs the bundled two-panel example "
        "(Basilisk's seed scenario).",
    )
    s.add_argument("scenario", nargs="?", help="scenario TOML file (default: bundled example)")
    s.add_argument("--out", help="write the trajectory arrays to this .npz file")
    s.add_argument("--plot", help="write a plot (hinge angles, hub rates, energy/momentum drift): .png/.pdf/.svg")
    s.set_defaults(func=cmd_simulate)
    w = add(
        "sweep",
        help="Monte Carlo / grid sweep of a scenario (SWEEP TOML file)",
        description="Run a batch of dispersed scenarios in one compiled program. SWEEP.toml keys: "
        "scenario (path, relative to the sweep file), members (int > 0), seed (int, default 0), chunk_size "
        "(default 256), [[dispersions]] tables {param = 'p0.k' | 'hub.omega_BN_BInit' | ..., dist = uniform "
        "(low, high) | normal (std or rel_std, optional mean; default nominal) | values (one per member)}, "
        "[output] dir (default <sweep name>_out). Writes sweep.npz, summary.json, envelopes.png, histograms.png.",
    )
    w.add_argument("sweep", nargs="?", help="sweep TOML file (default: the bundled example, 64 runs of "
                   "two_panel.toml, written into ./sweep_out)")
    w.add_argument("--out-dir", help="output directory (overrides [output] dir)")
    w.set_defaults(func=cmd_sweep)
    m = add(
        "modes",
        help="modal frequencies, damping ratios and mode shapes of a scenario",
        description="Linearise the spacecraft about its rest equilibrium (theta = thetaRef, hub at rest) and list "
        "its flexible modes in ascending frequency: frequency |lambda|/2pi and damping ratio -Re(lambda)/|lambda| "
        "(MATLAB damp), damped and undamped frequencies, and each mode's kinetic-energy share of hub translation, "
        "hub rotation and every panel.",
    )
    m.add_argument("scenario", help="scenario TOML file")
    m.add_argument("--clamped", action="store_true",
                   help="hub fixed (FEA fixture, test stand) instead of free (as flown)")
    m.add_argument("--json", action="store_true",
                   help='print one JSON object {"modes": [...], ...} instead of the table')
    m.set_defaults(func=cmd_modes)
    f = add(
        "fit",
        help="fit hinge k and c to target frequencies (FIT.toml [modes]) or identify parameters from telemetry "
        "(FIT.toml [data])",
        description="Fit hinge stiffness k and damping c so the model's modes match target frequencies (and "
        "damping ratios), check the fit by simulating the nonlinear model, and write result.json, "
        "fitted_scenario.toml and a plot into the FIT.toml's output folder. A FIT.toml with a [data] table instead "
        "fits free parameters to telemetry (CSV) by least squares (jaxhinge._io._identify_file). Exit status 0: converged "
        "(modal: every target reached); 1: did not converge or reach the targets (results still written); 2: bad "
        "input or unreachable targets.",
    )
    f.add_argument("fit", help="FIT.toml file (schema: jaxhinge._io._fit_file, jaxhinge._io._identify_file)")
    f.add_argument("--out", help="output folder (overrides [output] dir)")
    f.add_argument("--no-check", action="store_true", help="skip the simulation check")
    f.set_defaults(func=cmd_fit)
    n = add(
        "sensitivity",
        help="Jacobians of outputs w.r.t. parameters, absolute and normalised, tornado plot (SENS.toml)",
        description="Differentiate chosen outputs of a scenario (time histories, peak_hub_rate, "
        "final_attitude_error, settling_time, modal_frequencies, damping_ratios) with respect to chosen "
        "parameters ('p0.k', 'hub.mHub', 'hub.omega_BN_BInit[2]', ...; default every k and c), by forward- or "
        "reverse-mode autodiff through the integration. SENS.toml keys: scenario (path, relative to the file), "
        "outputs (names or inline tables {name, options}), parameters, mode (auto | forward | reverse), tornado "
        "(output rows to plot), [output] dir. Writes sensitivity.json, sensitivity.csv and tornado.png. "
        "Exit status 0: done; 1: the simulation failed (results written, not valid); 2: bad input.",
    )
    n.add_argument("study", help="SENS.toml file (schema: README, jaxhinge._io._sens_file)")
    n.add_argument("--out-dir", help="output directory (overrides [output] dir)")
    n.set_defaults(func=cmd_sensitivity)
    return p


def _warm_plotting(plt_loader) -> None:
    """Import pyplot (`_io._plot._plt`, imported by the caller's thread so that this thread imports matplotlib
    only, through the same entry point as the plots) and load its default font, in a background thread while the
    command computes (importing pyplot alone takes ~0.6 s here, otherwise spent after the computation). Best
    effort: a failure here is left to the plot itself to report."""
    try:
        plt_loader()
        from matplotlib import font_manager

        font_manager.findfont(font_manager.FontProperties())
    except Exception:  # noqa: BLE001, S110 - a warm-up only: the plot itself reports any failure
        pass


def _interrupted(signum, frame) -> None:
    """Ctrl-C in the `jaxhinge` process: remove the writes in progress, say so in one line and end the process
    at once, status 130 (`os._exit`: a teardown while XLA's threads compile or run crashed with SIGSEGV)."""
    from ._io._files import abandon_writes

    abandon_writes()
    print("jaxhinge: interrupted", file=sys.stderr, flush=True)
    os._exit(130)


def main(argv=None) -> int:
    """The `jaxhinge` command; **returns** its exit status (0 done, 1 result not valid, 2 refused, 130
    interrupted). As a program (`argv` None) the command runs in a worker thread while the main thread waits,
    so that Ctrl-C (`_interrupted`) stops it at once, even inside one long compilation or XLA call; called
    in-process with `argv`, Ctrl-C raises `KeyboardInterrupt` in the caller's thread as usual (exit 130)."""
    as_program = argv is None and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if as_program:
        signal.signal(signal.SIGINT, _interrupted)
        configure_cpu()
    parser = build_parser()
    args = parser.parse_args(None if argv is None else [os.fspath(a) for a in argv])
    if args.command is None:
        parser.print_help()
        return 0
    _enable_x64()
    _compile_cache(not args.no_cache, as_program)
    from ._io._scenario_file import ScenarioError
    from ._model._scenario import ConfigError

    try:
        if not as_program:
            return args.func(args)
        if args.command in ("fit", "sweep", "sensitivity") or getattr(args, "plot", None):
            from ._io._plot import _plt

            threading.Thread(target=_warm_plotting, args=(_plt,), name="jaxhinge-plotting", daemon=True).start()
        with ThreadPoolExecutor(1, thread_name_prefix="jaxhinge") as worker:
            return worker.submit(args.func, args).result()
    except (ScenarioError, CLIError) as e:
        print(f"jaxhinge: error: {e}", file=sys.stderr)
        return 2
    except ConfigError as e:  # a setting refused by the API before compute (the memory estimate): name the input
        source = next((v for k in ("scenario", "sweep", "fit", "study") if (v := getattr(args, k, None))), EXAMPLE)
        print(f"jaxhinge: error: {source}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jaxhinge: interrupted", file=sys.stderr)
        return 130
