"""The integrators as objects (`RK4`, `Tsit5`, `Dopri8`): the same runs bit for bit as their file names, one name
table both ways, values refused when built (naming the file key), hashable objects that share compiled programs,
and `with_simulation`'s rules (CONVENTIONS.md 23)."""

import dataclasses

import _seed
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._errors import ConfigError
from jaxhinge._model._integrators import INTEGRATORS, AbstractAdaptive, AbstractIntegrator, integrator_class
from jaxhinge._simulation._simulate import _simulate_jit

# a short run no other test compiles (t_end 0.3 s), so the program counts below start from this file
SIM = {"t_end": 0.3, "save_dt": 0.05}
OUTPUTS = ("sigma_BN", "omega_BN_B", "theta", "thetaDot", "r_BN_N", "totRotEnergy", "num_steps")


def _scenario():
    return _seed.damping(sim=jh.SimulationConfig(**SIM, integrator="rk4", dt=0.01),
                         loads=jh.Loads(extTorquePntB_B=[0.1, 0.2, -0.1]))


def _programs() -> int:
    return _simulate_jit.plain._cached._cache_size()


def _same(a: jh.Trajectory, b: jh.Trajectory):
    for name in OUTPUTS:
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)


def test_objects_and_names_run_bit_for_bit_the_same_and_share_programs():
    """A short rk4 and a short tsit5 run, spelled by file name and as objects: equal to the last bit, and an equal
    object (or one differing only in the traced tolerances) adds no compiled program."""
    sc = _scenario()
    by_name = jh.simulate(sc.with_simulation(integrator="rk4", dt=0.01))
    n = _programs()
    by_object = jh.simulate(sc.with_simulation(integrator=jh.RK4(dt=0.01)))
    assert _programs() == n  # RK4(dt=0.01) == the config "rk4" with dt 0.01: the same static data
    _same(by_name, by_object)
    assert bool(by_object.success)

    by_name = jh.simulate(sc.with_simulation(integrator="tsit5", dt=0.01, rtol=1e-8, atol=1e-10))
    n = _programs()
    by_object = jh.simulate(sc.with_simulation(integrator=jh.Tsit5(rtol=1e-8, atol=1e-10, dt0=0.01)))
    looser = jh.simulate(sc.with_simulation(integrator=jh.Tsit5(rtol=1e-6, atol=1e-8, dt0=0.02)))
    assert _programs() == n  # tolerances and the first step are traced (compile_key)
    _same(by_name, by_object)
    assert int(looser.num_steps) < int(by_object.num_steps)  # the traced tolerances act
    again = jh.simulate(jh.Scenario(sc.spacecraft, sc.initial, sc.loads,
                                    jh.SimulationConfig(**SIM, integrator=jh.Tsit5(rtol=1e-8, atol=1e-10, dt0=0.01))))
    _same(again, by_object)


def test_name_table_round_trips():
    """One table, file name -> class, and back by the class's own `name`; an object's file settings rebuild it."""
    assert INTEGRATORS == {"rk4": jh.RK4, "tsit5": jh.Tsit5, "dopri8": jh.Dopri8}
    for name, cls in INTEGRATORS.items():
        assert cls.name == name and integrator_class(name) is cls and issubclass(cls, AbstractIntegrator)
        obj = cls.from_settings(dt=2e-3, rtol=1e-7, atol=1e-9, max_steps=500)
        assert cls.from_settings(**obj.settings()) == obj
        cfg = jh.SimulationConfig(1.0, 0.1, name, **obj.settings())
        assert cfg.integrator == obj and cfg.dt == 2e-3
        assert cls.fixed_step is not issubclass(cls, AbstractAdaptive)
    assert jh.RK4(dt=2e-3).settings() == {"dt": 2e-3}
    assert jh.Dopri8(dt0=0.5).settings() == {"dt": 0.5, "rtol": 1e-10, "atol": 1e-12, "max_steps": 1_000_000}
    for bad in ("RK4", "euler", 4, None):
        with pytest.raises(ConfigError, match=r'^simulation.integrator = .*: must be one of "rk4", "tsit5", "dopri8"'):
            integrator_class(bad)


def test_written_file_keeps_names_and_settings(tmp_path):
    """The writer names the integrator by its file name, and a scenario built with an object reads back equal."""
    sc = _scenario().with_simulation(integrator=jh.Dopri8(rtol=1e-9, atol=1e-11, dt0=0.02, max_steps=777))
    data = jh.scenario_to_dict(sc)["simulation"]
    assert data == {"t_end": 0.3, "save_dt": 0.05, "integrator": "dopri8", "dt": 0.02, "rtol": 1e-9, "atol": 1e-11,
                    "max_steps": 777}
    jh.dump_scenario(sc, tmp_path / "s.toml")
    assert jh.load_scenario(tmp_path / "s.toml").simulation == sc.simulation
    rk4 = jh.load_scenario(jh.example_path("two_panel")).with_simulation(rtol=1e-6)  # rk4 keeps it aside
    assert jh.scenario_to_dict(rk4)["simulation"]["rtol"] == 1e-6 and rk4.simulation.integrator == jh.RK4(1e-3)


@pytest.mark.parametrize(("build", "field", "rule"), [
    (lambda: jh.RK4(dt=0.0), "simulation.dt", "must be a finite number > 0"),
    (lambda: jh.RK4(dt=float("nan")), "simulation.dt", "must be a finite number > 0"),
    (lambda: jh.SimulationConfig(**SIM, integrator="rk4", dt=True), "simulation.dt", "must be a finite number > 0"),
    (lambda: jh.Tsit5(rtol=-1e-9), "simulation.rtol", "must be a finite number > 0"),
    (lambda: jh.Tsit5(atol=0.0), "simulation.atol", "must be a finite number > 0"),
    (lambda: jh.Dopri8(dt0=-1.0), "simulation.dt", "must be a finite number > 0"),
    (lambda: jh.Dopri8(max_steps=0), "simulation.max_steps", "must be an integer > 0"),
    (lambda: jh.SimulationConfig(**SIM, integrator=jh.Dopri8(), max_steps=-3), "simulation.max_steps",
     "must be an integer > 0"),
    (lambda: jh.SimulationConfig(t_end=0.25, save_dt=0.05, integrator=jh.RK4(dt=0.1)), "simulation.save_dt",
     'must be a whole multiple of dt = 0.1 with integrator "rk4"'),
    (lambda: jh.SimulationConfig(t_end=1.0, save_dt=0.1, integrator=jh.Tsit5(dt0=2.0)), "simulation.dt",
     "must be <= t_end = 1.0 s"),
    (lambda: jh.SimulationConfig(t_end=1.0, save_dt=0.1, integrator=jh.Tsit5(), rtol=0.0), "simulation.rtol",
     "must be a finite number > 0"),
    (lambda: _scenario().with_simulation(step=0.1), "simulation.step", "is not a simulation setting"),
])
def test_bad_values_refused_when_built(build, field, rule):
    """Refused before anything is compiled, naming the file key, the value and the rule."""
    with pytest.raises(ConfigError, match=rule) as e:
        build()
    assert e.value.field == field and str(e.value).startswith(field + " = ")


def test_objects_are_immutable_and_hashable():
    a, b = jh.Tsit5(rtol=1e-9), jh.Tsit5(rtol=1e-9)
    assert a == b and hash(a) == hash(b) and a != jh.Dopri8(rtol=1e-9) and a != jh.Tsit5(rtol=1e-8)
    assert len({jh.RK4(1e-3), jh.RK4(dt=0.001), jh.RK4(2e-3)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.rtol = 1e-3  # type: ignore[misc]
    cfg = jh.SimulationConfig(**SIM, integrator=a)
    assert hash(cfg) == hash(jh.SimulationConfig(**SIM, integrator="tsit5", rtol=1e-9))
    with pytest.raises(AttributeError):
        cfg.dt = 0.1  # type: ignore[misc]


def test_with_simulation_rules():
    """Names and objects, loose settings, and what each change keeps."""
    rk4 = _scenario()  # rk4, dt 0.01
    assert rk4.with_simulation(t_end=0.2).simulation.integrator == jh.RK4(dt=0.01)  # keeps its step
    assert rk4.with_simulation(dt=5e-3).simulation.integrator == jh.RK4(dt=5e-3)  # the current integrator's step
    assert rk4.with_simulation(integrator=jh.RK4(dt=1e-3)).simulation.dt == 1e-3
    # a switch by name keeps the settings the configuration has (rk4: its step becomes the first step)
    kept = rk4.with_simulation(max_steps=99).with_simulation(integrator="dopri8", rtol=1e-9).simulation.integrator
    assert kept == jh.Dopri8(rtol=1e-9, atol=1e-12, dt0=0.01, max_steps=99)
    # loose keywords beside an object set its values; an object replaces what the configuration kept aside
    cfg = rk4.with_simulation(integrator=jh.Tsit5(rtol=1e-9), dt=0.02).simulation
    assert cfg.integrator == jh.Tsit5(rtol=1e-9, dt0=0.02) and (cfg.rtol, cfg.atol, cfg.max_steps) == (1e-9, 1e-12,
                                                                                                       1_000_000)
    assert rk4.with_simulation(rtol=1e-6).with_simulation(integrator=jh.RK4(0.01)).simulation.rtol == 1e-10
    assert dataclasses.replace(cfg, dt=0.05).integrator == jh.Tsit5(rtol=1e-9, dt0=0.05)  # the dataclass way too
    tsit5 = jh.SimulationConfig(**SIM, integrator=jh.Tsit5(rtol=1e-9, dt0=0.01))
    assert (tsit5.dt, tsit5.rtol, tsit5.atol, tsit5.max_steps) == (0.01, 1e-9, 1e-12, 1_000_000)
