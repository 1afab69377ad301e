"""Batched runs: vmap == per-member `simulate`, failure isolation, chunking, sharding, dispersion sampling
statistics, and the `jaxhinge sweep` command."""

import json
import os
import subprocess
import sys
import textwrap

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._analysis._studies import _batch
from jaxhinge._cli import main

HERE = os.path.dirname(__file__)
SEED = os.path.join(HERE, "data", "bsk", "seed_noGravity.toml")
# short and coarse so the file stays fast: every test below shares one compiled batch program (6 members
# of {p0.k, p1.c} in chunks of 4) except the chunking and sharding checks
SHORT = {"t_end": 0.3, "save_dt": 0.05, "dt": 0.01}
FIELDS = ("theta", "thetaDot", "omega_BN_B", "sigma_BN", "r_BN_N", "v_BN_N", "totRotEnergy")
# vmap of the same float64 program: identical up to reassociation in XLA's batched kernels
TOL = 1e-12


@pytest.fixture(scope="module")
def scenario():
    return jh.load_scenario(SEED).with_simulation(**SHORT)


@pytest.fixture(scope="module")
def params(scenario):
    specs = [
        {"param": "p0.k", "dist": "uniform", "low": 80.0, "high": 120.0},
        {"param": "p1.c", "dist": "normal", "mean": 2.0, "std": 0.2},
    ]
    return jh.sample_dispersions(scenario, specs, 6, 0)


@pytest.fixture(scope="module")
def singles(scenario, params):
    return [
        jh.simulate(jh.apply_parameters(scenario, {k: v[m] for k, v in params.items()})) for m in range(6)
    ]


def _close(traj, m, one):
    for f in FIELDS:
        np.testing.assert_allclose(
            np.asarray(getattr(traj, f))[m], np.asarray(getattr(one, f)), rtol=0, atol=TOL, err_msg=f
        )


def test_apply_parameters_matches_tree_at(scenario):
    # reference: the same edits made by hand with eqx.tree_at
    p = {
        "p1.k": 55.0,
        "p0.thetaInit": 0.01,
        "hub.omega_BN_BInit": jnp.array([0.0, 0.2, 0.0]),
        "hub.IHubPntBc_B": jnp.array([1.0, 4.0, 0.25]),
        "p0.dcm_HB": jnp.array([0.0, 0.0, 0.3]),
    }
    got = jh.apply_parameters(scenario, p)
    assert float(got.spacecraft.panels.k[1]) == 55.0 and float(got.spacecraft.panels.k[0]) == 100.0
    assert float(got.initial.thetaInit[0]) == 0.01
    np.testing.assert_array_equal(got.initial.omega_BN_BInit, [0.0, 0.2, 0.0])
    np.testing.assert_allclose(np.diag(got.spacecraft.hub.IHubPntBc_B), [900.0, 3200.0, 150.0], rtol=1e-15)
    # dcm_HB: rotation by 0.3 rad about h3, applied in H: [H'B] = M3(0.3) [HB]
    c, s = np.cos(0.3), np.sin(0.3)
    m3 = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(
        got.spacecraft.panels.dcm_HB[0], m3 @ np.asarray(scenario.spacecraft.panels.dcm_HB[0]), atol=1e-15
    )
    np.testing.assert_array_equal(got.spacecraft.panels.dcm_HB[1], scenario.spacecraft.panels.dcm_HB[1])


def test_batch_equals_single_runs(scenario, params, singles):
    seen = []
    traj = jh.simulate_batch(scenario, params, chunk_size=4, progress=lambda d, n: seen.append((d, n)))
    assert seen == [(4, 6), (6, 6)]  # last chunk padded, reported once per chunk
    assert traj.theta.shape == (6, 7, 2) and np.asarray(traj.success).all()
    for m in range(6):
        _close(traj, m, singles[m])


def test_batched_scenario_input(scenario, params, singles):
    # a batched Scenario (every leaf with a member axis) runs the same members
    batch = eqx.filter_vmap(lambda p: jh.apply_parameters(scenario, p))(
        {k: jnp.asarray(v) for k, v in params.items()}
    )
    traj = jh.simulate_batch(batch, chunk_size=6)
    for m in range(6):
        _close(traj, m, singles[m])


def test_failing_members_are_flagged_and_isolated(scenario, params, singles):
    bad = {k: np.array(v) for k, v in params.items()}
    bad["p1.c"][2] = 1e12  # rk4 with c dt / I ~ 1e8: the damped hinge overflows
    bad["p0.k"][4] = 1e12  # rk4 with omega*dt ~ 400: the state overflows
    traj = jh.simulate_batch(scenario, bad, chunk_size=4)
    np.testing.assert_array_equal(np.asarray(traj.success), [True, True, False, True, False, True])
    reasons = dict(_batch.failure_reasons(traj))
    assert set(reasons) == {2, 4} and all("non-finite" in r or "nan" in r.lower() for r in reasons.values())
    for m in (0, 1, 3, 5):
        _close(traj, m, singles[m])
    summ = jh.summarize(traj, ("theta",))
    assert summ["failed"] == 2 and summ["succeeded"] == 4
    ok_theta = np.stack([np.asarray(singles[m].theta) for m in (0, 1, 3, 5)])
    np.testing.assert_allclose(summ["theta"]["max"], ok_theta.max(axis=0), atol=TOL)
    np.testing.assert_allclose(summ["theta"]["min"], ok_theta.min(axis=0), atol=TOL)
    np.testing.assert_allclose(summ["theta"]["percentiles"][1], np.median(ok_theta, axis=0), atol=TOL)


def test_chunked_equals_unchunked_one_trace(scenario, params, monkeypatch):
    traces = []

    apply = _batch.apply_resolved

    def counting(s, pars, values):  # called once per trace of the batched program
        traces.append(1)
        return apply(s, pars, values)

    unchunked = jh.simulate_batch(scenario, params, chunk_size=6)
    monkeypatch.setattr(_batch, "apply_resolved", counting)
    chunked = jh.simulate_batch(scenario, params, chunk_size=5)  # 2 chunks, the last one padded (a new size)
    assert len(traces) == 1  # one compilation serves every chunk
    for f in FIELDS:
        np.testing.assert_allclose(
            np.asarray(getattr(chunked, f)), np.asarray(getattr(unchunked, f)), rtol=0, atol=TOL
        )


def test_sharded_equals_unsharded(scenario, params, tmp_path):
    """The batch sharded over 2 devices equals the unsharded one. The device count is fixed when JAX starts:
    the sharded run is made in a fresh process with 2 host devices; the unsharded reference here, with the
    program the other tests of this file already compiled."""
    ref = jh.simulate_batch(scenario, params, chunk_size=4)
    np.savez(tmp_path / "params.npz", **params)
    code = textwrap.dedent(f"""
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np, jaxhinge as jh
        assert len(jax.devices()) == 2, jax.devices()
        s = jh.load_scenario({SEED!r}).with_simulation(**{SHORT!r})
        p = dict(np.load({str(tmp_path / "params.npz")!r}))
        a = jh.simulate_batch(s, p, chunk_size=3)  # sharded over 2 devices (chunk -> 4)
        np.savez({str(tmp_path / "sharded.npz")!r}, success=np.asarray(a.success),
                 **{{f: np.asarray(getattr(a, f)) for f in {FIELDS!r}}})
    """)
    # the test run's XLA flags (conftest) plus 2 host devices
    flags = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = np.load(tmp_path / "sharded.npz")
    assert got["success"].all()
    for f in FIELDS:
        np.testing.assert_allclose(got[f], np.asarray(getattr(ref, f)), rtol=0, atol=TOL, err_msg=f)


def test_sampling_statistics(scenario):
    n = 10000
    specs = [
        {"param": "p0.k", "dist": "uniform", "low": 80.0, "high": 120.0},
        {"param": "p0.c", "dist": "normal", "mean": 2.0, "std": 0.2},
        {"param": "p1.mass", "dist": "normal", "rel_std": 0.05},  # mean = nominal 100 kg
        {"param": "hub.omega_BN_BInit", "dist": "normal", "std": [0.01, 0.02, 0.03]},  # mean = nominal
        {"param": "hub.IHubPntBc_B", "dist": "uniform", "low": 0.9, "high": 1.1},
        {"param": "p1.dcm_HB", "dist": "normal", "std": 0.01},
    ]
    p = jh.sample_dispersions(scenario, specs, n, 42)
    se = 4.0 / np.sqrt(n)  # 4 standard errors (in units of the spread)

    def check(x, mean, std):
        assert abs(x.mean(axis=0) - mean).max() < se * np.max(std)
        # std of a sample std ~ std/sqrt(2n) for normal, smaller than this bound for uniform
        assert abs(x.std(axis=0) / std - 1.0).max() < se

    check(p["p0.k"], 100.0, 40.0 / np.sqrt(12.0))
    assert p["p0.k"].min() >= 80.0 and p["p0.k"].max() < 120.0
    check(p["p0.c"], 2.0, 0.2)
    check(p["p1.mass"], 100.0, 5.0)
    check(p["hub.omega_BN_BInit"], np.array([0.1, -0.1, 0.1]), np.array([0.01, 0.02, 0.03]))
    check(p["hub.IHubPntBc_B"], 1.0, 0.2 / np.sqrt(12.0))
    check(p["p1.dcm_HB"], 0.0, 0.01)
    # reproducible with the same seed, different with another; adding a spec leaves the others' draws alone
    again = jh.sample_dispersions(scenario, specs, n, 42)
    assert all(np.array_equal(p[k], again[k]) for k in p)
    other = jh.sample_dispersions(scenario, specs, n, 43)
    assert not np.array_equal(p["p0.k"], other["p0.k"])
    fewer = jh.sample_dispersions(scenario, specs[:2], n, 42)
    assert np.array_equal(fewer["p0.c"], p["p0.c"])
    # counter-based: a member's draws depend on (seed, index) only, not on the member count or on which others
    # are drawn with it (what a resumed or distributed campaign relies on)
    some = [n - 1, 3, 17]
    part = jh.sample_dispersions(scenario, specs, n, 42, indices=some)
    more = jh.sample_dispersions(scenario, specs, 2 * n, 42)
    assert all(np.array_equal(part[k], p[k][some]) and np.array_equal(more[k][:n], p[k]) for k in p)
    with pytest.raises(ValueError, match=r"indices = \[-1\]: each must be in \[0, "):
        jh.sample_dispersions(scenario, specs, n, 42, indices=[-1])
    # applied inertias stay SPD and rotations orthonormal
    one = jh.apply_parameters(scenario, {k: v[0] for k, v in p.items()})
    assert np.linalg.eigvalsh(np.asarray(one.spacecraft.hub.IHubPntBc_B)).min() > 0
    dcm = np.asarray(one.spacecraft.panels.dcm_HB[1])
    np.testing.assert_allclose(dcm @ dcm.T, np.eye(3), atol=1e-14)


def test_grid_dispersions(scenario):
    specs, members = jh.grid_dispersions({"p0.k": [50.0, 100.0], "p0.c": [0.0, 1.0, 2.0]})
    assert members == 6
    p = jh.sample_dispersions(scenario, specs, members, 0)
    assert sorted(zip(p["p0.k"], p["p0.c"])) == [(k, c) for k in (50.0, 100.0) for c in (0.0, 1.0, 2.0)]


@pytest.mark.parametrize(
    "spec, match",
    [
        (
            {"param": "p9.k", "dist": "uniform", "low": 1.0, "high": 2.0},
            r"dispersions\[0\]\.param = 'p9.k'.*p0, p1",
        ),
        ({"param": "p0.kk", "dist": "uniform", "low": 1.0, "high": 2.0},
         r"'p0.kk': unknown field 'kk' \(did you mean 'k'\?\); p0 fields are mass, IPntS_S, d, k, c"),
        # values a scenario file would refuse are refused in a dispersion too (the registry's rule)
        ({"param": "p0.mass", "dist": "uniform", "low": -100.0, "high": -50.0},
         r"low = -100.0: p0.mass must be > 0 \(panel mass, kg\)"),
        ({"param": "p0.k", "dist": "uniform", "low": -1.0, "high": 2.0}, r"low = -1.0: p0.k must be >= 0"),
        ({"param": "p0.d", "dist": "values", "values": [1.0, 2.0, -1.0, 1.0]},
         r"values: member 2 = -1.0: p0.d must be > 0"),
        (
            {"param": "p0.k", "dist": "poisson"},
            r"dist = 'poisson': allowed values are uniform, normal, values",
        ),
        ({"param": "p0.k", "dist": "uniform", "low": 2.0, "high": 2.0}, r"low = 2.0: must be < high = 2.0"),
        ({"param": "p0.k", "dist": "normal", "std": -1.0}, r"std = -1.0: must be > 0"),
        ({"param": "p0.k", "dist": "normal", "std": 1.0, "sigma": 1.0}, r"unknown key 'sigma'"),
        (
            {"param": "hub.IHubPntBc_B", "dist": "uniform", "low": 0.0, "high": 2.0},
            r"low = 0.0: hub.IHubPntBc_B must be > 0",
        ),
        (
            {"param": "p0.k", "dist": "values", "values": [1.0, 2.0]},
            r"shape \(2,\) does not fit; need \(4,\)",
        ),
    ],
)
def test_bad_dispersions(scenario, spec, match):
    with pytest.raises(jh.SweepError, match=match):
        jh.sample_dispersions(scenario, [spec], 4, 0)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda s: jh.simulate_batch(s, {"p0.k": np.zeros(0)}), ValueError,
         r"^simulate_batch: every batched value needs a leading member axis .* got lengths p0.k 0 "),
        (lambda s: jh.simulate_batch(s, {"p0.k": 100.0}), ValueError, r"got lengths p0.k 0 \(0: no member axis"),
        (lambda s: jh.simulate_batch(s, {"p0.k": np.ones(2), "p1.c": np.ones(3)}), ValueError, r"lengths p0.k 2, p1.c 3"),
        (lambda s: jh.simulate_batch(s, {"p0.kk": np.ones(2)}), ValueError,
         r"^simulate_batch: params: 'p0.kk': unknown field 'kk' \(did you mean 'k'\?\)"),
        (lambda s: jh.simulate_batch(s, [("p0.k", [1.0])]), TypeError,
         r"^simulate_batch: params = \[\[\"p0.k\", \[1.0\]\]\]: must be a mapping \{name: values"),
        (lambda s: jh.simulate_batch(jh.scenario_to_dict(s), {"p0.k": np.ones(2)}), TypeError,
         r"^simulate_batch: expected a jaxhinge Scenario, got dict"),
        (lambda s: jh.simulate(jh.scenario_to_dict(s)), TypeError, r"^simulate: expected a jaxhinge Scenario .* got dict"),
        (lambda s: jh.apply_parameters(jh.scenario_to_dict(s), {"p0.k": 1.0}), TypeError,
         r"^apply_parameters: scenario must be a jaxhinge Scenario, got dict"),
    ],
)
def test_api_misuse_is_refused_by_name(scenario, call, error, match, unchecked_types):  # misuse on purpose
    """Issue 14 item 13: the argument, the value and what is allowed, instead of `TypeError: map()...`, an
    AttributeError or an IndexError; raised before anything is compiled."""
    with pytest.raises(error, match=match):
        call(scenario)


def _sweep_files(tmp_path, body: str):
    with open(SEED) as f:
        text = f.read()
    for old, new in (
        ("t_end = 2.5", "t_end = 0.3"),
        ("save_dt = 0.01", "save_dt = 0.05"),
        ("dt = 0.001", "dt = 0.01"),
    ):
        text = text.replace(old, new)
    (tmp_path / "scen.toml").write_text(text)
    path = tmp_path / "sweep.toml"
    path.write_text(body)
    return str(path)


GOOD = """
scenario = "scen.toml"
members = 8
seed = 3
chunk_size = 4
[[dispersions]]
param = "p0.k"
dist = "uniform"
low = 80.0
high = 120.0
[[dispersions]]
param = "p1.c"
dist = "normal"
mean = 2.0
std = 0.2
[output]
dir = "out"
"""


def test_sweep_cli_end_to_end(tmp_path, capsys, scenario):
    path = _sweep_files(tmp_path, GOOD)
    assert main(["sweep", path]) == 0
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["campaign.zarr", "envelopes.png", "histograms.png", "summary.json"]
    err = capsys.readouterr().err
    assert "8/8 members done" in err
    ds = jh.open_campaign(out)
    d = {k: ds[k].values for k in ("param_p0.k", "param_p1.c", "theta", "omega_BN_B")}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["members"] == 8 and summary["failed"] == 0 and summary["failures"] == []
    # reference: the same draws run one by one through the Python API
    p = jh.sample_dispersions(
        scenario,
        [
            {"param": "p0.k", "dist": "uniform", "low": 80.0, "high": 120.0},
            {"param": "p1.c", "dist": "normal", "mean": 2.0, "std": 0.2},
        ],
        8,
        3,
    )
    np.testing.assert_array_equal(d["param_p0.k"], p["p0.k"])
    np.testing.assert_array_equal(d["param_p1.c"], p["p1.c"])
    for m in (0, 7):
        one = jh.simulate(jh.apply_parameters(scenario, {k: v[m] for k, v in p.items()}))
        np.testing.assert_allclose(d["theta"][m], one.theta, atol=TOL)
        np.testing.assert_allclose(d["omega_BN_B"][m], one.omega_BN_B, atol=TOL)
    ft = d["theta"][:, -1, 0]
    np.testing.assert_allclose(
        summary["statistics (successful members)"]["final_theta[p0] [rad]"]["p50"],
        np.percentile(ft, 50),
        rtol=1e-14,
    )
    assert ds["time"].shape == (7,) and ds["sigma_BN"].shape == (8, 7, 3) and ds["success"].values.all()


@pytest.mark.parametrize(
    "edit, match",
    [
        (("seed = 3", "seed = 3\ncolour = 1"), r"top level: unknown key 'colour'; allowed keys: scenario, members"),
        (("seed = 3", "seed = 3\nmember = 1"), r"unknown key 'member' \(did you mean 'members'\?\)"),
        (('dist = "uniform"', 'dist = "lognormal"'), r"dispersions\[0\]\.dist = 'lognormal': allowed values"),
        (("high = 120.0", "high = 70.0"), r"dispersions\[0\]\.low = 80.0: must be < high = 70.0"),
        (("std = 0.2", "std = 0.0"), r"dispersions\[1\]\.std = 0.0: must be > 0"),
        (("members = 8", "members = 0"), r"members = 0: must be an integer > 0"),
        (("seed = 3", "seed = -1"), r"seed = -1: must be an integer >= 0"),
        (('scenario = "scen.toml"', 'scenario = "nope.toml"'), r"nope.toml: cannot read scenario file"),
        (('dir = "out"', 'dir = "a/b"'), r"output.dir = \"a/b\": its parent folder '.*/a' does not exist"),
        (("[output]", "[output]\nfolder = 1"), r"output: unknown key 'folder'; allowed keys: dir"),
        (('param = "p1.c"', 'param = "wing.c"'), r"dispersions\[1\]\.param = 'wing.c': unknown owner 'wing'; the prefix must be 'hub' or a panel name"),
        # issue 14 item 1: a value the scenario file would refuse is refused in a sweep too (the registry's rule)
        (("low = 80.0", "low = -1.0"), r"dispersions\[0\]\.low = -1.0: p0.k must be >= 0 \(hinge spring stiffness"),
        # item 10: the output size is estimated before compute: 8 bytes x 1e10 members x 7 samples x (2 x 2 + 6)
        # histories (a campaign holds one chunk in memory, and refuses to keep histories that do not fit)
        (("members = 8", "members = 10000000000"),
         (r"members = 10000000000: every member's history \(7 samples of theta, thetaDot, omega_BN_B and sigma_BN "
          r"with 2 panel\(s\)\) needs about 5\.6e\+03 GB, above the limit of [0-9.]+ GB; keep some of them: "
          r"\[retain\] every = \d+ \(keeps \d+, [0-9.]+ GB\), or raise JAXHINGE_MEMORY_LIMIT_GB")),
    ],
)
def test_sweep_cli_bad_file(tmp_path, capsys, edit, match):
    path = _sweep_files(tmp_path, GOOD.replace(*edit))
    assert main(["sweep", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxhinge: error: ")
    import re

    assert re.search(match, err), err
    assert not (tmp_path / "out").exists()


def test_sweep_output_folder_checked_before_compute(tmp_path, capsys):
    """Reference: an output folder that is an existing file, or an output file name that is an existing folder,
    is refused before anything is sampled or compiled: exit 2, one line, no progress line, nothing written."""
    path = _sweep_files(tmp_path, GOOD)
    (tmp_path / "out").write_text("a file\n")
    assert main(["sweep", path]) == 2
    err = capsys.readouterr().err
    assert err == f"jaxhinge: error: {path}: output.dir = \"out\": '{tmp_path / 'out'}' exists and is not a folder\n"
    (tmp_path / "res" / "summary.json").mkdir(parents=True)
    assert main(["sweep", path, "--out-dir", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "summary.json' is an existing folder; the output file summary.json" in err, err
    assert main(["sweep", path, "--out-dir", str(tmp_path / "x" / "y")]) == 2
    err = capsys.readouterr().err
    assert err == (f"jaxhinge: error: --out-dir = {str(tmp_path / 'x' / 'y')!r}: its parent folder "
                   f"{str(tmp_path / 'x')!r} does not exist\n")
    assert sorted(os.listdir(tmp_path)) == ["out", "res", "scen.toml", "sweep.toml"]


def test_sweep_cli_subprocess_contract(tmp_path):
    """The one subprocess test of `jaxhinge sweep`: exit status 2, one line on stderr, no traceback, no output."""
    path = _sweep_files(tmp_path, GOOD.replace("members = 8", "members = 0"))
    r = subprocess.run([sys.executable, "-m", "jaxhinge", "sweep", path], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 2
    assert r.stderr == f"jaxhinge: error: {path}: members = 0: must be an integer > 0\n"
    assert r.stdout == "" and sorted(os.listdir(tmp_path)) == ["scen.toml", "sweep.toml"]
