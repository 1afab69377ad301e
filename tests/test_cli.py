"""`jaxhinge simulate`: the output file contract (as a process), the plot, output paths checked before compute,
and numerical failure reported in plain words (in-process: `jaxhinge._cli.main`); Ctrl-C (as a process), a full
disk, `--version` and the bundled sweep example."""

import dataclasses
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
import tomllib

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge import example_path
from jaxhinge._cli import main
from jaxhinge._errors import ConfigError

EXPECTED = {
    "t": (251,), "r_BN_N": (251, 3), "v_BN_N": (251, 3), "r_CN_N": (251, 3), "v_CN_N": (251, 3),
    "sigma_BN": (251, 3), "omega_BN_B": (251, 3), "theta": (251, 2), "thetaDot": (251, 2), "totOrbEnergy": (251,),
    "totRotEnergy": (251,), "totOrbAngMomPntN_N": (251, 3), "totRotAngMomPntC_N": (251, 3),
}  # fmt: skip


# `python -m jaxhinge` with Python's default Ctrl-C handling, as started from a shell. A pytest worker may ignore
# SIGINT (a notebook's IPython shell, xdist) and an ignored signal is inherited: `jaxhinge` would then leave Ctrl-C
# to its caller and run as a library call (no worker thread, no program cache).
_AS_FROM_A_SHELL = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "runpy.run_module('jaxhinge', run_name='__main__', alter_sys=True)")


def run(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-c", _AS_FROM_A_SHELL, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env
    )


@pytest.mark.slow
def test_simulate_bundled_example_writes_contract(tmp_path):
    """The one subprocess test of `jaxhinge simulate`: exit status 0, the .npz and the plot, nothing else; the
    compiled simulation goes into the CLI's compile cache (`JAXHINGE_CACHE_DIR`), its traced program into the
    program cache beside it, and a second run that loads both writes the same trajectory, bit for bit."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAXHINGE_CACHE_DIR"] = str(tmp_path / "cache")
    env["JAXHINGE_DEBUG_PROGRAMS"] = "1"  # why a program is not kept, on stderr (shown if the check below fails)
    (tmp_path / "run").mkdir()
    tmp_path = tmp_path / "run"
    p = run("simulate", "--out", "traj.npz", "--plot", "traj.png", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    with np.load(tmp_path / "traj.npz") as f:
        assert {k: f[k].shape for k in EXPECTED} == EXPECTED
        assert list(f["panel_names"]) == ["p0", "p1"]
        # Basilisk's truth value (§3.2) through the file: reproduced to round-off (measured 5.7e-15 relative, as
        # test_basilisk_seed.py)
        np.testing.assert_allclose(
            f["r_BN_N"][-1], [-0.15832794740648992, 1.122481716747217, -0.37975995949382907], rtol=1e-13
        )
    png = (tmp_path / "traj.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert "max relative drift" in p.stdout
    assert sorted(os.listdir(tmp_path)) == ["traj.npz", "traj.png"]  # no temp files left

    cached = os.listdir(tmp_path.parent / "cache")
    assert any(n.startswith("jit__simulate_jit-") for n in cached), cached
    assert (tmp_path.parent / "cache" / "jaxhinge-programs").is_dir(), p.stderr
    programs = os.listdir(tmp_path.parent / "cache" / "jaxhinge-programs")  # the traced program too (_programs)
    assert programs and all(n.endswith(".jaxhinge-program") for n in programs), programs
    p2 = run("simulate", "--out", "again.npz", cwd=tmp_path, env=env)
    assert p2.returncode == 0, p2.stderr
    with np.load(tmp_path / "traj.npz") as a, np.load(tmp_path / "again.npz") as b:
        for k in EXPECTED:
            np.testing.assert_array_equal(a[k], b[k])


def test_configure_cpu_adds_its_options_and_keeps_the_users(monkeypatch):
    """`configure_cpu` (what the CLI calls as a program) adds the elemental emitters and the small-loop byte
    threshold to `XLA_FLAGS`, kept with the user's other flags; an explicit choice of the user's is left alone,
    and the threshold joins a `--xla_backend_extra_options` the user already has (one map flag). Here JAX's
    backend runs already: a call that changes `XLA_FLAGS` warns that it takes effect only in a new process; one
    that changes nothing stays silent."""
    import warnings

    import jax.numpy as jnp

    jnp.zeros(1).block_until_ready()  # the backend has started (and read XLA_FLAGS)
    from jaxhinge._runtime._policy import CPU_CODEGEN_FLAG, SMALL_LOOP_BYTES, SMALL_LOOP_OPTION

    assert CPU_CODEGEN_FLAG == "--xla_cpu_use_fusion_emitters=false"
    small = f"--xla_backend_extra_options={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
    cases = [
        (None, f"{CPU_CODEGEN_FLAG} {small}"),
        ("--xla_force_host_platform_device_count=2",
         f"--xla_force_host_platform_device_count=2 {CPU_CODEGEN_FLAG} {small}"),
        ("--xla_cpu_use_fusion_emitters=true", f"--xla_cpu_use_fusion_emitters=true {small}"),
        (f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=0",
         f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=0 {CPU_CODEGEN_FLAG}"),
        ("--xla_backend_extra_options=xla_llvm_dot_tiling_factor=8 --xla_cpu_use_fusion_emitters=true",
         f"--xla_backend_extra_options=xla_llvm_dot_tiling_factor=8,{SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES} "
         + "--xla_cpu_use_fusion_emitters=true"),
    ]
    for given, expected in cases:
        if given is None:
            monkeypatch.delenv("XLA_FLAGS", raising=False)
        else:
            monkeypatch.setenv("XLA_FLAGS", given)
        with pytest.warns(UserWarning, match="after JAX started its backend"):
            jh.configure_cpu()
        assert os.environ["XLA_FLAGS"] == expected, given
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            jh.configure_cpu()  # twice: nothing more, no warning
        assert os.environ["XLA_FLAGS"] == expected, given


def test_unusable_compile_cache_folder_is_named(tmp_path):
    """A cache folder that cannot be created (here: below a file) is reported in words (the CLI then warns and
    runs without the cache); a usable one is created with its parents."""
    from jaxhinge._runtime._policy import cache_problem

    (tmp_path / "a_file").write_text("")
    assert cache_problem(str(tmp_path / "a_file" / "xla")) == "Not a directory"
    assert cache_problem(str(tmp_path / "new" / "xla")) is None and (tmp_path / "new" / "xla").is_dir()
    assert os.listdir(tmp_path / "new" / "xla") == []


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "simulate" in capsys.readouterr().out


@pytest.mark.parametrize("flag, name", [("--out", "traj.npz"), ("--plot", "traj.png")])
def test_existing_folder_as_output_file_is_refused_before_compute(tmp_path, capsys, flag, name):
    """Reference: before the check, an existing folder named like the output file failed with IsADirectoryError
    after the whole run. Now: exit 2, one line naming the flag, no progress line (nothing ran), nothing written."""
    (tmp_path / name).mkdir()
    rc = main(["simulate", flag, str(tmp_path / name)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.splitlines() == [
        f"jaxhinge: error: {flag} = {str(tmp_path / name)!r}: {str(tmp_path / name)!r} is an existing folder, not a file"
    ]
    assert out == "" and os.listdir(tmp_path) == [name] and os.listdir(tmp_path / name) == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--out", "traj.txt"], "--out = 'traj.txt': the file name must end with .npz"),
        (["--plot", "nope/traj.png"], "--plot = 'nope/traj.png': folder "),
    ],
)
def test_bad_output_file_is_refused_before_compute(tmp_path, capsys, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    rc = main(["simulate", *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"jaxhinge: error: {words}") and err.count("\n") == 1, err
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_adaptive_step_budget_exhausted_is_reported(tmp_path, capsys):
    """tsit5 with max_steps = 5 cannot reach t_end: one line naming the file, the integrator and the field to
    change, exit 2, no traceback, nothing written (issue 14 item 7: it used to crash on diffrax's result code)."""
    sc = jh.load_scenario(example_path("two_panel.toml")).with_simulation(
        integrator="tsit5", t_end=0.5, save_dt=0.05, max_steps=5)
    jh.dump_scenario(sc, tmp_path / "budget.toml")
    rc = main(["simulate", str(tmp_path / "budget.toml"), "--out", str(tmp_path / "traj.npz")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"jaxhinge: error: {tmp_path / 'budget.toml'}: integration failed")
    assert "(tsit5, simulation.max_steps = 5)" in last and "raise simulation.max_steps" in last
    assert not (tmp_path / "traj.npz").exists()


def _two_panel_file(tmp_path, name, k):
    """The bundled two-panel example over 0.5 s with hinge p0's stiffness `k`: one compiled program for the tests
    below (only values differ)."""
    d = jh.scenario_to_dict(jh.load_scenario(example_path("two_panel.toml")))
    d["panels"][0]["k"] = k
    d["simulation"]["t_end"] = 0.5
    jh.dump_scenario(jh.scenario_from_dict(d), tmp_path / name)
    return str(tmp_path / name)


def test_numerical_failure_is_reported_not_raised(tmp_path, capsys):
    """A hinge far too stiff for rk4 at this step diverges: plain-words error naming the panel whose hinge
    frequency sqrt(k / (I_s2 + m d^2)) = sqrt(1e10 / 275) is beyond rk4's limit 2.8 / dt, exit 2, nothing written
    (issue 14 item 12: the message points at the likely cause)."""
    path = _two_panel_file(tmp_path, "stiff.toml", 1e10)
    rc = main(["simulate", path, "--out", str(tmp_path / "traj.npz")])
    err = capsys.readouterr().err
    assert rc == 2
    last = err.strip().splitlines()[-1]  # after the progress line
    assert last.startswith(f"jaxhinge: error: {path}: integration failed") and "non-finite" in last
    # the printed numbers, from the file's values (p0: k, I_s2, m, d) and the formula alone
    with open(path, "rb") as f:
        p0 = tomllib.load(f)["panels"][0]
    w = (p0["k"] / (p0["IPntS_S"][1][1] + p0["mass"] * p0["d"] ** 2)) ** 0.5
    assert (p0["k"], round(w, 2)) == (1e10, 6030.23)  # sqrt(1e10 / 275)
    assert (f"panel 'p0' has a hinge frequency sqrt(k / (I_s2 + m d^2)) = {w:.3g} rad/s, too high for simulation.dt "
            f"= 0.001 s (rk4 needs dt < 2.8 / {w:.3g} = {2.8 / w:.2g} s): check its k, mass and IPntS_S") in last
    assert "Traceback" not in err
    assert not (tmp_path / "traj.npz").exists()


def test_conservative_run_that_drifts_exits_1(tmp_path, capsys):
    """Issue 14 item 6: no loads, no damping, no motor: the physics conserves energy and momentum. With omega dt ~
    0.6 rk4 stays finite but damps the stiff hinge numerically (its spring energy falls by ~75 % in 0.5 s): the
    run is not valid; the outputs are written, a warning names the drifts and the tolerance, exit 1. (The bundled
    example itself drifts by ~1e-14 and exits 0: test_simulate_bundled_example_writes_contract.)"""
    path = _two_panel_file(tmp_path, "coarse.toml", 1e8)
    rc = main(["simulate", path, "--out", str(tmp_path / "traj.npz")])
    out, err = capsys.readouterr()
    assert rc == 1, err
    # the printed drift is the one in the file this run wrote: max |E(t) - E(0)| / |E(0)|, computed here
    with np.load(tmp_path / "traj.npz") as f:
        e = f["totRotEnergy"]
    drift = float(np.max(np.abs(e - e[0])) / abs(e[0]))
    assert drift > 0.5  # the stiff hinge's energy is mostly gone, far beyond the 1e-4 of a valid run
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"jaxhinge: warning: {path}: relative drift ") and f"totRotEnergy {drift:.3g}" in last
    assert "> 0.0001, although with no external loads" in last and "the result is not valid" in last
    assert f"totRotEnergy        max relative drift {drift:.3e}" in out


@pytest.mark.parametrize(
    "edit, env, words",
    [
        # the estimate, 8 bytes x samples x (39 + 19 N) with N = 2 panels, is computed here: 1e12 + 1 and 251 samples
        ({"t_end": 1e9, "save_dt": 0.001}, None,
         (f"simulation.save_dt = 0.001: 1 run(s) x 1e+12 samples with 2 panel(s) need about "
          f"{8 * (1e12 + 1) * 77 / 1e9:.3g} GB of outputs and working memory, above the limit of ")),
        ({}, "1e-6", (f"simulation.save_dt = 0.01: 1 run(s) x 251 samples with 2 panel(s) need about "
                      f"{8 * 251 * 77 / 1e9:.3g} GB of outputs and working memory, above the limit of 1e-06 GB (set "
                      "JAXHINGE_MEMORY_LIMIT_GB to raise it)")),
        ({}, "lots", 'JAXHINGE_MEMORY_LIMIT_GB = "lots": must be a number of GB > 0'),
    ],
)
def test_output_too_large_is_refused_before_compute(tmp_path, capsys, monkeypatch, edit, env, words):
    """Issue 14 item 10: t_end = 1e9 with save_dt = 1e-3 used to try to allocate 7 TiB; now one line with the
    estimate (8 bytes x samples x (39 + 19 N)), the limit and the setting that raises it, exit 2, nothing run or
    written. The limit defaults to half the physical memory; JAXHINGE_MEMORY_LIMIT_GB sets it."""
    d = jh.scenario_to_dict(jh.load_scenario(example_path("two_panel.toml")))
    d["simulation"].update(edit)
    jh.dump_scenario(jh.scenario_from_dict(d), tmp_path / "big.toml")
    if env is not None:
        monkeypatch.setenv("JAXHINGE_MEMORY_LIMIT_GB", env)
    rc = main(["simulate", str(tmp_path / "big.toml"), "--out", str(tmp_path / "traj.npz")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"jaxhinge: error: {tmp_path / 'big.toml'}: {words}"), err
    assert os.listdir(tmp_path) == ["big.toml"]


def test_dense_output_step_states_are_counted(monkeypatch):
    """rk4 output at given times keeps every step's state (13 + 2N floats): 2.5e8 steps of 1e-8 s need ~34 GB,
    refused naming simulation.dt before anything is compiled (the API's ConfigError, as the CLI's)."""
    monkeypatch.setenv("JAXHINGE_MEMORY_LIMIT_GB", "8")
    sc = jh.load_scenario(example_path("two_panel.toml")).with_simulation(dt=1e-8)
    with pytest.raises(ConfigError, match=r"^simulation.dt = 1e-08: 1 run\(s\) x 2 samples \+ 2.5e\+08 rk4 steps .* 34 GB"):
        jh.simulate(sc, ts=[0.0, 1.0])


def test_ctrl_c_during_compilation_exits_130_cleanly(tmp_path):
    """The one subprocess test of Ctrl-C (issue 14 item 8): SIGINT while XLA compiles the bundled example ends
    the process with exit 130 and one line, no report, no output or temporary file. Reference: before, the
    process crashed with SIGSEGV after printing "interrupted" when interrupted during XLA compilation (and took
    seconds to get there). JAX's compile log (`JAX_LOG_COMPILES`) says when the simulation program goes to XLA."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(JAXHINGE_CACHE_DIR="off", JAX_LOG_COMPILES="1")  # compile (not load) the program, and log it
    script = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)  # even if inherited "
              "ignored\nfrom jaxhinge._entry import main; sys.exit(main())")  # as the `jaxhinge` console script does
    p = subprocess.Popen([sys.executable, "-c", script, "simulate", "--out", "traj.npz"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = []
    for line in p.stderr:  # "Finished jaxpr to MLIR module conversion jit(_simulate_jit) ...": XLA compiles next
        log.append(line)
        if line.startswith("Finished") and "MLIR" in line and "(_simulate_jit)" in line:
            time.sleep(0.05)  # into XLA's compilation (0.3-1 s at the suite's -O0), not the Python between
            p.send_signal(signal.SIGINT)
            break
    out, err = p.communicate(timeout=120)
    assert any(line.endswith("compiling and running...\n") for line in log), "".join(log) + err
    assert (p.returncode, err, out) == (130, "jaxhinge: interrupted\n", "")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_ctrl_c_while_starting_exits_130_with_one_line(tmp_path, delay):
    """Ctrl-C at 0.5 s (JAX still being imported) and at 1.5 s (imports ending, the command starting) of
    `python -m jaxhinge simulate --out ... --plot ...` (what the `jaxhinge` script runs: `jaxhinge._entry`, whose
    handler is in place before any heavy import): exit 130, one line "jaxhinge: interrupted" on stderr after at
    most the progress line, no traceback, nothing written. Reference: before, 0.5 s gave a 32-40 line
    `KeyboardInterrupt` traceback and at 1-2.5 s the signal was lost (the run went on and exited 0)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(JAXHINGE_CACHE_DIR="off")
    script = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler)  # even if inherited "
              "ignored\nrunpy.run_module('jaxhinge', run_name='__main__')")  # = python -m jaxhinge = the script
    p = subprocess.Popen([sys.executable, "-c", script, "simulate", "--out", "traj.npz", "--plot", "traj.png"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    lines = err.splitlines()
    assert p.returncode == 130, (p.returncode, err)
    assert lines[-1] == "jaxhinge: interrupted" and len(lines) <= 2 and "Traceback" not in err, err
    assert out == "" and os.listdir(tmp_path) == []


def _tiny_trajectory(T=3, n=2):
    """A `Trajectory` of T samples of n panels without running anything (for tests of the writing only)."""
    import jax.numpy as jnp

    from jaxhinge._simulation._trajectory import Trajectory

    dims = {"T": T, "panels": n, "wheels": 0, "control": 0, "3": 3}
    return Trajectory(**{f.name: jnp.asarray(np.full([dims[d] for d in f.type.dim_str.split()], 0.5))
                         for f in dataclasses.fields(Trajectory)
                         if f.name not in ("result", "success", "num_steps")},
                      result=jnp.asarray(0), success=jnp.asarray(True), num_steps=jnp.asarray(T - 1))


def test_disk_full_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """Issue 14 item 9: the disk fills up while the plot is written (the .npz before it was written in full):
    exit 2, one line naming the file and the reason, no traceback, and neither output (both or neither) nor a
    temporary file is left. Reference: before, three chained tracebacks, and the .npz was already in place.
    The simulation is replaced by a fixed trajectory (nothing compiles), the plot by 20 kB of zeros, the disk by a
    file that refuses writes."""
    import jaxhinge._report._plot as plot
    import jaxhinge._simulation._simulate as sim

    class DiskFull(io.FileIO):
        def write(self, b):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    opened = []
    fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: opened.append(fd) or (
        fdopen(fd, mode) if len(opened) == 1 else io.BufferedWriter(DiskFull(fd, "wb"))))
    monkeypatch.setattr(sim, "simulate", lambda scenario: _tiny_trajectory())
    monkeypatch.setattr(plot, "plot_trajectory", lambda out, names, f, **kw: f.write(bytes(20_000)))
    monkeypatch.chdir(tmp_path)
    rc = main(["simulate", "--out", "traj.npz", "--plot", "traj.png"])
    out, err = capsys.readouterr()
    assert len(opened) == 2 and rc == 2 and out == ""
    assert err.splitlines()[1:] == [
        f"jaxhinge: error: {tmp_path / 'traj.png'}: cannot write: No space left on device; nothing was written"]
    assert os.listdir(tmp_path) == []


def test_version(capsys):
    """`jaxhinge --version` prints `jaxhinge.__version__`, which is also the package's version (pyproject.toml
    reads it from jaxhinge/_version.py: one place)."""
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"jaxhinge {jh.__version__}\n"
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    assert project["project"]["dynamic"] == ["version"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jaxhinge._version.__version__"}
    from importlib.metadata import version

    assert version("jaxhinge") == jh.__version__  # what pip installed


def test_bundled_sweep_example(tmp_path, capsys, monkeypatch):
    """Issue 14 item 18: `jaxhinge sweep` without a file runs the bundled example (every key checked: it loads
    as a SWEEP file) into ./sweep_out, and the progress line states the real chunking (before: "in chunks of
    256" for 64 members). The batch is replaced by a Ctrl-C (nothing compiles): in-process exit 130, the line
    that says how to resume, and only the campaign store, with no chunk done (issue 38: what `--resume`
    completes)."""
    import zarr

    import jaxhinge._jobs._campaign_chunks as campaign
    from jaxhinge._jobs._sweep import load_sweep

    sweep = load_sweep(example_path("sweep"), out_dir=str(tmp_path / "out"))
    assert (sweep.members, sweep.chunk_size, len(sweep.dispersions)) == (64, 256, 4)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(campaign, "batch_outputs", interrupt)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep_out").write_text("a file\n")
    assert main(["sweep"]) == 2
    assert capsys.readouterr().err == ("jaxhinge: error: output folder = 'sweep_out': "
                                       f"{str(tmp_path / 'sweep_out')!r} exists and is not a folder\n")
    os.remove(tmp_path / "sweep_out")
    assert main(["sweep"]) == 130
    err = capsys.readouterr().err.splitlines()
    store = str(tmp_path / "sweep_out" / "campaign.zarr")
    assert err[0] == (f"jaxhinge: {example_path('sweep')}: 64 members x 4 dispersed parameter(s), t_end = 2.5 s, "
                      f"integrator rk4; compiling and running 1 chunk(s) of 64 members into {store}...")
    assert err[1:] == ["jaxhinge: interrupted",
                       f"jaxhinge: 0/64 members are stored in {store}; `--resume` completes it"]
    assert os.listdir(tmp_path / "sweep_out") == ["campaign.zarr"]
    assert not zarr.open_group(store, mode="r")["chunk_done"][:].any()


def test_many_panels_print_a_bounded_report():
    """A 1 000-panel run prints the panels with the largest |theta| (at most `MAX_PANEL_LINES`) and a count of the
    others, not one line per panel (before: 1 008 lines)."""
    from jaxhinge._report._simulate import MAX_PANEL_LINES, simulate_report_lines

    traj = _tiny_trajectory(T=3, n=1000)
    names = [f"p{i}" for i in range(1000)]
    lines = simulate_report_lines("big.toml", traj, names, 1.0)
    panel_lines = [line for line in lines if line.startswith("theta[")]
    assert len(panel_lines) == MAX_PANEL_LINES and any(f"{1000 - MAX_PANEL_LINES} more panels" in line for line in lines)
    assert len(lines) <= MAX_PANEL_LINES + 10


def test_modes_json_writes_no_negative_zero(capsys):
    """`modes --json --clamped` of an undamped model: every damping ratio is 0 (c = 0: analytic; round-off below 1e-15) and
    no number is written as a negative zero (before: `"damping_ratio": -0.0`); without wheels the undamped frequency
    is that of C = 0 (`natural_frequency_model`), and the table's damping column prints no "-0.000000" either."""
    import re

    assert main(["modes", str(example_path("two_panel")), "--json", "--clamped"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert all(abs(m["damping_ratio"]) < 1e-15 for m in data["modes"])
    assert not re.search(r"-0\.0(?![0-9])", out)
    assert data["natural_frequency_model"] == "C = 0"
    assert main(["modes", str(example_path("two_panel")), "--clamped"]) == 0
    out = capsys.readouterr().out
    assert "undamped [Hz]" in out and "-0.000000" not in out and out.count(" 0.000000 ") == len(data["modes"])


def test_configure_cpu_leaves_out_the_emitter_flag_that_newer_xla_refuses(monkeypatch):
    """jaxlib 0.11 removed `--xla_cpu_use_fusion_emitters` and XLA stops at start-up on an unknown flag (seen with
    jaxlib 0.11.2): with such a jaxlib, `configure_cpu` sets only the small-loop option; with 0.10 both."""
    import importlib.metadata

    from jaxhinge._runtime import _policy

    small = f"--xla_backend_extra_options={_policy.SMALL_LOOP_OPTION}={_policy.SMALL_LOOP_BYTES}"
    monkeypatch.setattr(_policy, "backend_started", lambda: False)
    for installed, expected in [("0.11.2", small), ("1.0.0", small), ("0.10.2", f"{_policy.CPU_CODEGEN_FLAG} {small}")]:
        monkeypatch.setattr(importlib.metadata, "version", lambda name, v=installed: v)
        monkeypatch.delenv("XLA_FLAGS", raising=False)
        jh.configure_cpu()
        assert os.environ["XLA_FLAGS"] == expected, installed
