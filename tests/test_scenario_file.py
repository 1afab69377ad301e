"""Scenario files: the bundled examples against Basilisk's test parameters, exact dump/load round trips,
one refusal per invalid input (message names the field, the value and what is allowed), TOML syntax errors,
and the CLI's error contract."""

import copy
import math
import os
import pathlib
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)

from jaxhinge._errors import ScenarioError
from jaxhinge._io._scenario_file import dump_scenario, example_path, load_scenario, scenario_from_dict, scenario_to_dict
from jaxhinge._model._loads import Loads
from jaxhinge._model._scenario import SimulationConfig

BAD = pathlib.Path(__file__).resolve().parent / "data" / "scenarios"

# Basilisk's hingedRigidBodyNoGravity test parameters (basilisk.md §3 and §3.2).
BSK_HUB = {
    "mHub": 750.0,
    "IHubPntBc_B": [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]],
    "r_BcB_B": [0.0, 0.0, 1.0],
    "r_CN_NInit": [0.1, -0.4, 0.3],
    "v_CN_NInit": [-0.2, 0.5, 0.1],
    "sigma_BNInit": [0.0, 0.0, 0.0],
    "omega_BN_BInit": [0.1, -0.1, 0.1],
}
BSK_PANEL = {
    "mass": 100.0,
    "IPntS_S": [[100.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]],
    "d": 1.5,
    "k": 100.0,
    "c": 0.0,
    "thetaDotInit": 0.0,
}
BSK_P0 = {"r_HB_B": [0.5, 0.0, 1.0], "dcm_HB": [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]}
BSK_P1 = {"r_HB_B": [-0.5, 0.0, 1.0], "dcm_HB": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]}


def base() -> dict:
    """A valid scenario dict (two Basilisk panels, gravity, a pulse) that each bad case edits."""
    return {
        "hub": copy.deepcopy(BSK_HUB),
        "panels": [
            {
                "name": "p0",
                **copy.deepcopy(BSK_PANEL),
                **copy.deepcopy(BSK_P0),
                "thetaInit": 5 * math.pi / 180,
            },
            {"name": "p1", **copy.deepcopy(BSK_PANEL), **copy.deepcopy(BSK_P1), "thetaInit": 0.0},
        ],
        "gravity": {"mu": 3.986004415e14},
        "loads": {
            "extForce_B": [0.0, 1.0, 0.0],
            "pulses": [{"t_start": 0.0, "t_end": 5.0, "extForce_B": [0.2, 0.7, 0.0]}],
        },
        "simulation": {"t_end": 2.5, "save_dt": 0.01, "integrator": "rk4", "dt": 0.001},
    }


def leaves_equal(a, b) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return (
        jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
        and len(la) == len(lb)
        and all(x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(la, lb))
    )


# ---------------------------------------------------------------------------------------------------------
# (a) Bundled examples
# ---------------------------------------------------------------------------------------------------------


def test_two_panel_example_is_basilisk_no_gravity_test():
    s = load_scenario(example_path("two_panel"))
    hub, pan, ini = s.spacecraft.hub, s.spacecraft.panels, s.initial
    assert s.spacecraft.gravity is None
    assert s.loads.pulses is None
    for name in ("extForce_B", "extForce_N", "extTorquePntB_B"):
        assert np.array_equal(getattr(s.loads, name), np.zeros(3))
    assert hub.mHub == 750.0
    assert np.array_equal(hub.IHubPntBc_B, np.diag([900.0, 800.0, 600.0]))
    assert np.array_equal(hub.r_BcB_B, [0.0, 0.0, 1.0])
    for key in ("r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit"):
        assert np.array_equal(getattr(ini, key), BSK_HUB[key]), key
    assert pan.names == ("p0", "p1")
    assert pan.count == 2
    assert np.array_equal(pan.mass, [100.0, 100.0])
    assert np.array_equal(pan.IPntS_S, np.stack([np.diag([100.0, 50.0, 50.0])] * 2))
    assert np.array_equal(pan.d, [1.5, 1.5])
    assert np.array_equal(pan.k, [100.0, 100.0])
    assert np.array_equal(pan.c, [0.0, 0.0])
    assert np.array_equal(pan.r_HB_B, [[0.5, 0.0, 1.0], [-0.5, 0.0, 1.0]])
    assert np.array_equal(pan.dcm_HB, [np.diag([-1.0, -1.0, 1.0]), np.eye(3)])
    assert np.array_equal(ini.thetaInit, [5 * np.pi / 180, 0.0])
    assert np.array_equal(ini.thetaDotInit, [0.0, 0.0])
    for key in ("thetaRef", "thetaDotRef", "motorTorque"):
        assert np.array_equal(getattr(pan, key), [0.0, 0.0])
    assert s.simulation == SimulationConfig(t_end=2.5, save_dt=0.01, integrator="rk4", dt=0.001)
    assert all(x.dtype == jnp.float64 for x in jax.tree_util.tree_leaves(s))


def test_three_panel_example_loads():
    s = load_scenario(example_path("spacecraft_three_panels.toml"))
    pan = s.spacecraft.panels
    assert pan.names == ("wing_pY", "wing_mY", "antenna")
    assert s.spacecraft.gravity is not None and s.loads.pulses is not None
    assert s.simulation.integrator.name == "tsit5" and s.simulation.t_end == 20.0
    # Each wing extends outboard: the panel CoM r_HB_B - d h1 lies further out along +-b2 than the hinge.
    com = np.asarray(pan.r_HB_B) - np.asarray(pan.d)[:, None] * np.asarray(pan.dcm_HB)[:, 0, :]
    assert com[0, 1] > pan.r_HB_B[0, 1] > 0 > pan.r_HB_B[1, 1] > com[1, 1]
    # Fixed-base hinge modes sqrt(k / (I_s2 + m d^2)) / 2 pi in the 0.1-0.5 Hz band the example promises.
    f = np.sqrt(pan.k / (pan.IPntS_S[:, 1, 1] + pan.mass * pan.d**2)) / (2 * np.pi)
    assert np.all((f > 0.1) & (f < 0.5)), f


def test_example_path_unknown():
    with pytest.raises(ScenarioError, match=r"no bundled example 'nope'; available: .*two_panel"):
        example_path("nope")


# ---------------------------------------------------------------------------------------------------------
# Defaults and accepted forms
# ---------------------------------------------------------------------------------------------------------


def test_hub_alone_defaults():
    s = scenario_from_dict({"hub": {"mHub": 10, "IHubPntBc_B": np.eye(3)}})
    pan, ini = s.spacecraft.panels, s.initial
    assert pan.count == 0 and pan.names == ()
    shapes = {
        "mass": (0,),
        "IPntS_S": (0, 3, 3),
        "d": (0,),
        "k": (0,),
        "c": (0,),
        "r_HB_B": (0, 3),
        "dcm_HB": (0, 3, 3),
        "thetaRef": (0,),
        "thetaDotRef": (0,),
        "motorTorque": (0,),
    }
    for key, shape in shapes.items():
        assert getattr(pan, key).shape == shape, key
    assert ini.thetaInit.shape == (0,) and ini.thetaDotInit.shape == (0,)
    for v in (s.spacecraft.hub.r_BcB_B, ini.r_CN_NInit, ini.v_CN_NInit, ini.sigma_BNInit, ini.omega_BN_BInit):
        assert np.array_equal(v, np.zeros(3))
    assert s.spacecraft.hub.mHub.dtype == jnp.float64  # the TOML integer 10 becomes a float
    assert s.spacecraft.gravity is None and s.loads.pulses is None
    assert s.simulation == SimulationConfig()


def test_panel_defaults_and_default_names():
    data = base()
    for p in data["panels"]:
        for key in ("name", "c", "thetaInit", "thetaDotInit"):
            p.pop(key)
    s = scenario_from_dict(data)
    assert s.spacecraft.panels.names == ("p0", "p1")
    for key in ("c", "thetaRef", "thetaDotRef", "motorTorque"):
        assert np.array_equal(getattr(s.spacecraft.panels, key), [0.0, 0.0])
    assert np.array_equal(s.initial.thetaInit, [0.0, 0.0])


def test_loads_built():
    data = base()
    data["loads"]["pulses"].append({"t_start": 1.0, "t_end": 1.5, "extTorquePntB_B": [0.0, 0.0, 0.035]})
    loads = scenario_from_dict(data).loads
    assert np.array_equal(loads.extForce_B, [0.0, 1.0, 0.0])
    assert np.array_equal(loads.extForce_N, np.zeros(3))
    p = loads.pulses
    assert np.array_equal(p.t_start, [0.0, 1.0]) and np.array_equal(p.t_end, [5.0, 1.5])
    assert np.array_equal(p.extForce_B, [[0.2, 0.7, 0.0], [0.0, 0.0, 0.0]])
    assert np.array_equal(p.extForce_N, np.zeros((2, 3)))
    assert np.array_equal(p.extTorquePntB_B, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.035]])
    data["loads"].pop("pulses")
    assert scenario_from_dict(data).loads.pulses is None


def test_accepted_edge_values():
    data = base()
    data["panels"][0].update(k=0.0, c=0.0, thetaInit=-7, motorTorque=2)  # k = c = 0, ints, negative angle
    data["panels"][0]["IPntS_S"][0][1] = 1e-14  # below 1e-12 relative: treated as diagonal
    data["hub"]["sigma_BNInit"] = [3.0, -4.0, 0.0]  # any MRP with a finite norm (|sigma| > 1 allowed)
    data["hub"]["IHubPntBc_B"] = [[900.0, 1.0, 0.0], [1.0, 800.0, 0.0], [0.0, 0.0, 600.0]]  # symmetric, full
    # a thin plate whose rounded moments break the triangle inequality by 1e-4 relative (the bundled example's
    # wings): within the 1e-3 tolerance
    data["panels"][1]["IPntS_S"] = [[13.33, 0.0, 0.0], [0.0, 83.33, 0.0], [0.0, 0.0, 96.67]]
    data["simulation"].update(t_end=3, save_dt=0.01, dt=0.001, max_steps=1000)  # 0.01 / 0.001 in floats
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    c, s = math.cos(0.3), math.sin(0.3)
    data["panels"][1]["dcm_HB"] = (rot @ np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]])).tolist()  # not exact
    sc = scenario_from_dict(data)
    assert sc.simulation.t_end == 3.0 and isinstance(sc.simulation.t_end, float)
    assert sc.simulation.max_steps == 1000
    data["simulation"] = {
        "integrator": "dopri8",
        "t_end": 1.0,
        "save_dt": 0.3,
        "dt": 0.7,
    }  # adaptive: no grid
    assert scenario_from_dict(data).simulation.integrator.name == "dopri8"


# ---------------------------------------------------------------------------------------------------------
# (b) Round trips
# ---------------------------------------------------------------------------------------------------------


def test_round_trip_with_pulses_and_gravity(tmp_path):
    data = base()
    data["panels"][1].update(thetaRef=0.1 + 0.2, thetaDotRef=-1e-300, motorTorque=2.0, c=7.0)
    data["hub"]["r_CN_NInit"] = [-4020338.690396649, 7490566.741852513, 5248299.211589362]
    data["hub"]["v_CN_NInit"] = [-5199.77710904224, -3436.681645356935, 1041.576797498721]
    data["hub"]["sigma_BNInit"] = [1 / 3, -0.0, 5e-324]
    data["loads"]["extForce_N"] = [1.7976931348623157e308, 0.0, -2.5e-17]
    data["loads"]["pulses"].append({"t_start": 11.0, "t_end": 18.0, "extTorquePntB_B": [0.0, 0.0, -0.03]})
    data["simulation"] = {"t_end": 20.0, "save_dt": 0.1, "integrator": "tsit5", "dt": 0.01, "rtol": 1e-9}
    s = scenario_from_dict(data)
    path = tmp_path / "scenario.toml"
    dump_scenario(s, path)
    s2 = load_scenario(path)
    assert leaves_equal(s, s2)
    assert s2.spacecraft.panels.names == ("p0", "p1")
    assert s2.simulation == s.simulation
    assert s2.loads.pulses.t_start.shape == (2,)
    assert os.listdir(tmp_path) == ["scenario.toml"]  # the temporary file was moved into place
    assert scenario_to_dict(s2) == scenario_to_dict(s)


@pytest.mark.parametrize("name", ["two_panel", "spacecraft_three_panels"])
def test_round_trip_examples(tmp_path, name):
    s = load_scenario(example_path(name))
    dump_scenario(s, tmp_path / "x.toml")
    assert leaves_equal(s, load_scenario(tmp_path / "x.toml"))


def test_round_trip_hub_alone(tmp_path):
    s = scenario_from_dict({"hub": {"mHub": 1.0, "IHubPntBc_B": np.eye(3)}})
    dump_scenario(s, tmp_path / "x.toml")
    s2 = load_scenario(tmp_path / "x.toml")
    assert leaves_equal(s, s2) and s2.spacecraft.panels.count == 0


def test_dump_refuses_invalid_scenario_and_keeps_old_file(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text("old contents\n")
    s = scenario_from_dict(base())
    bad = eqx.tree_at(lambda s: s.spacecraft.panels.mass, s, jnp.array([100.0, -3.0]))
    with pytest.raises(ScenarioError, match=re.escape('panels[1] ("p1").mass = -3.0: must be > 0 (kg)')):
        dump_scenario(bad, path)
    assert path.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["x.toml"]


def test_to_dict_refuses_function_loads():
    s = scenario_from_dict(base())
    s = type(s)(s.spacecraft, s.initial, Loads(extForce_B_fn=lambda t: jnp.zeros(3)), s.simulation)
    with pytest.raises(ScenarioError, match=r"loads\.extForce_B_fn is a Python function"):
        scenario_to_dict(s)


def test_to_dict_refuses_batched():
    s = scenario_from_dict(base())
    batched = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), s)
    with pytest.raises(ScenarioError, match=r"hub\.mHub has shape \(2,\), expected \(\)"):
        scenario_to_dict(batched)


# ---------------------------------------------------------------------------------------------------------
# (c) One refusal per invalid input. Each case: (id, edit of base(), message fragments in order).
#     The fragments name the field, the value given and what is allowed.
# ---------------------------------------------------------------------------------------------------------


def _set(*path_value):
    *path, value = path_value

    def edit(d):
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value

    return edit


def _pop(*path):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]

    return edit


def _do(*edits):
    def edit(d):
        for e in edits:
            e(d)

    return edit


P0 = 'panels[0] ("p0")'
P1 = 'panels[1] ("p1")'
REFLECT = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]

BAD_CASES = [
    # masses
    ("panel_mass_negative", _set("panels", 0, "mass", -1.0), [f"{P0}.mass = -1.0: must be > 0 (kg)"]),
    ("panel_mass_zero", _set("panels", 1, "mass", 0.0), [f"{P1}.mass = 0.0: must be > 0 (kg)"]),
    ("hub_mass_zero", _set("hub", "mHub", 0), ["hub.mHub = 0: must be > 0 (kg)"]),
    ("hub_mass_negative", _set("hub", "mHub", -750.0), ["hub.mHub = -750.0: must be > 0 (kg)"]),
    # hub inertia
    (
        "hub_inertia_asymmetric",
        _set("hub", "IHubPntBc_B", [[900.0, 1.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]]),
        [
            "hub.IHubPntBc_B = [[900.0, 1.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]]: not symmetric",
            "must be a symmetric positive-definite 3x3 matrix (kg m^2)",
        ],
    ),
    (
        "hub_inertia_not_positive_definite",
        _set("hub", "IHubPntBc_B", [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, -600.0]]),
        [
            "hub.IHubPntBc_B = [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, -600.0]]: ",
            "not positive definite",
            "smallest eigenvalue -600",
            "symmetric positive-definite",
        ],
    ),
    (
        "hub_inertia_singular",
        _set("hub", "IHubPntBc_B", [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ["hub.IHubPntBc_B = [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]: not positive definite"],
    ),
    # panel inertia
    (
        "panel_inertia_not_diagonal",
        _set("panels", 1, "IPntS_S", [[100.0, 0.0, 0.0], [0.0, 50.0, 0.5], [0.0, 0.5, 50.0]]),
        [f"{P1}.IPntS_S[2][3] = 0.5: IPntS_S must be diagonal", "below 1e-12 * max diagonal"],
    ),
    (
        "panel_inertia_zero_diagonal",
        _set("panels", 0, "IPntS_S", [[100.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 50.0]]),
        [f"{P0}.IPntS_S[2][2] = 0.0: diagonal entries of IPntS_S must be > 0 (kg m^2)"],
    ),
    (
        "panel_inertia_negative_diagonal",
        _set("panels", 0, "IPntS_S", [[-100.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]]),
        [f"{P0}.IPntS_S[1][1] = -100.0: diagonal entries of IPntS_S must be > 0"],
    ),
    # physically implausible bodies (issue 14 items 12 and 16): a relative floor, the triangle inequality
    (
        "hub_mass_implausibly_small",
        _set("hub", "mHub", 1e-300),
        ["hub.mHub = 1e-300: implausibly small: must be >= 1e-09 x the spacecraft's total mass (200 kg)"],
    ),
    (
        "panel_inertia_implausibly_small",
        _set("panels", 1, "IPntS_S", [[1e-12, 0.0, 0.0], [0.0, 1e-12, 0.0], [0.0, 0.0, 1e-12]]),
        [f"{P1}.IPntS_S = [[1e-12, 0.0, 0.0], ", "principal moment 1e-12 kg m^2 is implausibly small: must be >= 1e-09",
         "largest (900)"],
    ),
    (
        "panel_inertia_breaks_triangle_inequality",
        _set("panels", 0, "IPntS_S", [[200.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]]),
        [(f"{P0}.IPntS_S = [[200.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]]: principal moments 50, 50, 200 kg "
          "m^2 are not a rigid body's: the largest must be <= the sum of the others (within 0.001 of the largest)")],
    ),
    (
        "hub_inertia_breaks_triangle_inequality",
        _set("hub", "IHubPntBc_B", [[900.0, 0.0, 0.0], [0.0, 200.0, 0.0], [0.0, 0.0, 600.0]]),
        ["hub.IHubPntBc_B = [[900.0, 0.0, 0.0], ", "principal moments 200, 600, 900 kg m^2 are not a rigid body's"],
    ),
    # dcm_HB
    (
        "dcm_not_orthonormal",
        _set("panels", 1, "dcm_HB", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.1, 1.0]]),
        [
            f"{P1}.dcm_HB = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.1, 1.0]]: not orthonormal",
            "> 1e-09",
            "must be a proper rotation matrix",
        ],
    ),
    (
        "dcm_reflection",
        _set("panels", 1, "dcm_HB", REFLECT),
        [
            f"{P1}.dcm_HB = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]: determinant is -1, not +1",
            "must be a proper rotation matrix",
        ],
    ),
    # scalar ranges
    ("d_zero", _set("panels", 0, "d", 0.0), [f"{P0}.d = 0.0: must be > 0 (m)"]),
    ("d_negative", _set("panels", 0, "d", -1.5), [f"{P0}.d = -1.5: must be > 0 (m)"]),
    ("k_negative", _set("panels", 1, "k", -100.0), [f"{P1}.k = -100.0: must be >= 0 (N m/rad)"]),
    ("c_negative", _set("panels", 1, "c", -6.0), [f"{P1}.c = -6.0: must be >= 0 (N m s/rad)"]),
    # nan / inf
    (
        "nan_scalar",
        _set("panels", 0, "thetaInit", math.nan),
        [f"{P0}.thetaInit = nan: must be a finite number"],
    ),
    ("inf_scalar", _set("hub", "mHub", math.inf), ["hub.mHub = inf: must be a finite number"]),
    (
        "nan_vector",
        _set("hub", "omega_BN_BInit", [0.1, math.nan, 0.1]),
        ["hub.omega_BN_BInit[2] = nan: must be a finite number (nan and inf are not allowed)"],
    ),
    (
        "neg_inf_matrix",
        _set("panels", 1, "dcm_HB", [[1.0, 0.0, 0.0], [0.0, -math.inf, 0.0], [0.0, 0.0, 1.0]]),
        [f"{P1}.dcm_HB[2][2] = -inf: must be a finite number"],
    ),
    (
        "inf_load",
        _set("loads", "extForce_B", [math.inf, 0.0, 0.0]),
        ["loads.extForce_B[1] = inf: must be a finite"],
    ),
    ("nan_mu", _set("gravity", "mu", math.nan), ["gravity.mu = nan: must be a finite number"]),
    ("huge_int", _set("panels", 0, "k", 10**400), [f"{P0}.k = 1000", ": too large for a float64"]),
    (
        "sigma_norm_overflows",
        _set("hub", "sigma_BNInit", [1e200, 0.0, 0.0]),
        [
            "hub.sigma_BNInit = [1e+200, 0.0, 0.0]: |sigma_BNInit|^2 overflows; ",
            "the MRP must have a finite norm",
        ],
    ),
    # shapes
    (
        "vector_too_short",
        _set("hub", "r_BcB_B", [0.0, 1.0]),
        ["hub.r_BcB_B = [0.0, 1.0]: expected shape (3,) (a list of 3 numbers), got shape (2,)"],
    ),
    (
        "vector_given_scalar",
        _set("panels", 0, "r_HB_B", 0.5),
        [f"{P0}.r_HB_B = 0.5: expected shape (3,) (a list of 3 numbers), got a number"],
    ),
    (
        "matrix_wrong_shape",
        _set("panels", 0, "IPntS_S", [[100.0, 0.0, 0.0], [0.0, 50.0, 0.0]]),
        [
            f"{P0}.IPntS_S = [[100.0, 0.0, 0.0], [0.0, 50.0, 0.0]]: ",
            "expected shape (3, 3) (3 rows of 3 numbers), got shape (2, 3)",
        ],
    ),
    (
        "matrix_given_vector",
        _set("hub", "IHubPntBc_B", [900.0, 800.0, 600.0]),
        ["hub.IHubPntBc_B = [900.0, 800.0, 600.0]: expected shape (3, 3)", "got shape (3,)"],
    ),
    (
        "matrix_ragged",
        _set("panels", 1, "dcm_HB", [[1.0, 0.0, 0.0], [0.0, 1.0], [0.0, 0.0, 1.0]]),
        [
            f"{P1}.dcm_HB = [[1.0, 0.0, 0.0], [0.0, 1.0], [0.0, 0.0, 1.0]]: expected shape (3, 3)",
            "got a ragged nested array",
        ],
    ),
    (
        "scalar_given_vector",
        _set("panels", 0, "mass", [100.0]),
        [f"{P0}.mass = [100.0]: must be a number, got an array"],
    ),
    (
        "pulse_vector_shape",
        _set("loads", "pulses", 0, "extForce_N", [1.0, 2.0, 3.0, 4.0]),
        ["loads.pulses[0].extForce_N = [1.0, 2.0, 3.0, 4.0]: expected shape (3,)", "got shape (4,)"],
    ),
    # non-numeric
    ("string_scalar", _set("panels", 0, "k", "100"), [f'{P0}.k = "100": must be a number, got a string']),
    ("bool_scalar", _set("panels", 1, "c", True), [f"{P1}.c = true: must be a number, got a boolean"]),
    (
        "bool_in_vector",
        _set("hub", "v_CN_NInit", [0.0, False, 0.0]),
        ["hub.v_CN_NInit[2] = false: must be a number, got a boolean"],
    ),
    (
        "string_in_matrix",
        _set("hub", "IHubPntBc_B", [[900.0, 0.0, 0.0], [0.0, "800", 0.0], [0.0, 0.0, 600.0]]),
        ['hub.IHubPntBc_B[2][2] = "800": must be a number, got a string'],
    ),
    (
        "table_as_number",
        _set("gravity", "mu", {"value": 1.0}),
        ["gravity.mu = {value = 1.0}: must be a number, got a table"],
    ),
    (
        "bool_t_end",
        _set("simulation", "t_end", True),
        ["simulation.t_end = true: must be a number, got a boolean"],
    ),
    # unknown keys
    (
        "unknown_top_level",
        _set("hubb", {}),
        [
            "top level: unknown key 'hubb' (did you mean 'hub'?); ",
            "allowed keys: hub, panels, gravity, loads, simulation",
        ],
    ),
    ("unknown_top_level_far", _set("meta", {}), ["top level: unknown key 'meta'; allowed keys: hub, panels"]),
    (
        "unknown_hub_key",
        _set("hub", "mass", 750.0),
        ["hub: unknown key 'mass' (did you mean 'mHub'?); allowed keys: mHub, IHubPntBc_B, r_BcB_B"],
    ),
    (
        "unknown_hub_key_case",
        _set("hub", "r_bcb_b", [0.0, 0.0, 0.0]),
        ["hub: unknown key 'r_bcb_b' (did you mean 'r_BcB_B'?)"],
    ),
    (
        "unknown_panel_key_typo",
        _set("panels", 0, "dampng", 1.0),
        [
            f"{P0}: unknown key 'dampng' (did you mean 'c'?); ",
            "allowed keys: name, mass, IPntS_S, d, k, c, r_HB_B",
        ],
    ),
    (
        "unknown_panel_key_alias",
        _set("panels", 1, "stiffness", 1.0),
        [f"{P1}: unknown key 'stiffness' (did you mean 'k'?)"],
    ),
    (
        "unknown_panel_key_close",
        _set("panels", 1, "thetaInt", 1.0),
        [f"{P1}: unknown key 'thetaInt' (did you mean 'thetaInit'?)"],
    ),
    (
        "unknown_gravity_key",
        _set("gravity", "GM", 1.0),
        ["gravity: unknown key 'GM' (did you mean 'mu'?); allowed keys: mu"],
    ),
    (
        "unknown_loads_key",
        _set("loads", "extForce", [0.0, 0.0, 0.0]),
        ["loads: unknown key 'extForce' (did you mean 'extForce_B'?); allowed keys: extForce_B, extForce_N"],
    ),
    (
        "unknown_pulse_key",
        _set("loads", "pulses", 0, "t_stop", 3.0),
        ["loads.pulses[0]: unknown key 't_stop' (did you mean 't_start'?); allowed keys: t_start, t_end"],
    ),
    (
        "unknown_simulation_key",
        _set("simulation", "log_dt", 0.1),
        [
            "simulation: unknown key 'log_dt' (did you mean 'save_dt'?); ",
            "allowed keys: t_end, save_dt, integrator",
        ],
    ),
    # missing required keys
    ("missing_hub", _pop("hub"), ["top level: missing required key 'hub'"]),
    ("missing_mHub", _pop("hub", "mHub"), ["hub: missing required key 'mHub' (hub mass, kg, > 0)"]),
    (
        "missing_hub_inertia",
        _pop("hub", "IHubPntBc_B"),
        ["hub: missing required key 'IHubPntBc_B' (hub inertia"],
    ),
    (
        "missing_panel_mass",
        _pop("panels", 0, "mass"),
        [f"{P0}: missing required key 'mass' (panel mass, kg, > 0)"],
    ),
    ("missing_panel_inertia", _pop("panels", 0, "IPntS_S"), [f"{P0}: missing required key 'IPntS_S'"]),
    (
        "missing_panel_d",
        _pop("panels", 1, "d"),
        [f"{P1}: missing required key 'd' (hinge H to panel CoM distance"],
    ),
    ("missing_panel_k", _pop("panels", 1, "k"), [f"{P1}: missing required key 'k' (hinge spring stiffness"]),
    ("missing_panel_r_HB_B", _pop("panels", 1, "r_HB_B"), [f"{P1}: missing required key 'r_HB_B'"]),
    ("missing_panel_dcm_HB", _pop("panels", 0, "dcm_HB"), [f"{P0}: missing required key 'dcm_HB'"]),
    (
        "missing_mu",
        _pop("gravity", "mu"),
        ["gravity: missing required key 'mu' (gravitational parameter, m^3/s^2, > 0); omit the [gravity] table "
         "for no gravity"],
    ),
    (
        "missing_pulse_t_end",
        _pop("loads", "pulses", 0, "t_end"),
        ["loads.pulses[0]: missing required key 't_end'"],
    ),
    # simulation settings
    ("t_end_zero", _set("simulation", "t_end", 0.0), ["simulation.t_end = 0.0: must be > 0 (s)"]),
    ("t_end_negative", _set("simulation", "t_end", -2.5), ["simulation.t_end = -2.5: must be > 0 (s)"]),
    ("dt_zero", _set("simulation", "dt", 0.0), ["simulation.dt = 0.0: must be > 0 (s)"]),
    ("dt_negative", _set("simulation", "dt", -0.001), ["simulation.dt = -0.001: must be > 0 (s)"]),
    ("save_dt_zero", _set("simulation", "save_dt", 0), ["simulation.save_dt = 0: must be > 0 (s)"]),
    (
        "rtol_zero",
        _set("simulation", "rtol", 0.0),
        ["simulation.rtol = 0.0: must be > 0 (relative tolerance)"],
    ),
    (
        "atol_negative",
        _set("simulation", "atol", -1e-12),
        ["simulation.atol = -1e-12: must be > 0 (absolute tolerance)"],
    ),
    (
        "integrator_unknown",
        _set("simulation", "integrator", "euler"),
        ['simulation.integrator = "euler": must be one of "rk4", "tsit5", "dopri8"'],
    ),
    (
        "integrator_case",
        _set("simulation", "integrator", "RK4"),
        ['simulation.integrator = "RK4": must be one of'],
    ),
    (
        "integrator_not_string",
        _set("simulation", "integrator", 4),
        ["simulation.integrator = 4: must be one of"],
    ),
    (
        "rk4_save_dt_not_multiple",
        _set("simulation", "save_dt", 0.0015),
        [
            'simulation.save_dt = 0.0015: must be a whole multiple of dt = 0.001 with integrator "rk4"',
            "Basilisk samples at task ticks",
        ],
    ),
    (
        "rk4_save_dt_below_dt",
        _set("simulation", "save_dt", 0.0004),
        ["simulation.save_dt = 0.0004: must be a whole multiple of dt = 0.001"],
    ),
    (
        "rk4_t_end_not_multiple",
        _set("simulation", "t_end", 2.5005),
        ['simulation.t_end = 2.5005: must be a whole multiple of dt = 0.001 with integrator "rk4"'],
    ),
    (
        "dt_beyond_t_end",
        _set("simulation", "dt", 5.0),
        ["simulation.dt = 5.0: must be <= t_end = 2.5 s"],
    ),
    (
        "save_dt_beyond_t_end",
        _set("simulation", "save_dt", 3.0),
        ["simulation.save_dt = 3.0: must be <= t_end = 2.5 s (outputs are sampled at k * save_dt up to t_end)"],
    ),
    (
        "max_steps_float",
        _set("simulation", "max_steps", 1.5),
        ["simulation.max_steps = 1.5: must be an integer > 0"],
    ),
    (
        "max_steps_bool",
        _set("simulation", "max_steps", True),
        ["simulation.max_steps = true: must be an integer > 0"],
    ),
    (
        "max_steps_zero",
        _set("simulation", "max_steps", 0),
        ["simulation.max_steps = 0: must be an integer > 0"],
    ),
    # gravity
    (
        "mu_zero",
        _set("gravity", "mu", 0.0),
        ["gravity.mu = 0.0: must be > 0 (m^3/s^2); omit the [gravity] table for no gravity"],
    ),
    ("mu_negative", _set("gravity", "mu", -3.986004415e14), ["gravity.mu = -398600441500000.0: must be > 0"]),
    # pulses
    (
        "pulse_reversed",
        _set("loads", "pulses", 0, "t_end", 0.0),
        ["loads.pulses[0].t_end = 0.0: must be > t_start = 0.0 (s)"],
    ),
    (
        "pulse_end_before_start",
        _do(_set("loads", "pulses", 0, "t_start", 3.0), _set("loads", "pulses", 0, "t_end", 2.0)),
        ["loads.pulses[0].t_end = 2.0: must be > t_start = 3.0 (s)"],
    ),
    (
        "pulse_after_the_run",  # issue 14 item 16: it would never act
        _do(_set("loads", "pulses", 0, "t_start", 2.5), _set("loads", "pulses", 0, "t_end", 3.0)),
        [("loads.pulses[0].t_start = 2.5: must be < simulation.t_end = 2.5 s: a pulse that starts when the run has "
          "ended never acts")],
    ),
    (
        "pulse_negative_start",
        _set("loads", "pulses", 0, "t_start", -1.0),
        ["loads.pulses[0].t_start = -1.0: must be >= 0 (s; the run starts at t = 0)"],
    ),
    # names
    (
        "duplicate_names",
        _set("panels", 1, "name", "p0"),
        [
            'panels[1].name = "p0": duplicate panel name, already used by panels[0]; ',
            "panel names must be unique",
        ],
    ),
    (
        "duplicate_default_name",
        _do(_set("panels", 0, "name", "p1"), _pop("panels", 1, "name")),
        ['panels[1].name = "p1": duplicate panel name (the default name), already used by panels[0]'],
    ),
    (
        "name_empty",
        _set("panels", 0, "name", ""),
        ['panels[0].name = "": must be a non-empty string matching [A-Za-z_][A-Za-z0-9_]*'],
    ),
    (
        "name_bad_chars",
        _set("panels", 1, "name", "solar array"),
        ['panels[1].name = "solar array": must be a non-empty string matching'],
    ),
    (
        "name_leading_digit",
        _set("panels", 1, "name", "1wing"),
        ['panels[1].name = "1wing": must be a non-empty string'],
    ),
    ("name_newline_stays_one_line", _set("panels", 1, "name", "a\nb"), ['panels[1].name = "a\\nb": must be']),
    (
        "name_not_string",
        _set("panels", 0, "name", 3),
        ["panels[0].name = 3: must be a non-empty string", "got a number"],
    ),
    # table structure
    ("hub_not_table", _set("hub", 750.0), ["hub = 750.0: must be a table ([hub]), got a number"]),
    (
        "panels_single_table",
        _set("panels", {"mass": 1.0}),
        ["panels = {mass = 1.0}: must be an array of tables ([[panels]] in TOML), got a table"],
    ),
    ("panel_not_table", _set("panels", 1, 5), ["panels[1] = 5: must be a table ([[panels]]), got a number"]),
    (
        "pulses_not_array",
        _set("loads", "pulses", {"t_start": 0.0}),
        ["loads.pulses = {t_start = 0.0}: must be an array of tables ([[loads.pulses]] in TOML)"],
    ),
    (
        "simulation_not_table",
        _set("simulation", "rk4"),
        ['simulation = "rk4": must be a table ([simulation])'],
    ),
]


def test_bad_cases_are_distinct():
    assert len({case[0] for case in BAD_CASES}) == len(BAD_CASES)


@pytest.mark.parametrize("edit, fragments", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_invalid_input_refused(edit, fragments, unchecked_types):  # some edits break the annotations on purpose
    data = base()
    edit(data)
    pattern = "^my.toml: " + ".*".join(re.escape(f) for f in fragments)
    with pytest.raises(ScenarioError, match=pattern) as info:
        scenario_from_dict(data, source="my.toml")
    message = str(info.value)
    assert "\n" not in message
    assert info.value.source == "my.toml"


def test_not_a_table(unchecked_types):
    with pytest.raises(ScenarioError, match=r"^<dict>: a scenario must be a table \(dict\), got an array$"):
        scenario_from_dict([1, 2])  # type: ignore[arg-type]


def test_error_is_value_error_with_field():
    data = base()
    data["panels"][1]["dcm_HB"] = REFLECT
    with pytest.raises(ValueError) as info:
        scenario_from_dict(data)
    assert isinstance(info.value, ScenarioError)
    assert info.value.field == f"{P1}.dcm_HB"


def test_first_error_wins_before_building():
    # Everything is validated before any array is built; the first problem in file order is reported.
    data = base()
    data["hub"]["mHub"] = -1.0
    data["panels"][0]["mass"] = -1.0
    with pytest.raises(ScenarioError, match=r"hub\.mHub = -1\.0"):
        scenario_from_dict(data)


# ---------------------------------------------------------------------------------------------------------
# (d) Files: TOML syntax errors, nan literals, unreadable files
# ---------------------------------------------------------------------------------------------------------


def test_toml_syntax_error_names_file_and_line():
    path = BAD / "bad_syntax.toml"
    with pytest.raises(ScenarioError, match=re.escape(f"{path}:5:1: TOML syntax error: ")) as info:
        load_scenario(path)
    assert "\n" not in str(info.value)


def test_toml_syntax_error_at_end_of_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[hub]\nmHub = 750.0\nIHubPntBc_B = [[1.0, 0.0, 0.0],\n")
    pattern = re.escape(f"{path}:3: TOML syntax error: ") + r".+ \(at end of file\)$"
    with pytest.raises(ScenarioError, match=pattern):
        load_scenario(path)


def test_toml_duplicate_table(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[hub]\nmHub = 750.0\n\n[hub]\n")
    with pytest.raises(ScenarioError, match=re.escape(f"{path}:4:") + ".*TOML syntax error"):
        load_scenario(path)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError, match=re.escape(f"{path}: cannot read scenario file")):
        load_scenario(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b"[hub]\nmHub = \xff\n")
    with pytest.raises(ScenarioError, match=re.escape(f"{path}: not a UTF-8 text file")):
        load_scenario(path)


BAD_FILES = [
    ("bad_mass.toml", 'panels[0] ("p0").mass = -1.0: must be > 0 (kg)'),
    ("unknown_key.toml", "panels[0] (\"p0\"): unknown key 'damping' (did you mean 'c'?); allowed keys: "),
    (
        "bad_dcm.toml",
        'panels[0] ("p0").dcm_HB = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]: determinant',
    ),
    (
        "rk4_save_dt.toml",
        'simulation.save_dt = 0.015: must be a whole multiple of dt = 0.01 with integrator "rk4"',
    ),
    ("nan_value.toml", "hub.omega_BN_BInit[2] = nan: must be a finite number"),
    ("bad_syntax.toml", ":5:1: TOML syntax error: "),
]


@pytest.mark.parametrize("name, fragment", BAD_FILES)
def test_bad_fixture_files(name, fragment):
    path = BAD / name
    sep = "" if fragment.startswith(":") else ": "
    with pytest.raises(ScenarioError, match="^" + re.escape(f"{path}{sep}{fragment}")):
        load_scenario(path)


# ---------------------------------------------------------------------------------------------------------
# (e) The CLI's error contract: `jaxhinge simulate BAD.toml --out traj.npz` prints one line
#     "jaxhinge: error: <ScenarioError message>" to stderr, exits 2, no traceback, no output file (in-process;
#     the exit status of the process itself: tests/test_cli.py).
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["bad_mass.toml", "unknown_key.toml", "bad_dcm.toml", "rk4_save_dt.toml", "bad_syntax.toml"]
)
def test_cli_reports_scenario_errors(tmp_path, capsys, name):
    from jaxhinge._cli import main

    path = BAD / name
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    out = tmp_path / "traj.npz"
    rc = main(["simulate", str(path), "--out", str(out)])
    stdout, stderr = capsys.readouterr()
    assert rc == 2, stderr
    assert stderr.splitlines() == [f"jaxhinge: error: {info.value}"], stderr
    assert "Traceback" not in stderr + stdout
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_float64_refused_clearly_when_off():
    """Issue 14 item 2: in a fresh interpreter that never asked for float64 (JAX's default is float32: 8.5e-7
    against Basilisk's truth instead of ~1e-13), importing jaxhinge changes no global setting (CONVENTIONS 10) and
    building a model is refused with a message naming `jax_enable_x64`; with it on, every leaf is float64."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import jax
        import jaxhinge as jh
        print("X64_AFTER_IMPORT", jax.config.jax_enable_x64)
        try:
            jh.load_scenario(jh.example_path("two_panel.toml"))
        except ValueError as e:
            print("REFUSED", e)
        jax.config.update("jax_enable_x64", True)
        s = jh.load_scenario(jh.example_path("two_panel.toml"))
        leaves = jax.tree.leaves(s)
        print("DTYPES", sorted({str(x.dtype) for x in leaves if hasattr(x, "dtype") and x.dtype.kind == "f"}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "X64_AFTER_IMPORT False" in r.stdout, r.stdout
    refused = r.stdout.split("REFUSED", 1)[1].split("DTYPES")[0]
    assert "jax_enable_x64 is off" in refused and "float64" in refused, refused
    assert "DTYPES ['float64']" in r.stdout, r.stdout
