"""Recorded-input CSV files (`[inputs]`, jaxhinge/_io/_inputs_file.py) against the run they drive: a record that
does not fit the run in time (its `t` in milliseconds, only its first sample inside the run) is refused in one line
naming the file, the column `t`, its values and the rule; a record that fits but will not act as its author may have
meant (one sample held over most of the run, samples the rk4 steps never reach) gets a note. File checks only:
nothing is built or compiled (`check`, the scenario checker, returns the notes that `scenario_from_dict` issues as
`JaxhingeNote` warnings).

References: the bundled wheel-slew record and the Basilisk reference records (tests/data/bsk/), which fit their runs
and must pass without a note; the same slew record with its time column in milliseconds; rk4's step starts
t = k dt written out by hand for the sampling note."""

import os
import tomllib
import warnings

import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh
from jaxhinge._errors import JaxhingeNote
from jaxhinge._io._scenario_check import check

EXAMPLES = os.path.join(os.path.dirname(jh.__file__), "examples")


def _scenario(t_end=2.0, integrator="rk4", dt=0.01, hold="zoh") -> dict:
    """A hub and one wheel, driven by the record in.csv (next to the scenario file)."""
    return {"hub": {"mHub": 500.0, "IHubPntBc_B": [[400.0, 0.0, 0.0], [0.0, 300.0, 0.0], [0.0, 0.0, 200.0]]},
            "wheels": [{"name": "rw1", "gsHat_B": [1.0, 0.0, 0.0], "Js": 0.1}],
            "inputs": {"csv": "in.csv", "hold": hold},
            "simulation": {"t_end": t_end, "save_dt": dt, "integrator": integrator, "dt": dt}}


def _check(tmp_path, t, u=None, **kw):
    """The notes of the scenario `_scenario(**kw)` with the record `t`, `u` (default: a command that changes at
    every sample); raises its ScenarioError."""
    u = np.arange(len(t), dtype=float) * 0.01 if u is None else u
    (tmp_path / "in.csv").write_text("t,u_rw1\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(t, u)))
    return check(_scenario(**kw), str(tmp_path / "s.toml")).notes


def _example(tmp_path, scale=1.0) -> dict:
    """The bundled wheel slew (60 s, rk4 at 5 ms) with its recorded commands, the time column multiplied by
    `scale`, written to tmp_path/in.csv."""
    with open(os.path.join(EXAMPLES, "wheels_slew.toml"), "rb") as f:
        d = tomllib.load(f)
    with open(os.path.join(EXAMPLES, d["inputs"]["csv"])) as f:
        header, *rows = [line for line in f if line.strip() and not line.startswith("#")]
    rows = [line.split(",", 1) for line in rows]
    (tmp_path / "in.csv").write_text(header + "".join(f"{float(t) * scale!r},{rest}" for t, rest in rows))
    d["inputs"]["csv"] = "in.csv"
    return d


def test_the_slew_record_in_milliseconds_is_refused(tmp_path):
    """The issue's case: the bundled slew record with t in ms "covered" [0, 60] s and its first command was held
    for the whole run (rw1 ended at 331 rad/s instead of 400). Both pieces of evidence are there: read as ms it
    covers the run (60000 ms = 60 s), and no sample falls inside the run. The hint divides by 1000 (the record then
    fits, 23 samples inside the run) and suggests nothing that would make the ms column fit as seconds. In seconds
    it loads without a note."""
    d = _example(tmp_path)
    assert check(d, str(tmp_path / "s.toml")).notes == []
    d = _example(tmp_path, scale=1000.0)
    msg = (r"^\S*in\.csv: t = 0\.0 \.\. 60000\.0 s: the record spans 1000x the run, \[0, 60\.0\] s "
           r"\(simulation\.t_end\) and only its sample at t = 0\.0 acts in it \(the next is at t = 10000\.0\); as "
           r"milliseconds, t / 1000 covers the run with 23 samples inside it: t must be in seconds \(a time column in "
           r"ms\? divide it by 1000\)$")
    with pytest.raises(jh.ScenarioError, match=msg):
        check(d, str(tmp_path / "s.toml"))
    with pytest.raises(jh.ScenarioError, match=msg):  # the public path, the file written
        with open(os.path.join(EXAMPLES, "wheels_slew.toml")) as f:
            (tmp_path / "s.toml").write_text(f.read().replace("wheels_slew_inputs.csv", "in.csv"))
        jh.load_scenario(tmp_path / "s.toml")


def test_the_first_6_s_of_the_60_s_slew_record_run_as_basilisk_ran_them(tmp_path):
    """The issue's case: a 6 s run of the 60 s slew record (first switch at 10 s) was refused as "a time column in
    ms?". A record longer than the run is legitimate: it loads without a note, and the 6 s run is the first 6 s of
    Basilisk's 60 s run of the same record (tests/data/bsk/wheels_slew_record.npz; rk4 is causal, so the samples
    after 6 s cannot act), within the Basilisk tolerances of tests/_basilisk.py."""
    import _basilisk

    src = os.path.join(DATA, "bsk", "wheels_slew_record.toml")
    with open(src) as f:
        text = f.read()
    assert "t_end = 60.0" in text
    (tmp_path / "s.toml").write_text(text.replace("t_end = 60.0", "t_end = 6.0").replace(
        '"wheels_slew_record_inputs.csv"', repr(os.path.join(DATA, "bsk", "wheels_slew_record_inputs.csv"))))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JaxhingeNote)
        scenario = jh.load_scenario(tmp_path / "s.toml")
    tr = jh.simulate(scenario)
    assert bool(tr.success)
    ref = np.load(os.path.join(DATA, "bsk", "wheels_slew_record.npz"))
    n = len(np.asarray(tr.t))
    assert n == 61 and ref["t"][n - 1] == pytest.approx(6.0)
    keys = _basilisk.KEYS + ("Omega",)
    worst = _basilisk.worst({k: getattr(tr, k) for k in keys}, {k: ref[k][:n] for k in keys})
    assert max(worst.values()) <= 1.0, {k: f"{v:.2g}" for k, v in worst.items()}
    # the first command only, held over the whole run (Basilisk logs at t_1 the torque of the step ending there)
    assert np.asarray(tr.u_current)[:-1] == pytest.approx(np.broadcast_to(ref["rw_u_current"][1], (n - 1, 4)))


@pytest.mark.parametrize("t, match", [
    # the record must cover [0, t_end]: first sample at or before 0, last at or after t_end
    ([0.5, 1.0, 2.0], (r"t = 0\.5 \.\. 2\.0 s: the record must cover the run, \[0, 2\.0\] s \(simulation\.t_end\): "
                       r"first t <= 0, last t >= 2\.0$")),
    ([0.0, 1.0, 1.5], r"t = 0\.0 \.\. 1\.5 s: the record must cover the run"),
    # ms: read as ms it covers the run (last t >= 1000 t_end) and no sample falls inside the run
    ([0.0, 500.0, 1000.0, 2000.0], (r"t = 0\.0 \.\. 2000\.0 s: the record spans 1000x the run, \[0, 2\.0\] s "
                                    r"\(simulation\.t_end\) and only its sample at t = 0\.0 acts in it \(the next "
                                    r"is at t = 500\.0\); as milliseconds, t / 1000 covers the run with 2 samples "
                                    r"inside it: t must be in seconds \(a time column in ms\? divide it by 1000\)$")),
    # a sample before 0, one at t_end itself: it does not act either
    ([-500.0, 0.0, 2.0, 2500.0], (r"t = -500\.0 \.\. 2500\.0 s: the record spans 1500x the run.*\(the next is at "
                                  r"t = 2\.0\); as milliseconds, t / 1000 covers the run with 1 samples inside it")),
])
def test_records_that_do_not_fit_the_run_are_refused(tmp_path, t, match):
    with pytest.raises(jh.ScenarioError, match=r"^\S*in\.csv: " + match):
        _check(tmp_path, t)


@pytest.mark.parametrize("t", [
    # longer than the run, one piece of the ms evidence only (run as written, no note: see _time_notes)
    [0.0, 1.0, 200.0],  # 100x the run, a sample inside it
    [0.0, 1.0, 2000.0],  # 1000x the run (as ms it would cover it), but a sample inside the run: seconds
    [-1.0, 0.5, 201.0],
    [0.0, 3.0, 1999.0],  # no sample inside the run, but as ms it would not cover the run (1.999 s < 2 s)
    [0.0, 3.0, 6.0],  # 3 s sampling for a 2 s run: the first 2 s of a 6 s record
    [-3.0, 0.0, 2.0, 4.0, 6.0],
    [0.0, 1.0, 3.0, 6.0],  # one sample inside the run
    [0.0, 2.0, 4.0],  # the sample at t_end closes the run, one after it
    [-1e-10, 2.0 - 1e-10],  # within TIME_RTOL of 0 and t_end
])
def test_records_that_fit_the_run_load(tmp_path, t):
    notes = _check(tmp_path, t)
    if t[-2] > 2.0:  # a record going on past the run with two samples or more: no note either
        assert notes == [], notes


def test_one_sample_held_over_the_run_gets_a_note(tmp_path):
    """zoh: the sample at 0 acts over all of [0, 2) when the next comes at 3 s (or at t_end itself); a note names
    it, its share of the run and the next sample. The same with a constant record (a constant command written as
    a record), with `hold = "linear"` (a ramp over the run) or commands held for half the run each (the Basilisk
    wheels_mixed case, below) gets none."""
    for t, share, nxt in (([0.0, 3.0], "100%", "3.0"), ([0.0, 2.0], "100%", "2.0"), ([0.0, 1.9, 2.0], "95%", "1.9")):
        notes = _check(tmp_path, t)
        assert notes == [(f"{tmp_path / 'in.csv'}: t: the sample at t = 0.0 is held over {share} of the run, [0, "
                          f"2.0] s (simulation.t_end) (the next is at t = {nxt}): the rest of the record barely acts; "
                          "is t in seconds?")], t
    assert _check(tmp_path, [0.0, 1.7, 2.0]) == []  # 85 %
    assert _check(tmp_path, [0.0, 3.0, 6.0]) == []  # a longer record: its samples after the run are not meant to act
    assert _check(tmp_path, [0.0, 3.0], u=[0.02, 0.02]) == []
    assert _check(tmp_path, [0.0, 3.0], hold="linear") == []


def test_samples_between_two_rk4_steps_get_a_note(tmp_path):
    """rk4 samples the inputs at each step start, t = k dt (dt = 0.01 s): the sample at 0.503 s is held until
    0.507 s, before the step at 0.51 s, so it never acts; the one at 0.507 s acts from 0.51 s; the one at 1.2 s
    acts from its own step. Adaptive integrators step onto every sample: no note."""
    t = [0.0, 0.503, 0.507, 1.2, 2.0]
    steps = np.arange(200) * 0.01
    acting = [bool(np.any((steps >= t[i] - 1e-12) & (steps < t[i + 1] - 1e-12))) for i in (1, 2, 3)]
    assert acting == [False, True, True]
    notes = _check(tmp_path, t)
    assert notes == [(f"{tmp_path / 'in.csv'}: t: 1 of the 3 samples inside the run never act: with integrator "
                      "\"rk4\" the inputs are sampled at each step start, t = k dt (dt = 0.01 s), and these fall "
                      "between two (the first at t = 0.503)")]
    assert _check(tmp_path, t, integrator="tsit5") == []
    assert _check(tmp_path, [0.0, 0.5, 0.51, 1.2, 2.0]) == []  # on step starts (0.5 = 50 dt, within rounding)


def test_notes_are_issued_as_jaxhinge_notes(tmp_path):
    """`scenario_from_dict` issues the checker's notes as `JaxhingeNote` warnings (the command line prints them
    as `jaxhinge: note: ...`)."""
    _check(tmp_path, [0.0, 3.0])
    with pytest.warns(JaxhingeNote, match=r"in\.csv: t: the sample at t = 0\.0 is held over 100% of the run"):
        jh.scenario_from_dict(_scenario(), str(tmp_path / "s.toml"))


@pytest.mark.parametrize("case", ["wheels_mixed", "wheels_slew_record"])
def test_the_basilisk_reference_records_fit_their_runs(case):
    """The records Basilisk ran (tests/data/bsk/*_inputs.csv): commands switched at 15 s of a 30 s run, and the
    60 s slew: no refusal, no note."""
    with open(os.path.join(DATA, "bsk", case + ".toml"), "rb") as f:
        d = tomllib.load(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JaxhingeNote)
        assert check(d, os.path.join(DATA, "bsk", case + ".toml")).notes == []


def test_a_time_offset_that_moves_the_record_off_the_run_gets_a_note(tmp_path):
    """The input at t is the record's at t - inputs.time_offset: a record covering [0, 2] s delayed by 0.5 s holds
    its first sample over [0, 0.5] s, advanced by 0.5 s its last over [1.5, 2] s (a note each, naming the shift
    and the held span); a record covering [-1, 3] s takes either offset without a note."""
    def offset(t, value):
        d = _scenario()
        d["inputs"]["time_offset"] = value
        (tmp_path / "in.csv").write_text("t,u_rw1\n" + "".join(f"{float(a)!r},{0.01 * float(a)!r}\n" for a in t))
        return check(d, str(tmp_path / "s.toml")).notes

    t = np.linspace(0.0, 2.0, 21)
    late, early = offset(t, 0.5), offset(t, -0.5)
    assert len(late) == 1 and late[0].endswith("shifted by inputs.time_offset = 0.5 s the record covers 0.5 .. 2.5 "
                                               "s, not all of the run, [0, 2.0] s (simulation.t_end): its first "
                                               "sample over [0, 0.5] s is held")
    assert len(early) == 1 and early[0].endswith("its last sample over [1.5, 2.0] s is held")
    wide = np.linspace(-1.0, 3.0, 41)
    assert offset(wide, 0.5) == [] and offset(wide, -0.5) == []


def test_a_missing_record_names_the_field(tmp_path):
    """`inputs.csv` naming a file that is not there: refused naming the field, the value and the path looked at."""
    d = _scenario()
    d["inputs"]["csv"] = "nope.csv"
    with pytest.raises(jh.ScenarioError, match=r"inputs\.csv = \"nope\.csv\": no such file: .*nope\.csv \(paths are "
                       r"relative to this file\)"):
        check(d, str(tmp_path / "s.toml"))
