import os
import sys
import tempfile

import jax

jax.config.update("jax_enable_x64", True)
# Persistent compilation cache shared by the test process and the notebook kernels it starts: the same
# programs (e.g. the two-panel simulate) are compiled once per CI run instead of once per process.
_CACHE = os.path.join(tempfile.gettempdir(), "jaxhinge-test-jax-cache")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

sys.path.insert(0, os.path.dirname(__file__))  # tests/_seed.py helpers

DATA = os.path.join(os.path.dirname(__file__), "data")
