"""Bad values in a scenario's `[[wheels]]`, `[control]` and `[inputs]` tables: every key, each kind of bad value
(wrong type, NaN or inf, out of range, wrong shape, unknown key, missing required key, a value the other tables
contradict) is refused with a one-line `ScenarioError` naming the field and the rule, before anything is built or
compiled (a JAX compile listener counts no compilation). Each case goes through both entry points: the table as a
dict (`jh.scenario_from_dict`) and written as a TOML file (`jh.load_scenario`).

The messages are matched on their essential parts only, the field's path and a keyword of its rule, not on whole
strings; a wheel is named by its name, `("rw1").Js`, not by its index. The valid tables the cases start from load
(`test_the_valid_tables_load`), so each refusal is the bad value's."""

import copy
import math
import re

import jax
import pytest
import tomli_w

import jaxhinge as jh

_COMPILING = {"on": False, "count": 0}


def _count_compiles(event, *args, **kwargs):
    if _COMPILING["on"] and event.endswith("backend_compile_duration"):
        _COMPILING["count"] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compiles)

MISSING = object()  # the key removed
CSV = "t,u_rw1,extTorquePntB_B_1\n0.0,0.01,0.0\n1.0,-0.02,0.1\n2.0,0.0,0.0\n"


def _base(kind: str) -> dict:
    """A hub, one panel "p0" and three orthogonal wheels rw1..rw3 (a 2 s rk4 run at 10 ms), with the controller
    ("control"), the recorded inputs in.csv ("inputs"), or both ("both": valid only without u_ columns)."""
    d = {"hub": {"mHub": 500.0, "IHubPntBc_B": [[400.0, 0.0, 0.0], [0.0, 300.0, 0.0], [0.0, 0.0, 200.0]]},
         "panels": [{"name": "p0", "mass": 20.0, "IPntS_S": [[5.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 3.0]],
                     "d": 1.0, "k": 50.0, "c": 1.0, "r_HB_B": [0.0, 0.5, 0.0],
                     "dcm_HB": [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]}],
         "wheels": [{"name": f"rw{i + 1}", "gsHat_B": [float(i == j) for j in range(3)], "Js": 0.1,
                     "Omega": 100.0 * (i + 1)} for i in range(3)],
         "simulation": {"t_end": 2.0, "save_dt": 0.1, "integrator": "rk4", "dt": 0.01}}
    if kind in ("control", "both"):
        d["control"] = {"K": 10.0, "P": 60.0, "control_dt": 0.1}
    if kind in ("inputs", "both"):
        d["inputs"] = {"csv": "in.csv", "hold": "zoh"}
    return d


def _set(d: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        d = d[key]
    if value is MISSING:
        del d[path[-1]]
    else:
        d[path[-1]] = value


W = ("wheels", 0)
RW1 = '("rw1")'
NAN, INF = math.nan, math.inf
FINITE, NUMBER, SHAPE = r"finite", r"must be a number", r"shape"
NAME = re.compile(r"wheels\[\d+\]\.name")  # a wheel whose name is refused is named by its place

# (base, edits {path: value}, field (the message's text, or a pattern), rule (a pattern))
WHEELS = [
    ("control", {W + ("name",): 5}, NAME, r"string"),
    ("control", {W + ("name",): ""}, NAME, r"non-empty"),
    ("control", {W + ("name",): "rw 1"}, NAME, r"\[A-Za-z_\]"),
    ("control", {W + ("name",): "rw2"}, NAME, r"duplicate"),
    ("control", {W + ("name",): "p0"}, NAME, r"already the name of panels"),
    ("control", {W + ("gsHat_B",): [1.0, 0.0]}, f"{RW1}.gsHat_B", SHAPE),
    ("control", {W + ("gsHat_B",): "b1"}, f"{RW1}.gsHat_B", SHAPE),
    ("control", {W + ("gsHat_B",): [1.0, 0.1, 0.0]}, f"{RW1}.gsHat_B", r"unit vector"),
    ("control", {W + ("gsHat_B",): [0.0, 0.0, 0.0]}, f"{RW1}.gsHat_B", r"unit vector"),
    ("control", {W + ("gsHat_B",): [NAN, 0.0, 0.0]}, f"{RW1}.gsHat_B", FINITE),
    ("control", {W + ("gsHat_B",): [INF, 0.0, 0.0]}, f"{RW1}.gsHat_B", FINITE),
    ("control", {W + ("gsHat_B",): MISSING}, RW1, r"missing required key 'gsHat_B'"),
    ("control", {W + ("Js",): -1.0}, f"{RW1}.Js", r"> 0"),
    ("control", {W + ("Js",): 0.0}, f"{RW1}.Js", r"> 0"),
    ("control", {W + ("Js",): NAN}, f"{RW1}.Js", FINITE),
    ("control", {W + ("Js",): INF}, f"{RW1}.Js", FINITE),
    ("control", {W + ("Js",): "0.1"}, f"{RW1}.Js", NUMBER),
    ("control", {W + ("Js",): [0.1]}, f"{RW1}.Js", NUMBER),
    ("control", {W + ("Js",): True}, f"{RW1}.Js", NUMBER),
    ("control", {W + ("Js",): MISSING}, RW1, r"missing required key 'Js'"),
    ("control", {W + ("Omega",): NAN}, f"{RW1}.Omega", FINITE),
    ("control", {W + ("Omega",): -INF}, f"{RW1}.Omega", FINITE),
    ("control", {W + ("Omega",): "100"}, f"{RW1}.Omega", NUMBER),
    ("control", {W + ("Omega",): [100.0]}, f"{RW1}.Omega", NUMBER),
    ("control", {W + ("u",): NAN}, f"{RW1}.u", FINITE),
    ("control", {W + ("u",): -INF}, f"{RW1}.u", FINITE),
    ("control", {W + ("u",): "x"}, f"{RW1}.u", NUMBER),
    ("control", {W + ("u_max",): NAN}, f"{RW1}.u_max", FINITE),
    ("control", {W + ("u_max",): INF}, f"{RW1}.u_max", FINITE),
    ("control", {W + ("u_max",): "x"}, f"{RW1}.u_max", NUMBER),
    ("control", {W + ("cViscous",): -1e-3}, f"{RW1}.cViscous", r">= 0"),
    ("control", {W + ("cViscous",): NAN}, f"{RW1}.cViscous", FINITE),
    ("control", {W + ("cViscous",): "x"}, f"{RW1}.cViscous", NUMBER),
    ("control", {W + ("fCoulomb",): -1e-3}, f"{RW1}.fCoulomb", r">= 0"),
    ("control", {W + ("fCoulomb",): INF}, f"{RW1}.fCoulomb", FINITE),
    ("control", {W + ("fCoulomb",): [0.0]}, f"{RW1}.fCoulomb", NUMBER),
    ("control", {W + ("spin",): 1.0}, RW1, r"unknown key 'spin'"),
    ("control", {W + ("axis",): [1.0, 0.0, 0.0]}, RW1, r"unknown key 'axis'.*did you mean 'gsHat_B'"),
    ("control", {("wheels",): {"name": "rw1"}}, "wheels", r"array of tables"),
    ("control", {("wheels", 1): 5}, re.compile(r"wheels\[\d+\]"), r"must be a table"),
]

C = ("control",)
CONTROL = [
    ("control", {C + ("sigma_R0N",): [0.0, 0.0]}, "control.sigma_R0N", SHAPE),
    ("control", {C + ("sigma_R0N",): "x"}, "control.sigma_R0N", SHAPE),
    ("control", {C + ("sigma_R0N",): [NAN, 0.0, 0.0]}, "control.sigma_R0N", FINITE),
    ("control", {C + ("K",): -1.0}, "control.K", r">= 0"),
    ("control", {C + ("K",): NAN}, "control.K", FINITE),
    ("control", {C + ("K",): INF}, "control.K", FINITE),
    ("control", {C + ("K",): "10"}, "control.K", NUMBER),
    ("control", {C + ("K",): MISSING}, "control", r"missing required key 'K'"),
    ("control", {C + ("P",): -2.0}, "control.P", r">= 0"),
    ("control", {C + ("P",): NAN}, "control.P", FINITE),
    ("control", {C + ("P",): [60.0]}, "control.P", NUMBER),
    ("control", {C + ("P",): MISSING}, "control", r"missing required key 'P'"),
    ("control", {C + ("Ki",): NAN}, "control.Ki", FINITE),
    ("control", {C + ("Ki",): INF}, "control.Ki", FINITE),
    ("control", {C + ("Ki",): "x"}, "control.Ki", NUMBER),
    ("control", {C + ("integralLimit",): -1.0}, "control.integralLimit", r">= 0"),
    ("control", {C + ("integralLimit",): NAN}, "control.integralLimit", FINITE),
    ("control", {C + ("integralLimit",): "x"}, "control.integralLimit", NUMBER),
    ("control", {C + ("control_dt",): 0.0}, "control.control_dt", r"> 0"),
    ("control", {C + ("control_dt",): -0.1}, "control.control_dt", r"> 0"),
    ("control", {C + ("control_dt",): NAN}, "control.control_dt", FINITE),
    ("control", {C + ("control_dt",): "0.1"}, "control.control_dt", NUMBER),
    ("control", {C + ("control_dt",): 0.015}, "control.control_dt", r"whole multiple of simulation\.dt"),
    ("control", {C + ("control_dt",): 2.5, ("simulation", "integrator"): "tsit5"}, "control.control_dt",
     r"<= simulation\.t_end"),
    ("control", {C + ("control_dt",): MISSING}, "control", r"missing required key 'control_dt'"),
    ("control", {C + ("actuator",): "thrusters"}, "control.actuator", r"allowed values.*\"wheels\""),
    ("control", {C + ("actuator",): "Wheels"}, "control.actuator", r"allowed values"),
    ("control", {C + ("actuator",): 3}, "control.actuator", r"allowed values"),
    ("control", {("wheels",): MISSING}, "control.actuator", r"no \[\[wheels\]\]"),
    ("control", {C + ("controlAxes_B",): [[0.0, 0.0, 0.0]]}, "control.controlAxes_B", r"must not be zero"),
    ("control", {C + ("controlAxes_B",): [[1.0, 0.0]]}, "control.controlAxes_B", SHAPE),
    ("control", {C + ("controlAxes_B",): [1.0, 0.0, 0.0]}, "control.controlAxes_B", SHAPE),
    ("control", {C + ("controlAxes_B",): []}, "control.controlAxes_B", r"1 to 3"),
    ("control", {C + ("controlAxes_B",): [[1.0, 0.0, 0.0]] * 4}, "control.controlAxes_B", r"1 to 3"),
    ("control", {C + ("controlAxes_B",): "b1"}, "control.controlAxes_B", r"1 to 3|shape"),
    ("control", {C + ("controlAxes_B",): [[NAN, 0.0, 0.0]]}, "control.controlAxes_B", FINITE),
    ("control", {("wheels", 1): MISSING, ("wheels", 0, "gsHat_B"): [0.0, 0.0, 1.0]}, "control.controlAxes_B",
     r"do not span"),
    ("control", {C + ("ISCPntB_B",): [[400.0, 0.0, 0.0], [0.0, 300.0, 0.0]]}, "control.ISCPntB_B", SHAPE),
    ("control", {C + ("ISCPntB_B",): 400.0}, "control.ISCPntB_B", SHAPE),
    ("control", {C + ("ISCPntB_B",): [[400.0, 5.0, 0.0], [0.0, 300.0, 0.0], [0.0, 0.0, 200.0]]}, "control.ISCPntB_B",
     r"symmetric"),
    ("control", {C + ("ISCPntB_B",): [[-400.0, 0.0, 0.0], [0.0, 300.0, 0.0], [0.0, 0.0, 200.0]]},
     "control.ISCPntB_B", r"positive.definite"),
    ("control", {C + ("ISCPntB_B",): [[NAN, 0.0, 0.0], [0.0, 300.0, 0.0], [0.0, 0.0, 200.0]]}, "control.ISCPntB_B",
     FINITE),
    ("control", {C + ("ISCPntB_B",): [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 5.0]]}, "control.ISCPntB_B",
     r"not a rigid body's"),
    ("control", {C + ("knownTorquePntB_B",): [0.0, 0.0]}, "control.knownTorquePntB_B", SHAPE),
    ("control", {C + ("knownTorquePntB_B",): "x"}, "control.knownTorquePntB_B", SHAPE),
    ("control", {C + ("knownTorquePntB_B",): [INF, 0.0, 0.0]}, "control.knownTorquePntB_B", FINITE),
    ("control", {C + ("Kp",): 1.0}, "control", r"unknown key 'Kp'.*did you mean 'P'"),
    ("control", {C: 5}, "control", r"must be a table"),
    ("both", {}, "control.actuator", r"recorded wheel commands"),  # u_rw1 in [inputs] and the wheels controlled
]

IN = ("inputs",)
INPUTS = [
    ("inputs", {IN + ("csv",): 5}, "inputs.csv", r"file name"),
    ("inputs", {IN + ("csv",): ""}, "inputs.csv", r"file name"),
    ("inputs", {IN + ("csv",): MISSING}, "inputs", r"missing required key 'csv'"),
    ("inputs", {IN + ("csv",): "none.csv"}, "inputs.csv", r"no such file"),
    ("inputs", {IN + ("hold",): "cubic"}, "inputs.hold", r"allowed values.*\"zoh\""),
    ("inputs", {IN + ("hold",): "ZOH"}, "inputs.hold", r"allowed values"),
    ("inputs", {IN + ("hold",): 1}, "inputs.hold", r"allowed values"),
    ("inputs", {IN + ("gain",): 2.0}, "inputs.gain", r"must be a table"),
    ("inputs", {IN + ("gain",): {"u_rw9": 2.0}}, "inputs.gain.u_rw9", r"not a column.*did you mean 'u_rw1'"),
    ("inputs", {IN + ("gain",): {"u_rw1": NAN}}, "inputs.gain.u_rw1", FINITE),
    ("inputs", {IN + ("gain",): {"u_rw1": INF}}, "inputs.gain.u_rw1", FINITE),
    ("inputs", {IN + ("gain",): {"u_rw1": "x"}}, "inputs.gain.u_rw1", NUMBER),
    ("inputs", {IN + ("time_offset",): NAN}, "inputs.time_offset", FINITE),
    ("inputs", {IN + ("time_offset",): INF}, "inputs.time_offset", FINITE),
    ("inputs", {IN + ("time_offset",): "x"}, "inputs.time_offset", NUMBER),
    ("inputs", {IN + ("time_offset",): [0.1]}, "inputs.time_offset", NUMBER),
    ("inputs", {IN + ("interp",): "zoh"}, "inputs", r"unknown key 'interp'.*did you mean 'hold'"),
    ("inputs", {IN: "in.csv"}, "inputs", r"must be a table"),
]

CASES = WHEELS + CONTROL + INPUTS


def _id(case) -> str:
    edits = case[1]
    path, value = next(iter(edits.items()), (("both",), "u_rw1"))
    where = ".".join(str(p) for p in path)
    return f"{where}={'missing' if value is MISSING else value!r}"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text(CSV)
    return tmp_path


@pytest.mark.parametrize("via", ["dict", "file"])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_bad_value_is_refused_naming_the_field_and_the_rule(folder, via, case):
    """One line, starting with the file, naming the field and its rule; no JAX compilation."""
    kind, edits, field, rule = case
    d = _base(kind)
    for path, value in edits.items():
        _set(d, path, value)
    source = folder / "s.toml"
    _COMPILING.update(on=True, count=0)
    try:
        with pytest.raises(jh.ScenarioError) as e:
            if via == "dict":
                jh.scenario_from_dict(copy.deepcopy(d), str(source))
            else:
                source.write_text(tomli_w.dumps(d))
                jh.load_scenario(source)
    finally:
        _COMPILING["on"] = False
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(folder)), msg
    where = field.pattern if isinstance(field, re.Pattern) else re.escape(field)
    assert re.search(where + r"(?![A-Za-z0-9_]).*(?:" + rule + ")", msg), (field, rule, msg)
    assert _COMPILING["count"] == 0, f"{_COMPILING['count']} compilations before the refusal"


@pytest.mark.parametrize("kind", ["control", "inputs"])
def test_the_valid_tables_load(folder, kind):
    """The tables the cases above start from are valid: each refusal is the one bad value's."""
    s = jh.scenario_from_dict(_base(kind), str(folder / "s.toml"))
    assert s.spacecraft.wheels.labels == ("rw1", "rw2", "rw3")
    assert (s.control is not None) == (kind == "control") and (s.loads.inputs is not None) == (kind == "inputs")
