"""Command-line interface: `jaxhinge simulate | modes | fit ...`."""

import argparse
import os
import sys
import tempfile
import time
from importlib import resources

import numpy as np

EXAMPLE = "two_panel.toml"


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


def example_path(name: str = EXAMPLE) -> str:
    """Path of a bundled example scenario (`jaxhinge/examples/`)."""
    return str(resources.files("jaxhinge").joinpath("examples", name))


def _check_out_path(path: str | None, suffixes: tuple[str, ...], what: str) -> None:
    if path is None:
        return
    if not path.lower().endswith(suffixes):
        raise CLIError(f"{what} = {path!r}: the file name must end with {' or '.join(suffixes)}")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise CLIError(f"{what} = {path!r}: directory {d!r} does not exist")
    if not os.access(d, os.W_OK):
        raise CLIError(f"{what} = {path!r}: directory {d!r} is not writable")


def atomic_write(path: str, write) -> None:
    """Write through `write(fileobj)` to a temporary file beside `path`, then rename: never a half file."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".jaxhinge-", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fmt(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_simulate(args) -> int:
    from ._plot import plot_trajectory, relative_drift
    from ._scenario_file import load_scenario
    from ._simulate import simulate

    path = args.scenario or example_path()
    _check_out_path(args.out, (".npz",), "--out")
    _check_out_path(args.plot, (".png", ".pdf", ".svg"), "--plot")
    scenario = load_scenario(path)
    cfg = scenario.simulation
    names = scenario.spacecraft.panels.names
    _log(
        f"jaxhinge: {path}: {len(names)} panel(s), t_end = {cfg.t_end} s, integrator {cfg.integrator}, "
        f"dt = {cfg.dt} s; compiling and running..."
    )
    t0 = time.perf_counter()
    traj = simulate(scenario)
    traj.t.block_until_ready()
    wall = time.perf_counter() - t0
    if not bool(traj.success):
        import diffrax

        code = int(traj.result)
        msg = diffrax.RESULTS[code] if code != 0 else "a non-finite value (NaN/inf) appeared in the state"
        raise CLIError(
            f"integration failed after {int(traj.num_steps)} steps: {msg}. Nothing was written. "
            "Try a smaller dt, or raise simulation.max_steps for adaptive integrators."
        )
    out = traj.as_dict()
    if args.out:
        atomic_write(args.out, lambda f: np.savez(f, panel_names=np.array(names, dtype=str), **out))
        _log(f"jaxhinge: wrote {args.out}")
    if args.plot:
        atomic_write(args.plot, lambda f: plot_trajectory(out, names, f, title=os.path.basename(path), fmt=_fmt(args.plot)))
        _log(f"jaxhinge: wrote {args.plot}")
    print(f"scenario            {path}")
    print(f"samples             {len(out['t'])} (t = 0 .. {out['t'][-1]:g} s), {int(traj.num_steps)} steps, "
          f"{wall:.2f} s wall (incl. compilation)")
    for i, n in enumerate(names):
        print(f"theta[{n}]".ljust(20) + f"final {out['theta'][-1, i]: .9e} rad, "
              f"max |theta| {np.abs(out['theta'][:, i]).max():.6e} rad")
    print("omega_BN_B final    " + np.array2string(out["omega_BN_B"][-1], precision=9))
    print("sigma_BN final      " + np.array2string(out["sigma_BN"][-1], precision=9))
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        print(f"{key:<20}max relative drift {relative_drift(out[key]).max():.3e}")
    return 0


def cmd_sweep(args) -> int:
    import json

    from ._batch import (
        load_sweep,
        plot_envelopes,
        plot_histograms,
        sample_dispersions,
        simulate_batch,
        summarize,
        sweep_summary,
    )

    sweep = load_sweep(args.sweep)
    out_dir = os.path.abspath(args.out_dir) if args.out_dir else sweep.out_dir
    if args.out_dir and not os.path.isdir(os.path.dirname(out_dir)):
        raise CLIError(f"--out-dir = {args.out_dir!r}: parent directory does not exist")
    params = sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    names = sweep.scenario.spacecraft.panels.names
    cfg = sweep.scenario.simulation
    _log(
        f"jaxhinge: {args.sweep}: {sweep.members} members x {len(params)} dispersed parameter(s), "
        f"t_end = {cfg.t_end} s, integrator {cfg.integrator}; compiling and running in chunks of {sweep.chunk_size}..."
    )
    t0 = time.perf_counter()

    def progress(done, total):
        _log(f"jaxhinge: {done}/{total} members done, {time.perf_counter() - t0:.1f} s")

    traj = simulate_batch(sweep.scenario, params, chunk_size=sweep.chunk_size, progress=progress)
    wall = time.perf_counter() - t0
    summary = sweep_summary(sweep, params, traj, wall)
    env = summarize(traj, ("omega_BN_B", "theta"))
    os.makedirs(out_dir, exist_ok=True)
    arrays = {f"param_{k}": np.asarray(v) for k, v in params.items()}
    arrays.update(
        param_names=np.array(list(params), dtype=str), panel_names=np.array(names, dtype=str),
        success=np.asarray(traj.success), result=np.asarray(traj.result),
        t=np.asarray(traj.t)[0], theta=np.asarray(traj.theta), thetaDot=np.asarray(traj.thetaDot),
        omega_BN_B=np.asarray(traj.omega_BN_B), sigma_BN=np.asarray(traj.sigma_BN),
    )
    files = {
        "sweep.npz": lambda f: np.savez(f, **arrays),
        "summary.json": lambda f: f.write((json.dumps(summary, indent=2, allow_nan=True) + "\n").encode()),
        "envelopes.png": lambda f: plot_envelopes(env, names, f),
        "histograms.png": lambda f: plot_histograms(params, traj, names, f),
    }
    for name, write in files.items():
        atomic_write(os.path.join(out_dir, name), write)
        _log(f"jaxhinge: wrote {os.path.join(out_dir, name)}")
    print(f"sweep               {args.sweep}: {sweep.members} members, {summary['succeeded']} succeeded, "
          f"{summary['failed']} failed, {wall:.2f} s wall (incl. compilation)")
    for key, st in summary["statistics (successful members)"].items():
        if st:
            print(f"{key:<36} p5 {st['p5']: .6e}  p50 {st['p50']: .6e}  p95 {st['p95']: .6e}")
    print(f"output              {out_dir}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jaxhinge",
        description="Differentiable simulator of a spacecraft hub with hinged panels (Basilisk-exact).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser(
        "simulate",
        help="simulate a scenario TOML file",
        description="Simulate a scenario. With no SCENARIO, runs the bundled two-panel example "
        "(Basilisk's seed scenario).",
    )
    s.add_argument("scenario", nargs="?", help="scenario TOML file (default: bundled example)")
    s.add_argument("--out", help="write the trajectory arrays to this .npz file")
    s.add_argument("--plot", help="write a plot (hinge angles, hub rates, energy/momentum drift): .png/.pdf/.svg")
    s.set_defaults(func=cmd_simulate)
    w = sub.add_parser(
        "sweep",
        help="Monte Carlo / grid sweep of a scenario (SWEEP TOML file)",
        description="Run a batch of dispersed scenarios in one compiled program. SWEEP.toml keys: "
        "scenario (path, relative to the sweep file), members (int > 0), seed (int, default 0), chunk_size "
        "(default 256), [[dispersions]] tables {param = 'p0.k' | 'hub.omega_BN_BInit' | ..., dist = uniform "
        "(low, high) | normal (std or rel_std, optional mean; default nominal) | values (one per member)}, "
        "[output] dir (default <sweep name>_out). Writes sweep.npz, summary.json, envelopes.png, histograms.png.",
    )
    w.add_argument("sweep", help="sweep TOML file")
    w.add_argument("--out-dir", help="output directory (overrides [output] dir)")
    w.set_defaults(func=cmd_sweep)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    _enable_x64()
    from ._scenario_file import ScenarioError

    try:
        return args.func(args)
    except (ScenarioError, CLIError) as e:
        print(f"jaxhinge: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jaxhinge: interrupted", file=sys.stderr)
        return 130
