"""Bad values and records that multiple shooting refuses (`identify(shooting=...)`, a FIT.toml's `[fit]` table):
each refused before any compute, in one line naming the key or the reason and the value.

References: the rules as documented (docs/telemetry.md; `jh.MultipleShooting`'s docstring: `continuity_rtol` in
(0, 1), `dt` only "auto"; multiple shooting needs samples uniform on its grid from t = 0, no sensor time offset, no
controller in the loop with an adaptive integrator, one record, at least 3 samples). The
non-uniform samples and several records that differ in their sample times are refused in tests/test_shooting.py
(`test_multiple_shooting_is_refused_where_a_record_cannot_be_cut`), with `continuity_rtol = 2.0`; the others here.
A short synthetic record (values 0: nothing is fitted) of Basilisk's random two-panel configuration,
tests/data/telemetry/random3d_2p.toml (rk4 at 10 ms, samples every 50 ms)."""

import os
import re
import shutil

import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh

SCENARIO = os.path.join(DATA, "telemetry", "random3d_2p.toml")
COLS = ("omega_BN_B_1", "theta_p0")
FREE = ["p0.k", "p1.k"]
T = np.arange(41) * 0.05  # 2 s every 50 ms: on the 10 ms rk4 grid


@pytest.fixture(scope="module")
def scenario():
    return jh.load_scenario(SCENARIO)


def _record(scenario, cols=COLS, t=T):
    """A record of `cols` at the times `t` (values 0, sigma 1e-4): the refusals never look at the values."""
    t = np.asarray(t, dtype=float)
    return jh.telemetry_from_arrays(t, np.zeros((len(t), len(cols))), list(cols), np.full(len(cols), 1e-4), scenario)


# ------------------------------------------------------------------------------------------------------------
# continuity_rtol through the API
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, shown", [(0.0, "0.0"), (-0.1, "-0.1"), (1.0, "1.0"), (1.5, "1.5"),
                                          (float("nan"), "nan")])
def test_continuity_rtol_outside_zero_one_is_refused(scenario, value, shown):
    """The continuity defects' sigma relative to each state's range: a number in (0, 1) (0: the defects would
    weigh infinitely; 1 or more: not continuity at all). Refused by `MultipleShooting` itself, naming the key and
    the value, in one line."""
    msg = rf"^continuity_rtol = {shown}: must be a number in \(0, 1\)$"
    with pytest.raises(jh.FitError, match=msg):
        jh.MultipleShooting(continuity_rtol=value)
    with pytest.raises(jh.FitError, match=msg):  # identify's own path, given the option object's fields
        jh.identify(scenario, _record(scenario), FREE, shooting=jh.MultipleShooting(continuity_rtol=value))


def test_continuity_rtol_inside_zero_one_is_taken():
    for value in (1e-6, 0.03, 0.999):
        assert jh.MultipleShooting(continuity_rtol=value).continuity_rtol == value


# ------------------------------------------------------------------------------------------------------------
# Records multiple shooting cannot cut (identify, before any compute)
# ------------------------------------------------------------------------------------------------------------


def _refused(why: str) -> str:
    return rf'^shooting = "multiple": {why}; use shooting = "single" \(or "auto"\)$'


def test_an_adaptive_integrator_with_a_controller_is_refused_each_alone_is_taken(scenario):
    """tsit5 shoots each segment by itself, a controller in the loop joins the segments' unknowns (its integral
    state; segments on control samples): each alone is taken (`check_identify` runs the same choice `identify`
    does, before any compute). Together they are refused: `simulate` solves that loop period by period."""
    from jaxhinge._analysis._fitting._identify import check_identify

    check_identify(scenario.with_simulation(integrator="tsit5"), _record(scenario), FREE,
                   shooting=jh.MultipleShooting())
    s = jh.load_scenario(jh.example_path("closed_loop_slew.toml"))
    assert s.control is not None and s.simulation.integrator.name == "rk4"
    rec = _record(s, ("omega_BN_B_1",), np.arange(21) * 0.5)
    check_identify(s, rec, ["wing_pY.k"], shooting=jh.MultipleShooting())
    with pytest.raises(jh.FitError, match=_refused(r'integrator = "tsit5" with a controller in the loop \(solved '
                                                   r'period by period: use integrator "rk4"\)')):
        jh.identify(s.with_simulation(integrator="tsit5"), rec, ["wing_pY.k"], shooting=jh.MultipleShooting())


def test_a_first_sample_off_the_sample_grid_from_zero_is_refused(scenario):
    """The segments start from the scenario's initial state at t = 0, on the samples' grid: a record whose first
    sample is not a whole number of sample intervals after t = 0 cannot be cut."""
    with pytest.raises(jh.FitError, match=_refused(r"the first sample \(t = 0.02 s\) is not a whole number of "
                                                   r"sample intervals after t = 0")):
        jh.identify(scenario, _record(scenario, t=0.02 + T[:-1]), FREE, shooting=jh.MultipleShooting())


@pytest.mark.parametrize("how", ["fixed", "free"])
def test_a_sensor_time_offset_is_refused(scenario, how):
    """A time offset set (`sensors={"time_offset": ...}`) or fitted (`free` holds "time_offset") moves the samples
    off the step grid."""
    kw = {"sensors": {"time_offset": 0.02}} if how == "fixed" else {}
    free = FREE if how == "fixed" else [*FREE, "time_offset"]
    with pytest.raises(jh.FitError, match=_refused(r"a sensor time offset is fitted or set \(the samples move off "
                                                   r"the step grid\)")):
        jh.identify(scenario, _record(scenario), free, shooting=jh.MultipleShooting(), **kw)


@pytest.mark.parametrize("column", ["r_BN_N_1", "v_BN_N_2", "r_CN_N_3", "v_CN_N_1"])
def test_a_position_or_velocity_column_is_taken(scenario, column):
    """The hub's position and velocity join each segment's unknowns where a column measures them (fitted in
    tests/test_shooting.py): taken, before any compute."""
    from jaxhinge._analysis._fitting._identify import check_identify

    check_identify(scenario, _record(scenario, ("omega_BN_B_1", column)), FREE, shooting=jh.MultipleShooting())


def test_fewer_than_3_samples_are_refused(scenario):
    with pytest.raises(jh.FitError, match=_refused("fewer than 3 samples")):
        jh.identify(scenario, _record(scenario, t=[0.0, 0.05]), FREE, shooting=jh.MultipleShooting())


# ------------------------------------------------------------------------------------------------------------
# The same in a FIT.toml (jaxhinge fit): exit 2, one line naming the file, the key and the value, nothing written
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture
def fit_file(tmp_path):
    """Write tmp_path/FIT.toml with the `[fit]` lines given (a copy of the scenario, a 2 s record) and return it."""
    shutil.copy(SCENARIO, tmp_path / "sc.toml")
    (tmp_path / "data.csv").write_text("t," + ",".join(COLS) + "\n" + "".join(f"{float(t)!r},0.0,0.0\n" for t in T))

    def write(fit_lines: str):
        sensors = "sensors = {time_offset = 0.02}\n" if fit_lines == 'shooting = "multiple"' else ""
        (tmp_path / "FIT.toml").write_text(
            f'scenario = "sc.toml"\n[data]\ncsv = "data.csv"\ncolumns = ["{COLS[0]}", "{COLS[1]}"]\n'
            f'sigma = [1e-5, 1e-4]\n{sensors}[fit]\nfree = ["p0.k"]\n{fit_lines}\n')
        return tmp_path / "FIT.toml"

    return write


@pytest.mark.parametrize("lines, match", [
    # continuity_rtol: outside (0, 1), the file's message MultipleShooting's
    ('shooting = "multiple"\ncontinuity_rtol = 0.0', r"fit\.continuity_rtol = 0\.0: must be a number in \(0, 1\)"),
    ('shooting = "multiple"\ncontinuity_rtol = -0.5', r"fit\.continuity_rtol = -0\.5: must be a number in \(0, 1\)"),
    ('shooting = "multiple"\ncontinuity_rtol = 1.0', r"fit\.continuity_rtol = 1\.0: must be a number in \(0, 1\)"),
    ('shooting = "multiple"\ncontinuity_rtol = 1.5', r"fit\.continuity_rtol = 1\.5: must be a number in \(0, 1\)"),
    ('shooting = "multiple"\ncontinuity_rtol = "tight"', r'fit\.continuity_rtol = "tight": must be a number, got a string'),
    # continuity_rtol without multiple shooting
    ("continuity_rtol = 0.5", r'fit\.continuity_rtol = 0\.5: applies to shooting = "multiple" \(set it too\)'),
    # dt: "auto" or left out (the scenario's own dt)
    ("dt = 0.01", r'fit\.dt = 0\.01: allowed values are "auto"'),
    ('dt = "fast"', r'fit\.dt = "fast": allowed values are "auto"'),
    # a record multiple shooting cannot cut (a sensor time offset set in [data]), in the file's terms
    ('shooting = "multiple"', r'fit\.shooting = "multiple": a sensor time offset is fitted or set'),
], ids=["rtol=0", "rtol<0", "rtol=1", "rtol>1", "rtol-string", "rtol-single", "dt-number", "dt-string", "offset"])
def test_fit_file_bad_shooting_values_exit_2_naming_key_and_value(fit_file, capsys, lines, match):
    """(The file's own check of continuity_rtol says "> 0" where MultipleShooting says "in (0, 1)": both name the
    key and the value.)"""
    from jaxhinge._cli import main

    path = fit_file(lines)
    before = sorted(os.listdir(path.parent))
    rc = main(["fit", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2, (rc, err)
    assert err.endswith("\n") and len(err.splitlines()) == 1, err
    assert err.startswith(f"jaxhinge: error: {path}: "), err
    assert re.search(match, err), (match, err)
    assert out == "" and sorted(os.listdir(path.parent)) == before  # nothing written
