"""Command-line interface: `jaxhinge simulate ...` (further subcommands: modes, fit, ...)."""

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
