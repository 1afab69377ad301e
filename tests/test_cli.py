"""`jaxhinge simulate`: the output file contract (as a process), the plot, output paths checked before compute,
and numerical failure reported in plain words (in-process: `jaxhinge._cli.main`)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge import example_path
from jaxhinge._cli import main

EXPECTED = {
    "t": (251,), "r_BN_N": (251, 3), "v_BN_N": (251, 3), "r_CN_N": (251, 3), "v_CN_N": (251, 3),
    "sigma_BN": (251, 3), "omega_BN_B": (251, 3), "theta": (251, 2), "thetaDot": (251, 2), "totOrbEnergy": (251,),
    "totRotEnergy": (251,), "totOrbAngMomPntN_N": (251, 3), "totRotAngMomPntC_N": (251, 3),
}  # fmt: skip


def run(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "jaxhinge", *args], cwd=cwd, capture_output=True, text=True, check=False, env=env
    )


@pytest.mark.slow
def test_simulate_bundled_example_writes_contract(tmp_path):
    """The one subprocess test of `jaxhinge simulate`: exit status 0, the .npz and the plot, nothing else; the
    compiled simulation goes into the CLI's compile cache (`JAXHINGE_CACHE_DIR`), and a second run that loads
    it writes the same trajectory."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAXHINGE_CACHE_DIR"] = str(tmp_path / "cache")
    (tmp_path / "run").mkdir()
    tmp_path = tmp_path / "run"
    p = run("simulate", "--out", "traj.npz", "--plot", "traj.png", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    with np.load(tmp_path / "traj.npz") as f:
        assert {k: f[k].shape for k in EXPECTED} == EXPECTED
        assert list(f["panel_names"]) == ["p0", "p1"]
        # Basilisk's truth value (§3.2) through the file
        np.testing.assert_allclose(
            f["r_BN_N"][-1], [-0.15832794740648992, 1.122481716747217, -0.37975995949382907], rtol=1e-10
        )
    png = (tmp_path / "traj.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert "max relative drift" in p.stdout
    assert sorted(os.listdir(tmp_path)) == ["traj.npz", "traj.png"]  # no temp files left

    cached = os.listdir(tmp_path.parent / "cache")
    assert any(n.startswith("jit__simulate_jit-") for n in cached), cached
    p2 = run("simulate", "--out", "again.npz", cwd=tmp_path, env=env)
    assert p2.returncode == 0, p2.stderr
    with np.load(tmp_path / "traj.npz") as a, np.load(tmp_path / "again.npz") as b:
        for k in EXPECTED:
            np.testing.assert_array_equal(a[k], b[k])


def test_unusable_compile_cache_folder_is_named(tmp_path):
    """A cache folder that cannot be created (here: below a file) is reported in words (the CLI then warns and
    runs without the cache); a usable one is created with its parents."""
    from jaxhinge._cli import cache_problem

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


def test_numerical_failure_is_reported_not_raised(tmp_path, capsys):
    """A hinge far too stiff for rk4 at this step diverges: plain-words error, exit 2, nothing written."""
    sc = jh.load_scenario(example_path("two_panel.toml"))
    d = jh.scenario_to_dict(sc)
    d["panels"][0]["k"] = 1e10  # omega_n * dt ~ 6: outside RK4's stability limit (2.8)
    d["simulation"]["t_end"] = 0.5
    jh.dump_scenario(jh.scenario_from_dict(d), tmp_path / "stiff.toml")
    rc = main(["simulate", str(tmp_path / "stiff.toml"), "--out", str(tmp_path / "traj.npz")])
    err = capsys.readouterr().err
    assert rc == 2
    last = err.strip().splitlines()[-1]  # after the progress line
    assert last.startswith(f"jaxhinge: error: {tmp_path / 'stiff.toml'}: integration failed") and "non-finite" in last
    assert "a smaller simulation.dt (now 0.001 s)" in last
    assert "Traceback" not in err
    assert not (tmp_path / "traj.npz").exists()
