"""The CLI's program cache (`jaxhinge._runtime._programs`): a traced program kept on disk and loaded by a later process
gives bit for bit what the ordinary `eqx.filter_jit` program gives; its key separates what must be separate;
what it cannot key is run plain; a corrupt entry or an unwritable folder gives a warning and a correct run.

A later process is played by a fresh `program(...)` wrapper of the same function (nothing loaded in memory);
the subprocess test of the CLI (`test_cli.py::test_simulate_bundled_example_writes_contract`) runs it for real."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._analysis._linear._modes import _modes_jit, _modes_members
from jaxhinge._io._scenario_file import example_path
from jaxhinge._model._spacecraft import strip_labels
from jaxhinge._runtime import _programs


class Opaque:
    def __init__(self, v):
        self.v = v


@pytest.fixture
def store(tmp_path):
    folder = tmp_path / "programs"
    _programs.enable(str(folder))
    before = dict(_programs.STATS)
    yield folder, before
    _programs.enable(None)


def _spacecraft(k=None):
    sc = strip_labels(jh.load_scenario(example_path("two_panel.toml")).spacecraft)
    if k is not None:
        sc = jh.Spacecraft(sc.hub, type(sc.panels)(**{**sc.panels.__dict__, "k": jnp.asarray(k)}), sc.gravity)
    return sc


def _equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b) and len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_stored_and_loaded_programs_equal_the_plain_program(store):
    folder, before = store
    sc = _spacecraft()
    plain = _modes_jit.plain(sc, jh.FreeFree(), None)
    first = _modes_jit(sc, jh.FreeFree(), None)  # exported and stored
    assert _programs.STATS["stored"] == before["stored"] + 1 and len(os.listdir(folder)) == 1
    _equal(first, plain)
    later = _programs.program(_modes_members)  # "a later process": loads the entry, traces nothing
    again = later(sc, jh.FreeFree(), None)
    assert _programs.STATS["loaded"] == before["loaded"] + 1
    _equal(again, plain)
    assert again.boundary == jh.FreeFree() and again.panel_names == plain.panel_names  # static outputs restored


def test_arrays_are_inputs_static_values_are_keys(store):
    """New stiffnesses reuse the entry and give the plain program's (different) answer; another boundary is
    another entry, and so would be any other value of a static setting."""
    folder, _ = store
    a, b = _spacecraft([400.0, 420.0]), _spacecraft([100.0, 90.0])
    for sc in (a, b):
        _equal(_modes_jit(sc, jh.FreeFree(), None), _modes_jit.plain(sc, jh.FreeFree(), None))
    assert len(os.listdir(folder)) == 1
    fa, fb = (np.asarray(_modes_jit(sc, jh.FreeFree(), None).frequency_hz) for sc in (a, b))
    assert np.all(fa > 1.5 * fb)  # not a constant baked into the stored program
    _equal(_modes_jit(a, jh.HubClamped(), None), _modes_jit.plain(a, jh.HubClamped(), None))
    assert len(os.listdir(folder)) == 2
    cfg = jh.load_scenario(example_path("two_panel.toml")).simulation  # a static dataclass: every field keys
    texts = {_programs._canonical(dataclasses.replace(cfg, **kw)) for kw in
             ({}, {"t_end": cfg.t_end + 1e-9}, {"integrator": "tsit5"}, {"max_steps": cfg.max_steps + 1})}
    assert len(texts) == 4


def test_what_the_key_cannot_write_out_runs_plain(store):
    folder, before = store
    with pytest.raises(_programs._Uncacheable):
        _programs._canonical(lambda x: x)
    with pytest.raises(_programs._Uncacheable):
        _programs._canonical(Opaque(1))  # state the key cannot read faithfully

    def local(x):
        return x

    with pytest.raises(_programs._Uncacheable):
        _programs._canonical(local)
    assert _programs._canonical(np.float64(0.1)) != _programs._canonical(0.1)  # types are part of the text
    assert _programs._canonical((1, 2.0)) != _programs._canonical([1, 2.0])

    f = _programs.program(lambda x, g: g(x))  # a lambda as a static argument: an ordinary call
    assert float(f(jnp.asarray(2.0), lambda x: 3 * x)) == 6.0
    assert _programs.STATS["ordinary"] == before["ordinary"] + 1 and not folder.exists()
    g = jax.jit(lambda s: _modes_jit(s, jh.FreeFree(), None).frequency_hz)  # under a trace: an ordinary call
    np.testing.assert_array_equal(g(_spacecraft()), _modes_jit.plain(_spacecraft(), jh.FreeFree(), None).frequency_hz)
    assert not folder.exists()


def test_corrupt_entry_warns_and_is_replaced(store, capsys):
    folder, before = store
    sc = _spacecraft()
    _modes_jit(sc, jh.FreeFree(), None)
    (entry,) = os.listdir(folder)
    (folder / entry).write_bytes(b"not a program")
    m = _programs.program(_modes_members)(sc, jh.FreeFree(), None)
    _equal(m, _modes_jit.plain(sc, jh.FreeFree(), None))
    err = capsys.readouterr().err
    assert f"warning: program cache: entry '{entry}' is unreadable" in err and "running without it" in err
    _programs.program(_modes_members)(sc, jh.FreeFree(), None)  # the entry was written again: it loads
    assert _programs.STATS["loaded"] == before["loaded"] + 1


def test_unwritable_folder_warns_and_runs(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    stored = _programs.STATS["stored"]
    _programs.enable(str(tmp_path / "a_file" / "programs"))
    try:
        sc = _spacecraft()
        _equal(_programs.program(_modes_members)(sc, jh.FreeFree(), None), _modes_jit.plain(sc, jh.FreeFree(), None))
    finally:
        _programs.enable(None)
    err = capsys.readouterr().err
    assert "warning: program cache: folder" in err and "is not writable" in err
    assert _programs.STATS["stored"] == stored and os.listdir(tmp_path) == ["a_file"]


def _qr_solve(A, b):
    import lineax as lx

    return lx.linear_solve(lx.MatrixLinearOperator(A), b, lx.QR(), throw=False).value


def test_programs_with_lapack_calls_and_shape_structures_are_kept(store):
    """A program with a LAPACK call that has no cross-version guarantee in `jax.export` (`ormqr`, as in the
    least-squares solvers' QR steps) is stored and loaded all the same (the key names the jaxlib version), and
    gives the plain program's answer (here: NumPy's least-squares solution). Shape-dtype structures (a linear
    operator's input structure inside a solver state) are written out in the key, by shape, dtype and weak type."""
    _, before = store
    A = jnp.asarray(np.random.default_rng(0).normal(size=(7, 3)))
    b = jnp.arange(7.0)
    first = _programs.program(_qr_solve)(A, b)
    assert _programs.STATS["stored"] == before["stored"] + 1
    again = _programs.program(_qr_solve)(A, b)  # a later process: loaded
    assert _programs.STATS["loaded"] == before["loaded"] + 1
    _equal(again, first)
    np.testing.assert_allclose(again, np.linalg.lstsq(np.asarray(A), np.asarray(b), rcond=None)[0], rtol=1e-12)
    sds = jax.ShapeDtypeStruct
    keys = {_programs._canonical(s) for s in (sds((4,), jnp.float64), sds((5,), jnp.float64), sds((4,), jnp.int32),
                                               sds((4,), jnp.float64, weak_type=True))}
    assert len(keys) == 4 and _programs._canonical(sds((4,), jnp.float64)) in keys


def test_the_key_covers_the_whole_package_source(monkeypatch):
    """The key hashes every `.py` file of jaxhinge (the model's, the solver's), not only `_runtime`'s (where the
    module lives since the package was split into floors): a changed model must not load a program traced from
    the old one."""
    import builtins

    read = []
    real = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: (read.append(os.fspath(f)), real(f, *a, **k))[1])
    _programs._key_base.cache_clear()
    _programs.source_digest.cache_clear()
    try:
        _programs._key_base()
    finally:
        monkeypatch.undo()
        _programs._key_base.cache_clear()
    package = os.path.dirname(jh.__file__)
    for module in ("_model/_spacecraft.py", "_simulation/_simulate.py", "_runtime/_programs.py"):
        assert os.path.join(package, module) in read, module


def test_the_key_changes_with_x64_xla_flags_and_the_backend_and_only_with_them(monkeypatch):
    """A stored program is traced for one float width, one set of XLA flags and one backend (platform and
    devices): the key's fixed part (`_key_base`, hashed into every program's key with its name and its call's
    structure) changes when any of them does, and is equal otherwise (recomputed, an unrelated variable set, each
    setting put back): the reference is the settings themselves, changed one at a time here."""
    def base():
        _programs._key_base.cache_clear()
        return _programs._key_base()

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    try:
        ref = base()
        assert base() == ref  # recomputed: the same
        monkeypatch.setenv("JAXHINGE_UNRELATED_SETTING", "1")  # not JAX_, EQX_ or XLA_: not in the key
        assert base() == ref
        keys = {"reference": ref}

        jax.config.update("jax_enable_x64", False)
        try:
            keys["x64 off"] = base()
        finally:
            jax.config.update("jax_enable_x64", True)
        assert base() == ref

        monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
        keys["XLA_FLAGS"] = base()
        monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
        keys["XLA_FLAGS other"] = base()
        monkeypatch.delenv("XLA_FLAGS")
        assert base() == ref

        with monkeypatch.context() as m:
            m.setattr(jax, "default_backend", lambda: "gpu")
            keys["backend gpu"] = base()
        with monkeypatch.context() as m:
            m.setattr(jax, "devices", lambda *a, **k: ["cuda:0"])
            keys["devices cuda:0"] = base()
        with monkeypatch.context() as m:
            m.setattr(jax, "default_backend", lambda: "tpu")
            m.setattr(jax, "devices", lambda *a, **k: ["TPU_0(process=0,(0,0,0,0))"])
            keys["backend tpu"] = base()
        assert base() == ref
        assert len(set(keys.values())) == len(keys), [k for k in keys if list(keys.values()).count(keys[k]) > 1]
    finally:
        _programs._key_base.cache_clear()
