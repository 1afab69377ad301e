"""Command-line interface: `jaxhinge simulate | sweep | modes | fit | sensitivity ...`. It parses the arguments,
calls the file layer (`_io`), the jobs (`_jobs`: campaigns, fits, studies), the analyses and the reports
(`_report`), and prints; the runtime policy (float64,
XLA options, caches) is `_runtime._policy`, Ctrl-C is `_entry`. Exit codes: docs/errors.md."""

import argparse
import os
import sys
import textwrap
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._errors import ConfigError, JaxhingeError, JaxhingeNote
from ._io._interrupt import install as install_interrupt
from ._io._interrupt import note as interrupt_note
from ._io._scenario_file import example_path, is_bundled
from ._io._writers import write_output_files
from ._paths import output_dir_problem, output_file_problem
from ._runtime._policy import configure_cpu, enable_x64, use_compile_cache

EXAMPLE = "two_panel.toml"


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


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
    from ._io._scenario_file import load_scenario
    from ._report._plot import plot_trajectory
    from ._report._simulate import simulate_header, simulate_report_lines
    from ._simulation._memory import check_memory
    from ._simulation._simulate import simulate
    from ._simulation._trajectory import conserved, failure_reason

    path = args.scenario or str(example_path(EXAMPLE))
    _check_out_path(args.out, (".npz",), "--out")
    _check_out_path(args.plot, (".png", ".pdf", ".svg"), "--plot")
    scenario = load_scenario(path)
    cfg = scenario.simulation
    names = scenario.spacecraft.panels.labels
    check_memory(cfg, len(names))  # before the progress line: a refusal is the only line
    _log(simulate_header(path, scenario))
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
    wheels = scenario.spacecraft.wheels
    wheel_names = None if wheels is None else wheels.labels
    u_max = None if wheels is None else np.asarray(wheels.u_max)
    labels = {"panel_names": np.array(names, dtype=str)}
    if wheel_names is not None:
        labels.update(wheel_names=np.array(wheel_names, dtype=str), wheel_u_max=u_max)
    writers = {args.out: lambda f: np.savez(f, **labels, **out),
               args.plot: lambda f: plot_trajectory(out, names, f, title=os.path.basename(path), fmt=_fmt(args.plot),
                                                    wheel_names=wheel_names, u_max=u_max,
                                                    conserved=conserved(scenario))}
    for w in write_output_files(".", {k: v for k, v in writers.items() if k}):  # both or neither
        _log(f"jaxhinge: wrote {os.path.relpath(w)}")
    print("\n".join(simulate_report_lines(path, traj, names, wall, scenario)))
    warning = traj.drift_warning(scenario)
    if warning:
        _log(f"jaxhinge: warning: {path}: {warning}")
    return 1 if warning else 0


def cmd_sweep(args) -> int:
    from ._io._campaign_store import STORE
    from ._jobs._campaign import plan_campaign, run_plan
    from ._jobs._sweep import load_sweep
    from ._report._progress import MemberProgress
    from ._report._sweep import sweep_report_lines

    path = args.sweep or str(example_path("sweep"))  # the bundled example writes into ./sweep_out
    out_dir = args.out_dir or (None if args.sweep else "sweep_out")
    cluster = args.workers is not None or args.scheduler is not None
    if cluster:
        from ._jobs._campaign_cluster import check_cluster

        check_cluster(args.workers, args.scheduler, names=("--workers", "--scheduler"))
        if args.no_cache:  # the workers read it too (a local cluster's inherit this environment)
            os.environ["JAXHINGE_CACHE_DIR"] = "off"
    sweep = load_sweep(path, out_dir=_check_out_dir(out_dir, "--out-dir" if args.out_dir else "output folder"))
    if args.members is not None:
        return _rerun_members(sweep, args.members)
    # every check, every member drawn and rule-checked (once), before the first line
    plan = plan_campaign(sweep, resume=args.resume, workers=args.workers, scheduler=args.scheduler)
    names = [d["param"] for d in sweep.dispersions]
    cfg = sweep.scenario.simulation
    where = (f" on {args.workers} local Dask worker(s)" if args.workers is not None else
             f" on the Dask cluster at {args.scheduler}" if args.scheduler is not None else "")
    _log(
        f"jaxhinge: {path}: {sweep.members} members x {len(names)} dispersed parameter(s), t_end = {cfg.t_end} s, "
        f"integrator {cfg.integrator.name}; {'resuming' if args.resume else 'compiling and running'} {plan.chunks} "
        f"chunk(s) of {plan.size} members{where} into {os.path.join(sweep.out_dir, STORE)}..."
    )
    bar = MemberProgress(sweep.members)
    try:
        res = run_plan(plan, progress=bar.update)
    finally:
        bar.close()
    for w in [res.store, *res.files]:
        _log(f"jaxhinge: wrote {w}")
    print("\n".join(sweep_report_lines(path, sweep, res.summary, res.wall_s)))
    return 0


def _rerun_members(sweep, text: str) -> int:
    """`jaxhinge sweep SWEEP.toml --members 17,523`: those members' histories and metrics, computed again exactly
    as in the campaign, into `<out-dir>/members.npz`."""
    from ._io._campaign_store import STORE
    from ._io._writers import write_output_files
    from ._jobs._campaign import check_resume, rerun_members
    from ._simulation._trajectory import OUTPUT_NAMES

    try:
        members = [int(m) for m in text.split(",")]
    except ValueError:
        raise ConfigError("--members", text, "must be member indices separated by commas, e.g. 17,523") from None
    bad = [m for m in members if not 0 <= m < sweep.members]
    if bad:
        raise ConfigError("--members", text, f"member {bad[0]} is not in [0, {sweep.members}) (indices count from 0)")
    chunk = None
    if os.path.exists(os.path.join(sweep.out_dir, STORE)):  # the campaign there: the same inputs, its chunks
        chunk = check_resume(sweep, os.path.join(sweep.out_dir, STORE)).chunk_size
    _log(f"jaxhinge: {sweep.source}: members {', '.join(map(str, members))}: running their chunks again...")
    traj, metrics = rerun_members(sweep, members, chunk)
    arrays = {"member": np.asarray(members), **{k: np.asarray(getattr(traj, k)) for k in OUTPUT_NAMES},
              **{f"metric_{k}": v for k, v in metrics.items()}}
    for w in write_output_files(sweep.out_dir, {"members.npz": lambda f: np.savez(f, **arrays)}):
        _log(f"jaxhinge: wrote {w}")
    return 0


def cmd_modes(args) -> int:
    import json

    from ._analysis._linear._modes import modes
    from ._io._scenario_file import load_scenario
    from ._report._modes import modes_cli_json, modes_table_lines

    scenario = load_scenario(args.scenario)
    if args.continuous and not args.closed_loop:
        raise CLIError("--continuous: only with --closed-loop (the continuous law of the closed loop)")
    if args.closed_loop:
        return _closed_loop_modes(args, scenario)
    boundary = "clamped" if args.clamped else "free"
    m = modes(scenario, boundary)
    wheels = scenario.spacecraft.wheels is not None
    if args.json:
        print(json.dumps(modes_cli_json(m, args.scenario, boundary, wheels), allow_nan=False))
    else:
        print("\n".join(modes_table_lines(m, args.scenario, wheels)))
    return 0


def _closed_loop_modes(args, scenario) -> int:
    import json

    from ._analysis._linear._closed_loop import closed_loop_poles, first_command
    from ._report._modes import closed_loop_json, closed_loop_table_lines

    if args.clamped:
        raise CLIError("--clamped: the closed loop flies free (the controller turns the hub); leave out "
                         "--clamped with --closed-loop")
    if scenario.control is None:
        raise CLIError(f"--closed-loop: {args.scenario} has no [control] table (the attitude controller the loop "
                         "is closed with: docs/scenario-files.md, Attitude control)")
    p, first = closed_loop_poles(scenario, sampled=not args.continuous), first_command(scenario)
    if args.json:
        print(json.dumps(closed_loop_json(p, args.scenario, first), allow_nan=False))
    else:
        print("\n".join(closed_loop_table_lines(p, args.scenario, first)))
    return 0


def cmd_fit(args) -> int:
    from ._jobs._fit import run_fit, write_outputs
    from ._jobs._fit_files import load_fit_file
    from ._jobs._identify import IdentifySpec
    from ._report._fit import fit_json, fit_report_lines

    spec = load_fit_file(args.fit, out_dir=_check_out_dir(args.out, "--out"))
    warm_plotting = getattr(args, "warm_plotting", lambda: None)
    if isinstance(spec, IdentifySpec):
        warm_plotting()
        return _cmd_identify(args, spec)
    if args.no_check:
        import dataclasses

        spec = dataclasses.replace(spec, check=None)
    n_t = f"FEA modes of {spec.fit_kwargs['fea'].source}" if spec.targets_hz is None else \
        f"{len(spec.targets_hz)} target(s)"
    _log(f"jaxhinge: {args.fit}: {n_t}, free: {', '.join(map(str, spec.fit_kwargs.get('free', [])))}")

    def progress(line: str) -> None:
        _log(line)
        if line.startswith("fit: ") and " free parameter(s), " in line:  # the solver starts: XLA's turn
            warm_plotting()

    result, timing = run_fit(spec, progress=progress)
    warm_plotting()
    for w in result.warnings:  # (FEA pairing warnings run to 400+ characters: wrapped for a terminal)
        _log(textwrap.fill(f"jaxhinge: warning: {w}", width=110, subsequent_indent="    ", break_on_hyphens=False))
    written = write_outputs(result, spec, extra=timing)
    data = fit_json(result, spec)
    data["timing_s"].update(timing)
    print("\n".join(fit_report_lines(result, data, written)))
    if not (result.converged and result.targets_reached):
        what = "converge" if not result.converged else (
            f"reach its targets (fit.reach_rtol = {result.options['reach_rtol']:g}; outputs written, not a solution)")
        _log(f"jaxhinge: warning: the fit did not {what}: {result.message}")
        return 1
    if result.ambiguous:
        _log(f"jaxhinge: warning: the targets are reached by {len(result.solutions)} distinct parameter sets (all "
             "in result.json \"solutions\"): the data cannot tell them apart")
        return 3
    return 0


def cmd_sensitivity(args) -> int:
    from ._jobs._sensitivity import load_study, run_study, write_outputs
    from ._report._sensitivity import sensitivity_report_lines

    path = args.study or str(example_path("sensitivity"))
    out_dir = args.out_dir
    if out_dir is None and is_bundled(path):  # a bundled example writes into the working directory
        out_dir = "sensitivity_out"
    study = load_study(path, out_dir=_check_out_dir(out_dir, "--out-dir" if args.out_dir else "output folder"))
    cfg = study.scenario.simulation
    _log(f"jaxhinge: {path}: {len(study.outputs)} output(s), t_end = {cfg.t_end} s, integrator "
         f"{cfg.integrator.name}; compiling and differentiating ({study.mode} mode)...")
    t0 = time.perf_counter()
    result = run_study(study)
    wall = time.perf_counter() - t0
    for w in write_outputs(result, study):
        _log(f"jaxhinge: wrote {w}")
    print("\n".join(sensitivity_report_lines(path, result, wall, study.out_dir)))
    if not result.success:
        _log("jaxhinge: warning: the simulation failed; the sensitivities are not valid")
        return 1
    return 0


def _cmd_identify(args, spec) -> int:
    """`jaxhinge fit` for a telemetry FIT.toml (one with a [data] table)."""
    from ._jobs._identify import run_identify, write_outputs
    from ._report._identify import identify_report_lines

    tel = spec.telemetry
    what = (f"{tel.samples} samples x {len(tel.columns)} columns" if len(spec.records) <= 1 else
            f"{len(spec.records)} records, {sum(r.telemetry.values.size for r in spec.records)} values")
    _log(f"jaxhinge: {args.fit}: telemetry {what}, free: {', '.join(map(str, spec.fit_kwargs['free']))}")
    result = run_identify(spec, progress=_log)
    written = write_outputs(result, spec)
    print("\n".join(identify_report_lines(result, spec, written)))
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
        "[output] dir (default <sweep name>_out). Writes campaign.zarr (Zarr v3, chunk by chunk; docs/campaigns.md), "
        "summary.json, envelopes.png, histograms.png.",
    )
    w.add_argument("sweep", nargs="?", help="sweep TOML file (default: the bundled example, 64 runs of "
                   "two_panel.toml, written into ./sweep_out)")
    w.add_argument("--out-dir", help="output directory (overrides [output] dir)")
    w.add_argument("--members", help="compute again the histories and metrics of these members (indices from 0, "
                   "e.g. 17,523), exactly as in the campaign, into <out-dir>/members.npz")
    w.add_argument("--resume", action="store_true", help="complete the campaign.zarr an interrupted run left in the "
                   "output directory (only its missing chunks run; refused if an input file or jaxhinge changed)")
    w.add_argument("--workers", type=int, metavar="N", help="run the chunks on a local Dask cluster of N worker "
                   "processes (one task per chunk; each worker writes its chunks into the store). Needs "
                   'pip install "jaxhinge[cluster]"')
    w.add_argument("--scheduler", metavar="ADDRESS|FILE", help="run the chunks on a running Dask cluster: its "
                   "scheduler's address (tcp://HOST:PORT) or scheduler file (dask scheduler --scheduler-file); the "
                   "store and input files must be on a filesystem every worker sees (docs/campaigns.md)")
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
    m.add_argument("--closed-loop", action="store_true",
                   help="the poles of the spacecraft with its attitude controller ([control]) in the loop, sampled "
                   "every control_dt with a zero-order hold: frequency, damping, kind (flexible or rigid), which "
                   "body moves, and the stability margins")
    m.add_argument("--continuous", action="store_true",
                   help="with --closed-loop: the controller's law applied continuously instead of sampled")
    m.set_defaults(func=cmd_modes)
    f = add(
        "fit",
        help="fit hinge k and c to target frequencies (FIT.toml [modes]) or identify parameters from telemetry "
        "(FIT.toml [data])",
        description="Fit hinge stiffness k and damping c so the model's modes match target frequencies (and "
        "damping ratios), check the fit by simulating the nonlinear model, and write result.json, "
        "fitted_scenario.toml and a plot into the FIT.toml's output folder. A FIT.toml with a [data] table instead "
        "fits free parameters to telemetry (CSV) by least squares (docs/telemetry.md). Exit status 0: converged "
        "(modal: every target reached); 1: did not converge or reach the targets (results still written); 2: bad "
        "input or unreachable targets.",
    )
    f.add_argument("fit", help="FIT.toml file (schema: docs/modes-and-fea.md, docs/telemetry.md)")
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
    n.add_argument("study", nargs="?", help="SENS.toml file (schema: docs/sweeps-and-sensitivities.md; default: the "
                   "bundled example, written into ./sensitivity_out)")
    n.add_argument("--out-dir", help="output directory (overrides [output] dir)")
    n.set_defaults(func=cmd_sensitivity)
    return p


def _plotting_warm_up():
    """**Returns** a function that starts `_warm_plotting` in a background thread, once (later calls do nothing).

    The import of matplotlib and its font (0.4 s of CPU) holds Python's lock, as do the command's own imports and
    its tracing: started with them, it only adds to them. Started when the command's work goes to XLA (which runs
    without the lock: compiling, or a loaded program running), it takes the other core for free."""
    started = []

    def start() -> None:
        if not started:
            started.append(True)
            from ._report._plot import pyplot

            threading.Thread(target=_warm_plotting, args=(pyplot,), name="jaxhinge-plotting", daemon=True).start()

    return start


def _warm_plotting(plt_loader) -> None:
    """Import pyplot (`_report._plot.pyplot`, imported by the caller's thread so that this thread imports
    matplotlib only, through the same entry point as the plots) and load its default font, in a background thread
    while the command computes. Best effort: a failure here is left to the plot itself to report."""
    try:
        plt_loader()
        from matplotlib import font_manager

        font_manager.findfont(font_manager.FontProperties())
    except Exception:  # noqa: BLE001, S110 - a warm-up only: the plot itself reports any failure
        pass


def _notes_on_stderr() -> None:
    """Print the notes of jaxhinge (`JaxhingeNote`: a value adjusted, a doubt about an input) as `jaxhinge: note:
    <message>` lines; other warnings as Python prints them."""
    show = warnings.showwarning
    if getattr(show, "_jaxhinge", False):
        return

    def _show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, JaxhingeNote):
            _log(f"jaxhinge: note: {message}")
        else:
            show(message, category, filename, lineno, file, line)

    _show._jaxhinge = True
    warnings.showwarning = _show


def main(argv=None) -> int:
    """The `jaxhinge` command; **returns** its exit status (0 done, 1 result not valid, 2 refused, 3 several
    solutions (modal fit), 130 interrupted). As a program (`argv` None, started through `jaxhinge._entry`, which
    has installed the Ctrl-C handler before any import) the command runs in a worker thread while the main thread
    waits, so that Ctrl-C stops it at once, even inside one long compilation or XLA call; called in-process with
    `argv`, Ctrl-C raises `KeyboardInterrupt` in the caller's thread as usual (exit 130)."""
    as_program = argv is None and install_interrupt()  # (installed already when started through `_entry`)
    if as_program:
        configure_cpu()
    parser = build_parser()
    args = parser.parse_args(None if argv is None else [os.fspath(a) for a in argv])
    if args.command is None:
        parser.print_help()
        return 0
    enable_x64()
    use_compile_cache(not args.no_cache, as_program)
    _notes_on_stderr()
    try:
        if not as_program:
            return args.func(args)
        if args.command in ("fit", "sweep", "sensitivity") or getattr(args, "plot", None):
            args.warm_plotting = _plotting_warm_up()
            if args.command != "fit":  # a modal fit starts it itself, when its work goes to XLA (`cmd_fit`)
                args.warm_plotting()
        with ThreadPoolExecutor(1, thread_name_prefix="jaxhinge") as worker:
            return worker.submit(args.func, args).result()
    except CLIError as e:
        print(f"jaxhinge: error: {e}", file=sys.stderr)
        return 2
    except JaxhingeError as e:
        if isinstance(e, ConfigError) and e.source is None:  # a setting refused by the API (memory): name the input
            source = next((v for k in ("scenario", "sweep", "fit", "study") if (v := getattr(args, k, None))),
                          EXAMPLE)
            print(f"jaxhinge: error: {source}: {e}", file=sys.stderr)
        else:
            print(f"jaxhinge: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jaxhinge: interrupted", file=sys.stderr)
        if interrupt_note():
            print(f"jaxhinge: {interrupt_note()}", file=sys.stderr)
        return 130
