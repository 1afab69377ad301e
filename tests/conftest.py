import os
import shutil
import sys
import tempfile

# XLA's older CPU code generator (elemental IR emitters instead of the MLIR fusion emitters): the same
# computations, compiled ~25-30 % faster (a reverse-mode simulation program 18 s -> 13 s; compilation is most of
# the suite's time), and the forward simulation runs no slower. Set here, before JAX starts its backend, and
# inherited by the notebook kernels and subprocesses the tests start. Set JAXHINGE_TEST_XLA_DEFAULTS=1 to test with
# XLA's defaults.
if not os.environ.get("JAXHINGE_TEST_XLA_DEFAULTS") and "xla_cpu_use_fusion_emitters" not in os.environ.get(
    "XLA_FLAGS", ""
):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false").strip()

import jax

jax.config.update("jax_enable_x64", True)
# A persistent compilation cache for this run only, shared by the test processes (pytest-xdist workers) and the
# notebook kernels they start: a program compiled by one is loaded by the others. It starts empty every run (the
# suite's time is measured from a cold cache); set JAXHINGE_TEST_JAX_CACHE to keep one between runs.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ.get("JAXHINGE_TEST_JAX_CACHE") or tempfile.mkdtemp(
        prefix="jaxhinge-test-jax-cache-"
    )
    os.environ["JAXHINGE_TEST_OWNS_CACHE"] = "" if os.environ.get("JAXHINGE_TEST_JAX_CACHE") else "1"
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))

sys.path.insert(0, os.path.dirname(__file__))  # tests/_helpers.py, _seed.py, _kane.py

DATA = os.path.join(os.path.dirname(__file__), "data")


def pytest_unconfigure(config):
    """The run's own cache is removed by the process that made it (the xdist controller, or a plain run)."""
    if not hasattr(config, "workerinput") and os.environ.get("JAXHINGE_TEST_OWNS_CACHE") == "1":
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
