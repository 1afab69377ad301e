"""Sensitivity studies: every output kind against central finite differences of the simulator, forward ==
reverse mode, the normalisation, modal scaling laws, the tornado ranking, the SENS.toml CLI and bad input.

One scenario (the bundled slew example: 2 panels, rk4 at dt = 0.01 s, 4 s) and the bundled study's outputs and
parameters throughout, so the forward program is compiled once (finite differences re-run it at perturbed
values: traced, no recompilation) and the reverse program once.
"""

import csv
import itertools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge import example_path
from jaxhinge._analysis._studies._outputs import attitude_error, settling_time
from jaxhinge._cli import main
from jaxhinge._errors import ConfigError
from jaxhinge._jobs._sensitivity import load_study
from jaxhinge._math import mrp_to_dcm

# central differences with a relative step 1e-5: truncation ~ (1e-5)^2 * O(1) relative, rounding
# ~ 1e-16 / 1e-5 = 1e-11 relative; the rk4 solution is a smooth function of the parameters at fixed steps.
REL_STEP = 1e-5
FD_RTOL = 1e-6


@pytest.fixture(scope="module")
def study():
    return load_study(example_path("sensitivity.toml"))


@pytest.fixture(scope="module")
def fwd(study):
    return jh.sensitivity(study.scenario, study.outputs, study.parameters)  # auto -> forward


def _set(scenario, name, value):
    """The scenario with one (component) parameter set to `value`, built independently of the library's parser."""
    if "[" not in name:
        return jh.apply_parameters(scenario, {name: value})
    base, idx = name[:-1].split("[")
    field = base.split(".")[1]
    if field.startswith("I"):  # inertia scale factors, nominal 1
        vec = np.ones(3)
    else:
        vec = np.array(getattr(scenario.initial, field), dtype=float)
    vec[int(idx) - 1] = value  # components are numbered 1, 2, 3
    return jh.apply_parameters(scenario, {base: vec})


@pytest.fixture(scope="module")
def finite_differences(study, fwd):
    """Central differences (M, P) and the perturbed outputs, each from a full re-run at perturbed values."""
    P = len(fwd.parameter_names)
    J = np.zeros((len(fwd.output_names), P))
    plus, minus, steps = [], [], []
    for j, (name, p) in enumerate(zip(fwd.parameter_names, fwd.parameter_values)):
        h = REL_STEP * abs(p) if p != 0 else 1e-6
        yp = jh.sensitivity(_set(study.scenario, name, p + h), study.outputs, study.parameters).output_values
        ym = jh.sensitivity(_set(study.scenario, name, p - h), study.outputs, study.parameters).output_values
        J[:, j] = (yp - ym) / (2 * h)
        plus.append(yp)
        minus.append(ym)
        steps.append(h)
    return J, np.array(plus), np.array(minus), np.array(steps)


def test_study_runs_forward_and_values_are_right(study, fwd):
    assert fwd.mode == "forward" and fwd.success
    t = fwd.t
    theta, _, _ = fwd.output("theta")
    omega, _, _ = fwd.output("omega_BN_B")
    sigma, _, _ = fwd.output("sigma_BN")
    # peak hub rate: max |omega| over the samples
    peak = fwd.output_values[fwd.row("peak_hub_rate")]
    assert peak == pytest.approx(np.linalg.norm(omega, axis=1).max(), rel=1e-14)
    # final attitude error: principal angle from the DCMs, arccos((tr([BN][RN]^T) - 1) / 2)
    C = _dcm(sigma[-1]) @ _dcm(np.zeros(3)).T
    angle = np.arccos(np.clip((np.trace(C) - 1) / 2, -1, 1))
    assert 0.1 < angle < 3.0
    assert fwd.output_values[fwd.row("final_attitude_error")] == pytest.approx(angle, rel=1e-10)
    # settling: interpolated last crossing of max|theta| = 5 mrad
    s = np.abs(theta).max(axis=1)
    k = np.flatnonzero(s > 0.005)[-1]
    ts = t[k] + (s[k] - 0.005) / (s[k] - s[k + 1]) * (t[k + 1] - t[k])
    assert 1.0 < ts < t[-1] - 0.5
    assert fwd.output_values[fwd.row("settling_time")] == pytest.approx(ts, rel=1e-14)
    m = jh.modes(study.scenario)
    f, _, _ = fwd.output("modal_frequencies")
    z, _, _ = fwd.output("damping_ratios")
    np.testing.assert_allclose(f, np.asarray(m.frequency_hz), rtol=1e-13)
    np.testing.assert_allclose(z, np.asarray(m.damping_ratio), rtol=1e-13)
    assert fwd.output("theta")[1].shape == (len(t), 2, 8)


@pytest.mark.parametrize(
    "output",
    [
        "peak_hub_rate",
        "final_attitude_error",
        "settling_time",
        "modal_frequencies",
        "damping_ratios",
        "theta",
        "omega_BN_B",
        "sigma_BN",
    ],
)
def test_jacobian_equals_central_finite_differences(fwd, finite_differences, output):
    J_fd, steps = finite_differences[0], finite_differences[3]
    b = fwd.block(output)
    J = fwd.jacobian[b.start : b.stop]
    Jf = J_fd[b.start : b.stop]
    # error per parameter column, relative to that column's largest entry in this output (histories: over
    # all samples and components)
    scale = np.abs(J).max(axis=0)
    assert np.all(scale > 0) or output in ("modal_frequencies", "damping_ratios")
    err = np.abs(J - Jf).max(axis=0)
    # + the rounding floor of a central difference, ~ eps |y| / h (here for the ~1e-20 dependence of the
    # modal frequencies on c)
    y = np.abs(fwd.output_values[b.start : b.stop]).max()
    ok = err <= FD_RTOL * scale + 1e3 * np.finfo(float).eps * y / steps
    assert ok.all(), dict(zip(fwd.parameter_names, err / np.where(scale > 0, scale, 1)))


def test_forward_and_reverse_agree(study, fwd):
    outs = study.outputs[:4]  # peak, final attitude, settling, modal frequencies: 5 rows < 8 parameters
    rev = jh.sensitivity(study.scenario, outs, study.parameters)
    assert rev.mode == "reverse"
    for name in ("peak_hub_rate", "final_attitude_error", "settling_time", "modal_frequencies"):
        a, b = rev.block(name), fwd.block(name)
        Jr, Jf = rev.jacobian[a.start : a.stop], fwd.jacobian[b.start : b.stop]
        assert np.abs(Jr - Jf).max() <= 1e-10 * np.abs(Jf).max(), name
        # the same outputs from two differently compiled programs: equal to rounding
        np.testing.assert_allclose(
            rev.output_values[a.start : a.stop], fwd.output_values[b.start : b.stop], rtol=1e-13, atol=0
        )


def test_normalisation(fwd, finite_differences):
    _, plus, minus, steps = finite_differences
    p, y, J, N, D = (
        fwd.parameter_values,
        fwd.output_values,
        fwd.jacobian,
        fwd.normalized,
        fwd.normalized_defined,
    )
    assert np.all(np.isfinite(N))
    j0 = fwd.parameter_names.index("hub.omega_BN_BInit[2]")  # nominal 0: ln p undefined
    assert p[j0] == 0 and not D[:, j0].any() and np.all(N[:, j0] == 0)
    assert any("hub.omega_BN_BInit[2]" in n for n in fwd.notes)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_allclose(N[D], (J * p[None, :] / y[:, None])[D], rtol=1e-14, atol=0)
    # d ln y / d ln p from central differences of ln y against ln p, for the scalar and modal rows
    rows = [fwd.row(r) for r in fwd.scalar_rows()]
    for j in range(len(p)):
        if p[j] == 0:
            continue
        dlnp = np.log(p[j] + steps[j]) - np.log(p[j] - steps[j])
        fd = (np.log(plus[j, rows]) - np.log(minus[j, rows])) / dlnp
        np.testing.assert_allclose(N[rows, j], fd, rtol=1e-5, atol=1e-9)


def test_modal_scaling_laws(fwd):
    """Euler's theorem for homogeneous functions: scaling every k by s scales every frequency by sqrt(s)
    (sum of k-elasticities 1/2) and every damping ratio by 1/sqrt(s); scaling every c scales zeta by s."""
    names = fwd.parameter_names
    ks = [names.index(n) for n in ("p0.k", "p1.k")]
    cs = [names.index(n) for n in ("p0.c", "p1.c")]
    _, _, Nf = fwd.output("modal_frequencies")
    _, _, Nz = fwd.output("damping_ratios")
    np.testing.assert_allclose(Nf[:, ks].sum(1), 0.5, atol=1e-12)
    np.testing.assert_allclose(Nf[:, cs].sum(1), 0.0, atol=1e-12)
    np.testing.assert_allclose(Nz[:, ks].sum(1), -0.5, atol=1e-12)
    np.testing.assert_allclose(Nz[:, cs].sum(1), 1.0, atol=1e-12)


def test_tornado_ranking(fwd, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = fwd.row("settling_time")
    ranked = fwd.ranking("settling_time")
    elasticity = fwd.jacobian[r] * fwd.parameter_values / fwd.output_values[r]
    order = [fwd.parameter_names[j] for j in np.argsort(-np.abs(elasticity)) if fwd.parameter_values[j] != 0]
    assert [n for n, v in ranked if v is not None] == order
    assert ranked[-1] == ("hub.omega_BN_BInit[2]", None)
    assert all(abs(a[1]) >= abs(b[1]) for a, b in itertools.pairwise(ranked) if b[1] is not None)
    fig, ax = plt.subplots()
    jh.plot_tornado(fwd, "settling_time", ax=ax)
    labels = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert labels[: len(order)] == order  # largest bar on top
    plt.close(fig)
    with open(tmp_path / "t.png", "wb") as f:
        jh.plot_tornado(fwd, "peak_hub_rate", f)
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def _dcm(sigma):
    """[BN] of an MRP (Schaub & Junkins): I + (8 s~^2 - 4 (1 - |s|^2) s~) / (1 + |s|^2)^2, in NumPy."""
    x, y, z = sigma
    st = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    s2 = float(np.dot(sigma, sigma))
    return np.eye(3) + (8 * st @ st - 4 * (1 - s2) * st) / (1 + s2) ** 2


def test_attitude_error_matches_dcm_angle():
    rng = np.random.default_rng(3)
    s = rng.normal(size=(40, 3)) * 0.6
    r = rng.normal(size=(40, 3)) * 0.6
    s[:5] *= 3.0  # non-shadow sets (|sigma| > 1)
    err = np.asarray(jax.jit(jax.vmap(attitude_error))(jnp.asarray(s), jnp.asarray(r)))
    np.testing.assert_allclose(_dcm(s[0]), np.asarray(mrp_to_dcm(jnp.asarray(s[0]))), atol=1e-15)
    checked = 0
    for i in range(len(s)):
        c = (np.trace(_dcm(s[i]) @ _dcm(r[i]).T) - 1) / 2
        ref = np.arccos(np.clip(c, -1, 1))
        # arccos loses accuracy near 0 and pi (d/dc arccos = -1/sin): compare where sin(angle) > 0.05
        if np.sin(ref) > 0.05:
            assert err[i] == pytest.approx(ref, abs=1e-12)
            checked += 1
    assert checked > 30
    same = jnp.array([0.1, 0.2, 0.3])
    assert abs(float(attitude_error(same, same))) < 1e-15
    g = jax.grad(attitude_error)(same, same)
    assert np.all(np.isfinite(np.asarray(g)))  # no NaN at zero error (0 is reported)


def test_settling_time_of_an_exponential():
    """s(t) = a exp(-t/tau): t_s = tau ln(a/threshold), d t_s/d a = tau/a. Linear interpolation between
    samples dt = 1 ms apart: t_s exact to O((dt/tau)^2) relative; its derivative uses the secant slope
    instead of s'(t_s), exact to O(dt/tau) = 1.25e-3 relative."""
    t = jnp.arange(0.0, 5.0 + 5e-4, 1e-3)
    tau, thr = 0.8, 0.01

    def ts(a):
        return settling_time(t, a * jnp.exp(-t / tau), thr)

    a = 1.3
    v, status = jax.jit(ts)(a)
    assert int(status) == 0
    assert float(v) == pytest.approx(tau * np.log(a / thr), rel=1e-6)
    d = jax.jit(jax.grad(lambda a: ts(a)[0]))(a)
    assert float(d) == pytest.approx(tau / a, rel=1e-3 / tau)
    assert [int(jax.jit(ts)(x)[1]) for x in (0.005, 1e6)] == [1, 2]  # never above; not settled by t_end
    assert float(jax.jit(ts)(0.005)[0]) == 0.0 and float(jax.jit(ts)(1e6)[0]) == float(t[-1])


def test_cli_end_to_end(fwd, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["sensitivity", example_path("sensitivity.toml"), "--out-dir", str(out)])
    assert rc == 0
    assert sorted(os.listdir(out)) == ["sensitivity.csv", "sensitivity.json", "tornado.png"]
    data = json.loads((out / "sensitivity.json").read_text())
    assert [p["name"] for p in data["parameters"]] == list(fwd.parameter_names)
    peak = next(o for o in data["outputs"] if o["name"] == "peak_hub_rate")
    r = fwd.row("peak_hub_rate")
    assert peak["unit"] == "rad/s" and peak["value"] == fwd.output_values[r]
    np.testing.assert_array_equal(peak["jacobian"], fwd.jacobian[r])
    j0 = fwd.parameter_names.index("hub.omega_BN_BInit[2]")
    assert peak["normalized"][j0] is None
    theta = next(o for o in data["outputs"] if o["name"] == "theta")
    assert np.asarray(theta["jacobian"]).shape == (len(fwd.t), 2, 8) and theta["labels"] == ["p0", "p1"]
    with open(out / "sensitivity.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1 + len(fwd.output_names) * len(fwd.parameter_names)
    assert rows[1][0] == "peak_hub_rate" and float(rows[1][8]) == fwd.jacobian[r, 0]
    assert (out / "tornado.png").read_bytes()[:4] == b"\x89PNG"
    assert "peak_hub_rate" in capsys.readouterr().out


BAD = [
    ('parameters = ["p0.kk"]', r"parameters\[0\] = 'p0.kk': unknown field 'kk' \(did you mean 'k'\?\)"),
    ('parameters = ["hub.mHub[1]"]', r"hub.mHub is a scalar; drop the \[1\]"),
    ('parameters = ["hub.omega_BN_BInit[0]"]', r"components are numbered 1, 2, 3.*hub.omega_BN_BInit\[1\] is the first"),
    ('parameters = ["p0.k", "p0.k"]', r"'p0.k' is listed twice"),
    (
        'outputs = ["peak_hub_rat"]',
        r"outputs\[0\] = 'peak_hub_rat': unknown output \(did you mean 'peak_hub_rate'\?\)",
    ),
    (
        'outputs = [{name = "settling_time", threshold = -1.0}]',
        r"outputs\[0\].threshold = -1.0: must be a finite number > 0",
    ),
    ('outputs = [{name = "settling_time"}]', r"settling_time needs a threshold"),
    (
        'outputs = [{name = "settling_time", threshold = 0.1, signal = "phi"}]',
        r"signal = 'phi': allowed values are theta, hub_rate",
    ),
    ('outputs = [{name = "modal_frequencies", boundary = "pinned"}]', r"boundary = 'pinned'"),
    ('outputs = [{name = "peak_hub_rate", treshold = 1.0}]', r"unknown key 'treshold' for peak_hub_rate"),
    ('outputs = ["theta"]\ntornado = ["theta"]', r"tornado\[0\] = \"theta\": not a scalar output row"),
    (
        'outputs = ["modal_frequencies"]\ntornado = ["modal_frequencies[mode 3]"]',
        r"not a scalar output row \(did you mean 'modal_frequencies\[mode 2\]'",
    ),
    (
        'outputs = ["peak_hub_rate"]\nmode = "sideways"',
        r'mode = "sideways": allowed values are "auto", "forward", "reverse"',
    ),
    (
        'outputs = ["peak_hub_rate"]\nscenaro = "x.toml"',
        r"unknown key 'scenaro' \(did you mean 'scenario'\?\)",
    ),
    ('outputs = ["peak_hub_rate"]\ntornado = 3', r'tornado = 3: must be a list of output row names'),
    ('outputs = "peak_hub_rate"\nmode = 1', r'mode = 1: allowed values are "auto", "forward", "reverse"'),
]


@pytest.mark.parametrize("body,match", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_input_is_refused_before_compute(tmp_path, capsys, body, match):
    import re

    if not body.startswith("outputs") and "outputs" not in body:
        body = 'outputs = ["peak_hub_rate"]\n' + body
    text = f'scenario = "{example_path("slew_two_panel.toml")}"\n{body}\n[output]\ndir = "out"\n'
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(jh.SensitivityError, match=match):
        load_study(str(path))
    assert main(["sensitivity", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxhinge: error: ") and re.search(match, err)
    assert not (tmp_path / "out").exists()


def test_api_refuses_bad_mode_and_names(study):
    with pytest.raises(jh.SensitivityError, match="mode = 'fwd': allowed values are auto, forward, reverse"):
        jh.sensitivity(study.scenario, ["peak_hub_rate"], mode="fwd")
    with pytest.raises(jh.SensitivityError, match=r"unknown field 'omega_BN_Binit' \(did you mean 'omega_BN_BInit'\?\)"):
        jh.sensitivity(study.scenario, ["peak_hub_rate"], ["hub.omega_BN_Binit"])


def test_memory_estimate_counts_a_run_per_parameter(study, monkeypatch):
    """Issue 14 item 10: forward mode carries a tangent trajectory per parameter, so 4 parameters (every k and c)
    count as 5 runs of 401 samples: 8 x 5 x 401 x (39 + 19 x 2) bytes = 1.2e-3 GB (one run: 2.5e-4), refused
    before compiling."""
    monkeypatch.setenv("JAXHINGE_MEMORY_LIMIT_GB", "1e-3")
    with pytest.raises(ConfigError, match=r"^simulation.save_dt = 0.01: 5 run\(s\) x 401 samples .* 0.00124 GB"):
        jh.sensitivity(study.scenario, ["peak_hub_rate"])


@pytest.mark.parametrize(
    "dir_line, args, words",
    [
        ('dir = "taken"', [], "output.dir = \"taken\": '{tmp}/taken' exists and is not a folder"),
        ('dir = "out"', ["--out-dir", "{tmp}/taken"], "--out-dir = '{tmp}/taken': '{tmp}/taken' exists and is not"),
        ('dir = "a/b"', [], "output.dir = \"a/b\": its parent folder '{tmp}/a' does not exist"),
        ('dir = "res"', [], "'{tmp}/res/tornado.png' is an existing folder; the output file tornado.png cannot"),
    ],
)
def test_output_folder_checked_before_compute(tmp_path, capsys, dir_line, args, words):
    """Reference: before the file layer only the CLI checked the folder, and not the output file names in it
    (an existing folder `tornado.png` failed after the compute). Now the loader refuses it: exit 2, one line, no
    progress line (nothing compiled), nothing written."""
    (tmp_path / "taken").write_text("a file\n")
    (tmp_path / "res" / "tornado.png").mkdir(parents=True)
    path = tmp_path / "s.toml"
    path.write_text(f'scenario = "{example_path("slew_two_panel.toml")}"\noutputs = ["peak_hub_rate"]\n'
                    f"[output]\n{dir_line}\n")
    assert main(["sensitivity", str(path), *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxhinge: error: ") and words.format(tmp=tmp_path) in err, err
    assert sorted(os.listdir(tmp_path)) == ["res", "s.toml", "taken"] and os.listdir(tmp_path / "res") == ["tornado.png"]


def test_cli_subprocess_contract(tmp_path):
    """The one subprocess test of `jaxhinge sensitivity`: exit status 2, one line on stderr, no traceback, no
    output folder."""
    import subprocess
    import sys

    path = tmp_path / "s.toml"
    path.write_text(f'scenario = "{example_path("slew_two_panel.toml")}"\noutputs = ["peak_hub_rat"]\n'
                    '[output]\ndir = "out"\n')
    r = subprocess.run([sys.executable, "-m", "jaxhinge", "sensitivity", str(path)], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    expected = f"jaxhinge: error: {path}: outputs[0] = 'peak_hub_rat': unknown output (did you mean 'peak_hub_rate'?)"
    assert len(lines) == 1 and lines[0].startswith(expected), r.stderr
    assert r.stdout == "" and os.listdir(tmp_path) == ["s.toml"]



def test_wheel_speed_history_with_four_wheels():
    """A wheel history output (`Omega`, (T, W)) has one row per wheel and sample, labelled by the wheels' names,
    for any number of wheels (four here, not three): its derivatives with respect to a wheel's motor torque equal
    central differences of the simulated speeds (linear in u below u_max: 1e-7 relative); outputs that need a
    controller are refused for a scenario without one."""
    g = (np.array([[1, 1, 1], [-1, 1, 1], [-1, -1, 1], [1, -1, 1]]) / np.sqrt(3)).tolist()
    d = {"hub": {"mHub": 500.0, "IHubPntBc_B": [[400.0, 0, 0], [0, 300.0, 0], [0, 0, 200.0]]},
         "panels": [{"name": "p0", "mass": 20.0, "IPntS_S": [[5.0, 0, 0], [0, 4.0, 0], [0, 0, 3.0]], "d": 1.0,
                     "k": 50.0, "c": 1.0, "r_HB_B": [0.0, 0.5, 0.0], "dcm_HB": [[0, -1, 0], [1, 0, 0], [0, 0, 1]]}],
         "wheels": [{"name": f"rw{i + 1}", "gsHat_B": a, "Js": 0.1, "Omega": 100.0 * (i + 1), "u": 0.01 * i}
                    for i, a in enumerate(g)],
         "simulation": {"t_end": 0.5, "save_dt": 0.1, "integrator": "rk4", "dt": 0.01}}
    s = jh.scenario_from_dict(d)
    r = jh.sensitivity(s, ["Omega"], ["rw2.u"])
    b = r.block("Omega")
    assert b.shape == (6, 4) and b.labels == ("rw1", "rw2", "rw3", "rw4")
    h = 1e-3
    fd = (np.asarray(jh.simulate(jh.apply_parameters(s, {"rw2.u": 0.01 + h})).Omega)
          - np.asarray(jh.simulate(jh.apply_parameters(s, {"rw2.u": 0.01 - h})).Omega)) / (2 * h)
    np.testing.assert_allclose(r.output("Omega")[1][..., 0], fd, rtol=1e-7, atol=1e-9)
    with pytest.raises(jh.SensitivityError, match=r"outputs\[0\]: Lr needs an attitude controller"):
        jh.sensitivity(s, ["Lr"], ["rw2.u"])
    with pytest.raises(jh.SensitivityError, match=r'signal = "attitude_error" needs an attitude controller'):
        jh.sensitivity(s, [{"name": "settling_time", "signal": "attitude_error", "threshold": 0.1}], ["rw2.u"])
