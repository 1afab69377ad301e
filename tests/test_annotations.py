"""The suite checks jaxhinge's jaxtyping annotations at run time: pyproject.toml's pytest addopts carry
`--jaxtyping-packages=jaxhinge,beartype.beartype` (jaxtyping's pytest plugin installs its import hook before
conftest.py imports jaxhinge), so every annotated function and module is checked on every call the tests make
(under `jit`: at trace time). This test fails if that option is dropped."""

import _seed
import jax.numpy as jnp
import jaxtyping
import pytest

import jaxhinge as jh


def test_annotations_are_checked_at_runtime():
    s = _seed.no_gravity()
    st = jh.initial_state(s.spacecraft, s.initial)
    z3 = jnp.zeros(3)
    jh.accelerations(s.spacecraft, st, z3, z3, z3)  # as annotated (Float[Array, "3"]): runs
    with pytest.raises(jaxtyping.TypeCheckError, match="extForce_B"):
        jh.accelerations(s.spacecraft, st, jnp.zeros(4), z3, z3)
