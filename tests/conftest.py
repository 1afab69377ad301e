import os
import shutil
import sys
import tempfile

import pytest

# The XLA:CPU settings the CLI uses (`jaxhinge.configure_cpu`): XLA's elemental IR emitters (compilation is most
# of the suite's time; they compile the same computations ~25-45 % faster) and whole-function compilation of small
# integration loops (the configuration users run). Set here, before JAX starts its backend, and inherited by the
# notebook kernels and subprocesses the tests start (importing jaxhinge does not start JAX's backend). Set
# JAXHINGE_TEST_XLA_DEFAULTS=1 to test with XLA's defaults.
# On top, the suite compiles with LLVM's -O0 (`--xla_backend_optimization_level=0`): the tests are compile-bound
# (measured on 2 cores: the whole suite 7:32 -> 5:03; a telemetry fit 21.6 -> 15.0 s), and the backend's
# optimisation level changes how fast the machine code runs, not what XLA computes (XLA's own HLO passes are the
# same; every tolerance holds at both levels: the suite passes with and without it). Timings are the
# benchmarks' business (benchmarks/, the CLI's settings), never the tests'. JAXHINGE_TEST_XLA_OPT=1 keeps LLVM's
# default level. The comparisons with Basilisk also run at XLA's default level, in a second process
# (test_basilisk_xla_default.py): the two levels round differently, and users run the default.
if not os.environ.get("JAXHINGE_TEST_XLA_DEFAULTS"):
    from jaxhinge import configure_cpu

    configure_cpu()
    if not os.environ.get("JAXHINGE_TEST_XLA_OPT") and "xla_backend_optimization_level" not in os.environ.get(
            "XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()

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
# every program that takes over 0.05 s to compile goes into the cache (0.5 s left many small ones compiled again in
# each worker and notebook: the suite's CPU time 11 min 31 s -> 10 min 54 s, measured 2026-11-27)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.05")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))

sys.path.insert(0, os.path.dirname(__file__))  # tests/_helpers.py, _seed.py, _kane.py

DATA = os.path.join(os.path.dirname(__file__), "data")


def pytest_report_header(config):
    """The XLA options of this run (above), in the header of its output."""
    return f"XLA_FLAGS: {os.environ.get('XLA_FLAGS', '')}"


def pytest_unconfigure(config):
    """The run's own cache is removed by the process that made it (the xdist controller, or a plain run)."""
    if not hasattr(config, "workerinput") and os.environ.get("JAXHINGE_TEST_OWNS_CACHE") == "1":
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# Scheduling (pytest-xdist `--dist loadgroup --no-loadscope-reorder`, set in pyproject.toml): one group per test
# module, so a module's fixtures (shared models, trajectories, compiled programs) stay in one worker, and one group
# per notebook, so the notebooks spread over the workers. Groups are handed out longest first (the measured
# worker time of each, roughly, from `--durations` and compile logs) so no worker is left with a long group at the
# end; a module not listed here runs after the listed ones. The order changes only the wall time, never a result.
_LONGEST_FIRST = (
    "test_shooting_models.py", "test_fit_step.py", "test_identify.py", "test_chains.py", "test_basilisk_xla_default.py", "test_campaign.py", "test_closed_loop.py",
    "test_wheels.py", "test_modes.py", "test_basilisk_reference.py", "08_wheels_flight_record.ipynb", "test_shooting.py", "test_fit.py",
    "test_simulate.py", "test_control.py", "test_fea_fit.py", "test_kane.py", "test_sensitivity.py", "test_batch.py", "test_cli.py", "09_closed_loop.ipynb", "03_identify_from_telemetry.ipynb",
    "test_fea_shapes.py", "06_folding_array.ipynb", "02_fit_fea_frequencies.ipynb", "01_quickstart.ipynb",
    "04_sensitivity.ipynb", "test_rk4_scan.py", "05_monte_carlo.ipynb", "07_fea_modes.ipynb", "test_rules.py",
    "test_wheel_modes.py", "test_programs.py",
)  # fmt: skip


def _group(item) -> str:
    if item.path.name == "test_notebooks.py" and hasattr(item, "callspec"):
        return os.path.basename(item.callspec.params["path"])
    return item.path.name


@pytest.hookimpl(tryfirst=True)  # before xdist appends the group to the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))  # stable: file order within a group


# Each worker's peak resident memory, reported at the end of a run (xdist workers send theirs to the controller;
# a run in one process reports its own): the suite's memory is measured, not guessed.
_PEAK_RSS_MB: dict[str, float] = {}


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["peak_rss_mb"] = _peak_rss_mb()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    peak = getattr(node, "workeroutput", {}).get("peak_rss_mb")
    if peak is not None:
        _PEAK_RSS_MB[node.gateway.id] = peak


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput"):
        return
    peaks = _PEAK_RSS_MB or {"main": _peak_rss_mb()}
    terminalreporter.write_line("peak resident memory: " + ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(
        peaks.items())))


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After each test module, JAX's caches of traced and compiled programs are cleared: a worker runs many
    modules, and kept alive they grew each worker past 5.8 GB resident by the end of a run (measured 2026-11-28,
    fresh clone). A later module that needs one of the same programs traces it again and takes XLA's compilation
    from the run's persistent cache (above)."""
    yield
    import gc

    jax.clear_caches()
    gc.collect()


@pytest.fixture
def unchecked_types():
    """jaxtyping's runtime checking of jaxhinge's annotations (on in the suite: pyproject.toml's addopts) off for
    one test: for the tests of jaxhinge's own plain-words refusals of wrong-typed input, which is what a caller
    without a type checker (or a TOML file) gets. Everything else runs checked."""
    import jaxtyping

    old = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", old)
