"""The schema (`jaxhinge/_model/_schema.py`): every field declared once, and what reads it - the model pytrees, the
file checker, builder and writer, the parameter registry, the rules and the docs table - follows a declaration
with no other edit (a hypothetical field declared in a copy of the package)."""

import ast
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._model import _schema

jax.config.update("jax_enable_x64", True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_docs_field_table_is_the_schema():
    """docs/parameters.md holds the table `markdown_table()` makes from the schema (regenerate it with
    `python -m jaxhinge._model._schema`)."""
    text = pathlib.Path(ROOT, "docs", "parameters.md").read_text()
    m = re.search(r"<!-- fields:begin[^\n]*-->\n(.*?)<!-- fields:end -->", text, re.DOTALL)
    assert m, "docs/parameters.md lacks the <!-- fields:begin/end --> markers"
    assert m.group(1) == _schema.markdown_table()


# The model pytrees' leaves, written out here (not read from the schema) from the names of Basilisk's modules
# (HubEffector, hingedRigidBodyStateEffector and the chain effectors, reactionWheelStateEffector, mrpFeedback,
# rwMotorTorque, gravityEffector) as docs/scenario-files.md lists them, in the constructors' argument order; then the
# static labels each pytree carries besides. A field renamed, dropped or added in the schema fails here.
LEAVES = {
    "hub": ["mHub", "IHubPntBc_B", "r_BcB_B"],
    "panels": ["mass", "IPntS_S", "d", "k", "c", "r_HB_B", "dcm_HB", "thetaRef", "thetaDotRef", "motorTorque", "l"],
    "wheels": ["gsHat_B", "Js", "u", "u_max", "cViscous", "fCoulomb", "omegaLimitCycle"],
    "initial": ["r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit", "thetaInit", "thetaDotInit", "OmegaInit"],
    "control": ["sigma_R0N", "K", "P", "Ki", "integralLimit", "ISCPntB_B", "knownTorquePntB_B", "controlAxes_B",
                "control_dt", "actuator"],
    "gravity": ["mu"],
}
LABELS = {"panels": {"parent", "names", "chain"}, "wheels": {"names"}}


@pytest.mark.parametrize("cls, model", [(jh.Hub, "hub"), (jh.Panels, "panels"), (jh.Wheels, "wheels"),
                                        (jh.InitialState, "initial"), (jh.Control, "control"),
                                        (jh.PointMassGravity, "gravity")])
def test_model_leaves_are_the_documented_fields(cls, model):
    """Each model pytree's fields are the Basilisk-named fields listed above, in order, then its static labels; the
    schema declares the same (so the pytree follows the schema, and both follow Basilisk's names)."""
    names = [f.name for f in dataclasses.fields(cls)]
    n = len(LEAVES[model])
    assert names[:n] == LEAVES[model]
    assert set(names[n:]) == LABELS.get(model, set())
    assert [f.attribute for f in _schema.of_model(model)] == LEAVES[model]


def test_a_basilisk_scenario_file_lands_in_the_leaves_of_its_names():
    """The Basilisk reference wheel slew (tests/data/bsk/wheels_slew_record.toml, the file Basilisk ran), read here
    with tomllib: every hub, panel and wheel value of the file is the model leaf of the same name (panels and wheels
    stacked in file order), so the builder puts each field where its name says."""
    import tomllib

    path = os.path.join(ROOT, "tests", "data", "bsk", "wheels_slew_record.toml")
    with open(path, "rb") as f:
        d = tomllib.load(f)
    s = jh.load_scenario(path)
    hub, panels, wheels = s.spacecraft.hub, s.spacecraft.panels, s.spacecraft.wheels
    for name in ("mHub", "IHubPntBc_B", "r_BcB_B"):
        np.testing.assert_array_equal(np.asarray(getattr(hub, name)), np.asarray(d["hub"][name]), err_msg=name)
    np.testing.assert_array_equal(np.asarray(s.initial.omega_BN_BInit), d["hub"]["omega_BN_BInit"])
    for name in ("mass", "IPntS_S", "d", "k", "c", "r_HB_B", "dcm_HB"):
        np.testing.assert_array_equal(np.asarray(getattr(panels, name)), np.asarray([p[name] for p in d["panels"]]),
                                      err_msg=name)
    for name in ("thetaInit", "thetaDotInit"):
        np.testing.assert_array_equal(np.asarray(getattr(s.initial, name)), [p[name] for p in d["panels"]])
    assert panels.names == tuple(p["name"] for p in d["panels"])
    for name in ("gsHat_B", "Js", "u_max"):
        np.testing.assert_array_equal(np.asarray(getattr(wheels, name)), np.asarray([w[name] for w in d["wheels"]]),
                                      err_msg=name)
    np.testing.assert_array_equal(np.asarray(s.initial.OmegaInit), [w["Omega"] for w in d["wheels"]])
    assert wheels.names == tuple(w["name"] for w in d["wheels"])


# The fitted fields (docs/parameters.md, "fitted as"), written out here: (owner, field).
FITTED = {
    ("hub", "mHub"), ("hub", "IHubPntBc_B"), ("hub", "r_BcB_B"), ("hub", "r_CN_NInit"), ("hub", "v_CN_NInit"),
    ("hub", "sigma_BNInit"), ("hub", "omega_BN_BInit"),
    ("panel", "mass"), ("panel", "IPntS_S"), ("panel", "d"), ("panel", "k"), ("panel", "c"), ("panel", "l"),
    ("panel", "r_HB_B"), ("panel", "dcm_HB"), ("panel", "thetaInit"), ("panel", "thetaDotInit"),
    ("panel", "thetaRef"), ("panel", "thetaDotRef"), ("panel", "motorTorque"),
    ("wheel", "Js"), ("wheel", "Omega"), ("wheel", "u"), ("wheel", "u_max"), ("wheel", "cViscous"),
    ("wheel", "fCoulomb"),
    ("control", "sigma_R0N"), ("control", "K"), ("control", "P"), ("control", "Ki"), ("control", "integralLimit"),
    ("control", "ISCPntB_B"), ("control", "knownTorquePntB_B"), ("control", "control_dt"),
    ("record", "time_offset"), ("sensor", "bias"), ("sensor", "scale"),
}


def test_registry_is_the_schema():
    """The parameter registry holds exactly the fitted fields listed above, as does the schema (the recorded
    inputs' apart); a registered name writes its value into the model leaf of that name and no other (the Basilisk
    wheel slew, three names of three owners); its value rules: `k` (>= 0) is fitted in log, `mass` must be > 0,
    `thetaRef` is linear and unbounded."""
    fitted = {(f.owner, f.name) for f in _schema.SCHEMA if f.fit is not None and f.owner != "input"}
    registry = {(f.owner, f.name) for f in jh.FIELDS.values()}
    # (the recorded inputs' time_offset shares its name with the telemetry record's: it is in INPUT_FIELDS)
    assert registry == FITTED
    assert fitted == FITTED
    s = jh.load_scenario(os.path.join(ROOT, "tests", "data", "bsk", "wheels_slew_record.toml"))
    s2 = jh.apply_parameters(s, {"wing_mY.k": 123.0, "rw3.Js": 0.25, "hub.mHub": 999.0})
    k, js = np.asarray(s.spacecraft.panels.k).copy(), np.asarray(s.spacecraft.wheels.Js).copy()
    k[1], js[2] = 123.0, 0.25
    np.testing.assert_array_equal(np.asarray(s2.spacecraft.panels.k), k)
    np.testing.assert_array_equal(np.asarray(s2.spacecraft.wheels.Js), js)
    assert float(s2.spacecraft.hub.mHub) == 999.0
    for name in ("c", "mass", "d"):  # the others untouched
        np.testing.assert_array_equal(np.asarray(getattr(s2.spacecraft.panels, name)),
                                      np.asarray(getattr(s.spacecraft.panels, name)))
    assert jh.FIELDS["k"].positive and jh.FIELDS["k"].allowed() == "must be >= 0"
    assert jh.FIELDS["mass"].allowed() == "must be > 0" and not jh.FIELDS["mass"].admits(0.0)
    assert not jh.FIELDS["thetaRef"].positive and jh.FIELDS["thetaRef"].allowed() == "any finite value"


def _literal_modules(name: str) -> set[str]:
    out = set()
    for path in sorted(p for p in _package_files()):
        for node in ast.walk(ast.parse(pathlib.Path(path).read_text())):
            if isinstance(node, ast.Constant) and node.value == name:
                out.add(os.path.relpath(path, ROOT))
    return out


def _package_files():
    for folder, _, files in os.walk(os.path.join(ROOT, "jaxhinge")):
        yield from (os.path.join(folder, f) for f in files if f.endswith(".py"))


def test_field_names_are_written_in_few_modules():
    """The fields named in issue 37 appear as a string literal in at most 2 package modules each on average (the
    schema, and at most a cross-field rule): the code reads the declaration, not the name (it was 3.9)."""
    names = ("thetaInit", "r_HB_B", "dcm_HB", "IPntS_S", "mHub", "gsHat_B", "Js", "cViscous", "integralLimit",
             "controlAxes_B", "omega_BN_BInit", "sigma_BNInit")
    counts = {n: _literal_modules(n) for n in names}
    assert all("jaxhinge/_model/_schema.py" in c for c in counts.values())
    assert np.mean([len(c) for c in counts.values()]) <= 2.0, counts


_NEW_FIELD = """    _f("zetaDamp", "panel", (), "N m s/rad", "hypothetical extra hinge damping", rule="nonnegative", tables=_P,
       model="panels", fit="log", scale=1.0),
"""

_SCRIPT = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import jaxhinge as jh
    from jaxhinge._model import _schema
    assert jh.__file__.startswith(__import__("sys").argv[1]), jh.__file__
    data = jh.scenario_to_dict(jh.load_scenario(jh.example_path("two_panel")))
    data["panels"][0]["zetaDamp"] = 0.25
    data["chains"] = [{"name": "w", "r_HB_B": [0.0, 1.0, 0.0], "dcm_HB": np.eye(3).tolist(), "panels": [
        {"mass": 10.0, "IPntS_S": np.diag([1.0, 2.0, 2.5]).tolist(), "d": 0.5, "l": 1.0, "k": 10.0, "zetaDamp": 1.5},
        {"mass": 10.0, "IPntS_S": np.diag([1.0, 2.0, 2.5]).tolist(), "d": 0.5, "k": 10.0}]}]
    s = jh.scenario_from_dict(data)  # checked in files, built
    assert np.array_equal(np.asarray(s.spacecraft.panels.zetaDamp), [0.25, 0.0, 1.5, 0.0])
    back = jh.scenario_to_dict(s)  # written back
    assert back["panels"][0]["zetaDamp"] == 0.25 and back["chains"][0]["panels"][0]["zetaDamp"] == 1.5
    assert np.array_equal(np.asarray(jh.scenario_from_dict(back).spacecraft.panels.zetaDamp),
                          np.asarray(s.spacecraft.panels.zetaDamp))
    assert "p0.zetaDamp" in jh.parameter_names(s) and jh.FIELDS["zetaDamp"].positive  # in the registry
    s2 = jh.apply_parameters(s, {"w_1.zetaDamp": 3.0})
    assert float(s2.spacecraft.panels.zetaDamp[2]) == 3.0
    data["panels"][1]["zetaDamp"] = -1.0
    try:
        jh.scenario_from_dict(data, source="my.toml")
    except jh.ScenarioError as e:  # its rule, by field, value and rule
        assert str(e) == 'my.toml: panels[1] ("p1").zetaDamp = -1.0: must be >= 0 (N m s/rad)', str(e)
    else:
        raise AssertionError("a negative zetaDamp was accepted")
    try:
        jh.Panels(**{**{f.name: getattr(s.spacecraft.panels, f.name) for f in _schema.of_model("panels")},
                     "zetaDamp": np.array([0.0, -2.0, 0.0, 0.0])}, parent=s.spacecraft.panels.parent)
    except jh.ScenarioError as e:  # and in code
        assert "p1.zetaDamp = -2.0: must be >= 0" in str(e), str(e)
    else:
        raise AssertionError("a negative zetaDamp was accepted in code")
    row = [r for r in _schema.markdown_table().splitlines() if r.startswith("| `zetaDamp` ")]
    assert row == ["| `zetaDamp` | panel | scalar | N m s/rad | 0 | >= 0 | log-ratio | `[[panels]]`, "
                   "`[[chains.panels]]` | `zetaDamp` |"], row  # in the docs table
    print("ok")
''')


def test_a_new_field_is_one_declaration(tmp_path):
    """Must-show of issue 37: a scalar panel field declared in a copy of the schema (and nowhere else) is checked
    in files and in code, built into `Panels`, written back, in the registry and in the docs table."""
    pkg = tmp_path / "jaxhinge"
    shutil.copytree(os.path.join(ROOT, "jaxhinge"), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    schema = pkg / "_model" / "_schema.py"
    text = schema.read_text()
    anchor = "    # -- reaction wheels"
    assert anchor in text
    schema.write_text(text.replace(anchor, _NEW_FIELD + anchor, 1))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, "-c", _SCRIPT, str(pkg)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300, check=False)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
