"""The physical rules (`jaxhinge._model._rules`) by every path a value enters: a scenario file, `Hub` / `Panels`
built in code, `simulate` of a model changed in code, `simulate_batch` and sweep dispersions, and traced batches
(reported per member, never `success = True`). Reference: the scenario file checker's own messages, which these
paths must repeat (same rule, same words)."""

import copy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._analysis._studies._batch import check_dispersions
from jaxhinge._simulation._trajectory import INVALID_MODEL



@pytest.fixture(scope="module")
def folding():
    """The bundled folding wing (single panels and a chain), short rk4 runs."""
    d = jh.scenario_to_dict(jh.load_scenario(jh.example_path("folding_wing")))
    d["simulation"].update(t_end=0.05, save_dt=0.01, integrator="rk4", dt=0.01)
    return d


def _file_rule(d, edit) -> str:
    """The rule text the scenario checker gives for an edited dict."""
    d = copy.deepcopy(d)
    edit(d)
    with pytest.raises(jh.ScenarioError) as e:
        jh.scenario_from_dict(d)
    return e.value.rule


# (registry field, a valid value, the refused value, file edit giving the same rule)
CASES = [
    ("k", 100.0, -100.0, lambda d: d["panels"][0].__setitem__("k", -100.0)),
    ("mass", 50.0, -100.0, lambda d: d["panels"][0].__setitem__("mass", -100.0)),
]


@pytest.mark.parametrize("field,good,value,edit", CASES, ids=[c[0] for c in CASES])
def test_negative_values_refused_by_file_batch_sweep_and_simulate(folding, field, good, value, edit):
    rule = _file_rule(folding, edit)
    s = jh.scenario_from_dict(folding)
    p0 = s.spacecraft.panels.labels[0]
    # simulate_batch: member 1 of 2 breaks the rule; refused before compute, naming the member and the same rule
    with pytest.raises(jh.SweepError) as e:
        jh.simulate_batch(s, {f"{p0}.{field}": np.array([good, value])})
    assert "member 1 of 2" in str(e.value) and e.value.field == f"{p0}.{field}" and rule in str(e.value)
    # a sweep's dispersion bounds: the registry's rule for the field, before sampling
    with pytest.raises(jh.SweepError, match=rf"dispersions\[0\]\.low = -100\.0: {p0}\.{field} must be"):
        check_dispersions(s, [{"param": f"{p0}.{field}", "dist": "uniform", "low": value, "high": 200.0}], 4,
                          source="SWEEP.toml")
    # the model changed in code (eqx.tree_at skips the constructor): simulate refuses it with the same rule
    bad = eqx.tree_at(lambda q: getattr(q.spacecraft.panels, field), s,
                      getattr(s.spacecraft.panels, field).at[0].set(value))
    with pytest.raises(jh.ScenarioError) as e:
        jh.simulate(bad)
    assert e.value.field == f"{p0}.{field}" and e.value.rule == rule


def test_non_rigid_inertia_refused_by_file_and_batch(folding):
    """Hub inertia factors [1, 1, 10] (each positive, so the registry admits them) make diag(900, 800, 6000):
    not a rigid body's. The file refuses that inertia; a sweep over the factors is refused before compute with
    the same rule. Reference: before, the sweep ran and exited 0."""
    rule = _file_rule(folding, lambda d: d["hub"].__setitem__("IHubPntBc_B", [[900.0, 0, 0], [0, 800.0, 0],
                                                                              [0, 0, 6000.0]]))
    s = jh.scenario_from_dict(folding)
    assert "not a rigid body's" in rule
    with pytest.raises(jh.SweepError) as e:
        jh.simulate_batch(s, {"hub.IHubPntBc_B": np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0]])})
    assert e.value.field == "hub.IHubPntBc_B" and "member 1 of 2" in str(e.value)
    assert "not a rigid body's" in str(e.value) and "hub.IHubPntBc_B = [1.0, 1.0, 10.0]" in str(e.value)


def test_l_only_where_a_next_panel_hangs(folding):
    """`l` places the next panel's hinge: on a chain's last panel, or on a single panel, the file refuses it and
    the registry refuses the parameter name (sweeps, batches, fits, sensitivities). Reference: before, a sweep
    of `p0.l` on a single panel and of `l` on a chain's last panel ran and exited 0."""
    last = folding["chains"][0]["panels"][-1]
    rule = _file_rule(folding, lambda d: d["chains"][0]["panels"][-1].__setitem__("l", 1.0))
    assert "l places the next panel's hinge" in rule
    s = jh.scenario_from_dict(folding)
    single = folding["panels"][0]["name"]
    for name in (f"{single}.l", f"{last['name']}.l"):
        with pytest.raises(jh.SweepError, match=r"l places the next panel's hinge"):
            check_dispersions(s, [{"param": name, "dist": "uniform", "low": 0.5, "high": 1.0}], 4)
        with pytest.raises(ValueError, match=r"l places the next panel's hinge"):
            jh.simulate_batch(s, {name: np.array([0.5, 1.0])})
    with pytest.raises(jh.ParameterError, match=r"l places the next panel's hinge"):
        jh.apply_parameters(s, {f"{single}.l": 1.0})


def test_models_built_in_code_are_checked_like_files():
    """`jh.Hub` and `jh.Panels` with values refuse what a scenario file refuses, naming the field, the value and
    the rule; inside `jit`/`vmap` (traced values) they build, and `simulate` reports the run instead."""
    eye = np.eye(3)
    with pytest.raises(jh.ScenarioError, match=r"^Hub: mHub = -1\.0: must be > 0 \(kg\)$"):
        jh.Hub(-1.0, np.diag([900.0, 800.0, 600.0]), np.zeros(3))
    with pytest.raises(jh.ScenarioError, match=r"^Hub: IHubPntBc_B = .*not positive definite"):
        jh.Hub(500.0, np.diag([900.0, -800.0, 600.0]), np.zeros(3))
    args = dict(mass=[50.0], IPntS_S=[np.diag([10.0, 8.0, 5.0])], d=[1.0], k=[100.0], c=[1.0], r_HB_B=[np.zeros(3)],
                dcm_HB=[eye])
    assert jh.Panels(**args).count == 1
    for key, value, match in [("mass", [-1.0], r"p0\.mass = -1\.0: must be > 0 \(kg\)"),
                              ("k", [-5.0], r"p0\.k = -5\.0: must be >= 0"),
                              ("dcm_HB", [2 * eye], r"p0\.dcm_HB = .*not orthonormal"),
                              ("IPntS_S", [np.diag([10.0, -8.0, 5.0])], r"p0\.IPntS_S\[2\]\[2\] = -8\.0: diagonal")]:
        with pytest.raises(jh.ScenarioError, match=r"^Panels: " + match):
            jh.Panels(**{**args, key: value})
    with pytest.raises(jh.ScenarioError, match=r"^Panels: p0\.l = 2\.0: must be 0"):
        jh.Panels(**args, l=[2.0])
    built = jax.vmap(lambda k: jh.Panels(**{**args, "k": k[None]}).k)(jnp.array([-1.0, 1.0]))  # traced: builds
    assert built.shape == (2, 1)


def test_traced_batch_reports_invalid_members(folding):
    """A `vmap` of `simulate_unjitted` over k with one member k < 0: that member is a failed run (`success`
    False, `result` `INVALID_MODEL`, a reason in words), the others succeed and equal their single runs."""
    s = jh.scenario_from_dict(folding)
    k0 = s.spacecraft.panels.k
    ks = jnp.stack([k0, k0.at[0].set(-10.0)])
    traj = jax.jit(jax.vmap(lambda k: jh.simulate_unjitted(eqx.tree_at(lambda q: q.spacecraft.panels.k, s, k))))(ks)
    assert np.asarray(traj.success).tolist() == [True, False]
    assert int(traj.result[1]) == INVALID_MODEL
    from jaxhinge._simulation._trajectory import failure_reason

    assert "physical rule" in failure_reason(int(traj.result[1]))
    single = np.asarray(jh.simulate(s).theta)
    # the batched program is another compilation of the same arithmetic: equal to rounding (measured ~1e-16 rad)
    np.testing.assert_allclose(np.asarray(traj.theta[0]), single, rtol=0, atol=1e-13 * np.abs(single).max())


def test_rk4_pulse_that_never_acts_is_refused(folding):
    """With rk4 a load is sampled at each step start t = k dt: a pulse [0.9995, 1.0) s with dt = 1 ms contains
    none and would never act (before: the run went on silently). The file and `simulate` refuse it; a pulse
    that contains a step start is accepted. Reference: the sampling rule of `jaxhinge._model._loads`."""
    d = copy.deepcopy(folding)
    d["simulation"].update(t_end=2.0, save_dt=0.01, dt=0.001)
    d["loads"]["pulses"] = [{"t_start": 0.9995, "t_end": 1.0, "extTorquePntB_B": [1.0, 0.0, 0.0]}]
    with pytest.raises(jh.ScenarioError, match=r"loads\.pulses\[0\] = .*never acts: with integrator \"rk4\""):
        jh.scenario_from_dict(d)
    d["loads"]["pulses"][0]["t_end"] = 1.0005  # contains t = 1.000 s
    ok = jh.scenario_from_dict(d)
    short = eqx.tree_at(lambda s: s.loads.pulses.t_end, ok, jnp.array([1.0]))
    with pytest.raises(jh.ScenarioError, match=r"never acts"):
        jh.simulate(short)


def test_sweep_file_with_non_rigid_members_is_refused(tmp_path, capsys):
    """`jaxhinge sweep` over hub inertia factors up to [1.1, 1.1, 10] (each admitted by the registry, but members
    whose inertia is not a rigid body's): exit 2, one line naming the member, the field and the scenario file's
    rule, nothing written (before: the sweep ran and exited 0)."""
    from jaxhinge._cli import main

    (tmp_path / "SWEEP.toml").write_text(
        f'scenario = "{jh.example_path("two_panel")}"\nmembers = 8\n\n[[dispersions]]\nparam = "hub.IHubPntBc_B"\n'
        'dist = "uniform"\nlow = [0.9, 0.9, 1.0]\nhigh = [1.1, 1.1, 10.0]\n\n[output]\ndir = "out"\n')
    assert main(["sweep", str(tmp_path / "SWEEP.toml")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"jaxhinge: error: {tmp_path / 'SWEEP.toml'}: member ")
    assert "hub.IHubPntBc_B" in err[0] and "are not a rigid body's" in err[0]
    assert not (tmp_path / "out").exists()
