"""The fits' strategy and option objects (issue 37): solvers, boundary and loop kinds, targets, starts and
acceptance. References: each object refuses a bad value naming the field before any compute (no program is
compiled); a fit given names (`"clamped"`, `"lm"`) equals, bit for bit, the fit given the objects they map to; the
name tables map each file name to a class whose `name` is that file name."""

import re

import numpy as np
import pytest
from test_modes import random_spacecraft, scenario_of

import jaxhinge as jh
from jaxhinge._analysis._fitting._loop import LOOPS, as_loop
from jaxhinge._analysis._fitting._lsq_solver import _advance, evaluate
from jaxhinge._analysis._fitting._solvers import SOLVERS, as_solver, solvers_of
from jaxhinge._errors import FitError
from jaxhinge._model._boundary import BOUNDARIES, as_boundary

# ------------------------------------------------------------------------------------------------------------
# Name tables
# ------------------------------------------------------------------------------------------------------------


def test_name_tables_round_trip():
    """Each file / command-line name maps to a class whose `name` is that name, and back."""
    for table, convert in ((BOUNDARIES, as_boundary), (LOOPS, as_loop)):
        for name, kind in table.items():
            obj = convert(name)
            assert type(obj) is kind and obj.name == name and convert(obj) is obj
            assert obj == kind() and hash(obj) == hash(kind())  # stateless: a static argument of a program
    for name, kind in SOLVERS.items():
        for fit in kind.fits:
            obj = as_solver(name, fit)
            assert type(obj) is kind and obj.name == name and as_solver(obj, fit) is obj
    assert solvers_of("modal") == ("lm", "adam", "lbfgs")
    assert solvers_of("telemetry") == ("lm", "dogleg", "gauss_newton")
    assert {jh.FreeFree().rigid_body_modes, jh.HubClamped().rigid_body_modes} == {6, 0}


def test_solvers_build_their_optimistix_solvers():
    """Each solver object builds the optimistix solver the string name used to select, with its settings."""
    import optimistix as optx

    lm = jh.LevenbergMarquardt(rtol=1e-9, atol=1e-7).optimiser()
    assert isinstance(lm, optx.LevenbergMarquardt) and (lm.rtol, lm.atol) == (1e-9, 1e-7)
    bounded = jh.LevenbergMarquardt(rtol=1e-8, atol=1e-8, max_step=0.5).optimiser(trust=(1.0, 1e3))
    assert bounded.descent.max_step == (0.5, 500.0)
    assert isinstance(jh.Dogleg(rtol=1e-8, atol=1e-8).optimiser(), optx.Dogleg)
    assert isinstance(jh.GaussNewton(rtol=1e-8, atol=1e-8).optimiser(), optx.GaussNewton)
    assert isinstance(jh.Adam(rtol=1e-8, atol=1e-8).optimiser(), optx.OptaxMinimiser)
    assert jh.Adam(max_steps=5).with_defaults(rtol=1e-10, atol=1e-10, max_steps=200, max_step=0.5) == jh.Adam(
        rtol=1e-10, atol=1e-10, max_steps=5)


# ------------------------------------------------------------------------------------------------------------
# Refusals: each object names its field, before any compute
# ------------------------------------------------------------------------------------------------------------

BAD = [
    (lambda: jh.LevenbergMarquardt(rtol=-1.0), "rtol = -1"),
    (lambda: jh.LevenbergMarquardt(atol=float("nan")), "atol = nan"),
    (lambda: jh.LevenbergMarquardt(max_steps=0), "max_steps = 0: must be an integer >= 1"),
    (lambda: jh.LevenbergMarquardt(max_step=-0.5), "max_step = -0.5: must be a finite number >= 0"),
    (lambda: jh.Dogleg(max_steps=True), "max_steps = true"),
    (lambda: jh.Adam(learning_rate=0.0), "learning_rate = 0.0: must be a finite number > 0"),
    (lambda: jh.ModalTargets([0.3, 0.2]), "targets_hz = [0.3, 0.2]: must be in ascending order"),
    (lambda: jh.ModalTargets([0.2, -0.3]), "targets_hz[1] = -0.3: must be a finite number > 0"),
    (lambda: jh.ModalTargets([0.2, 0.3], damping_ratios=[0.01]), "damping_ratios has 1 values but targets_hz has 2"),
    (lambda: jh.ModalTargets([0.2], frequency_sigma=0.0), "frequency_sigma = 0.0: must be a finite number > 0"),
    (lambda: jh.ModalTargets([0.2], damping_sigma=-1), "damping_sigma = -1"),
    (lambda: jh.FeaTargets(jh.FeaModes(np.ones(1), np.ones(1, int)), effective_mass_sigma=0.0),
     "effective_mass_sigma = 0"),
    (lambda: jh.Starts(0), "starts = 0: must be an integer between 1 and 1024"),
    (lambda: jh.Starts(2000), "starts = 2000"),
    (lambda: jh.RandomStarts(count=0), "starts = 0: must be an integer >= 1"),
    (lambda: jh.RandomStarts(spread=0.0), "spread = 0"),
    (lambda: jh.RandomStarts(seed=-1), "seed = -1: must be an integer >= 0"),
    (lambda: jh.Acceptance(reach_rtol=0.0), "reach_rtol = 0"),
    (lambda: jh.Acceptance(ident_rtol=-1e-6), "ident_rtol = -1e-06"),
    (lambda: jh.Acceptance(warn_rtol=float("inf")), "warn_rtol = inf"),
]


@pytest.mark.parametrize("make, words", BAD, ids=[w[:30] for _, w in BAD])
def test_option_objects_refuse_bad_values_naming_the_field(make, words):
    with pytest.raises(FitError, match=re.escape(words)) as info:
        make()
    assert info.value.field and info.value.field in str(info.value)


def test_fit_refuses_bad_kinds_before_any_compute():
    """A bad name or an object the fit does not offer is refused naming the argument, before any program runs."""
    s = scenario_of(random_spacecraft(77, 1))
    before = (_advance.plain._cached._cache_size(), evaluate.plain._cached._cache_size())
    for kwargs, words in (({"boundary": "fixed"}, "boundary = 'fixed': allowed values are \"free\", \"clamped\""),
                          ({"loop": "sampled"}, "loop = \"sampled\": allowed values are 'open', 'closed'"),
                          ({"solver": "dogleg"}, "solver = 'dogleg': allowed values are lm, adam, lbfgs"),
                          ({"solver": jh.GaussNewton()}, "solver = GaussNewton\\(\\): allowed values"),
                          ({"solver": jh.LevenbergMarquardt(max_step=0.5)}, "max_step = 0.5: the trust limit"),
                          ({"loop": jh.ClosedLoop()}, "the scenario has no attitude controller"),
                          ({"starts": 4, "solver": jh.LBFGS()}, "the multi-start search runs the least-squares")):
        with pytest.raises(FitError, match=words) as info:
            jh.fit(s, [0.3], free=["p0.k"], check=False, **kwargs)
        assert info.value.field in ("boundary", "loop", "solver", "max_step", "starts")
    with pytest.raises(FitError, match="reach_rtol = 1e-06: applies to the modal fit"):
        jh.identify(s, jh.telemetry_from_arrays(np.linspace(0, 1, 3), np.zeros((3, 1)), ["theta_p0"], 1e-3, s),
                    ["p0.k"], acceptance=jh.Acceptance(reach_rtol=1e-6))
    with pytest.raises(FitError, match="solver = 'adam': allowed values are lm, dogleg, gauss_newton"):
        jh.identify(s, jh.telemetry_from_arrays(np.linspace(0, 1, 3), np.zeros((3, 1)), ["theta_p0"], 1e-3, s),
                    ["p0.k"], solver="adam")
    assert (_advance.plain._cached._cache_size(), evaluate.plain._cached._cache_size()) == before  # none compiled


# ------------------------------------------------------------------------------------------------------------
# Names and objects give the same fit
# ------------------------------------------------------------------------------------------------------------


def test_names_and_objects_give_the_same_fit_bit_for_bit():
    """The clamped single-panel fit (closed form, `test_fit.py`) given strings and given the objects: the same
    values, residuals, history and recorded options, bit for bit."""
    s = scenario_of(random_spacecraft(77, 1))
    by_name = jh.fit(s, jh.ModalTargets([0.3], damping_ratios=[0.02]), free=["p0.k", "p0.c"], boundary="clamped",
                     loop="open", solver="lm", check=False)
    by_object = jh.fit(s, jh.ModalTargets([0.3], damping_ratios=[0.02]), free=["p0.k", "p0.c"],
                       boundary=jh.HubClamped(), loop=jh.OpenLoop(),
                       solver=jh.LevenbergMarquardt(rtol=1e-10, atol=1e-10, max_steps=200),
                       starts=jh.Starts(8), acceptance=jh.Acceptance(reach_rtol=1e-6), check=False)
    for a, b in ((by_name.values, by_object.values), (by_name.residuals, by_object.residuals),
                 (by_name.history, by_object.history), (by_name.sigma, by_object.sigma)):
        np.testing.assert_array_equal(a, b)
    assert by_name.options == by_object.options and by_name.boundary == by_object.boundary == "clamped"
    assert by_name.options["solver"] == "lm" and by_name.options["loop"] == "open" and by_name.options["starts"] == 8
    assert by_name.options["rtol"] == 1e-10 and by_name.options["max_steps"] == 200
