"""Every comparison with Basilisk again, compiled at XLA's default optimisation level: the suite compiles with LLVM
-O0 (tests/conftest.py: it is compile-bound), users run XLA's default level (the CLI's settings,
`jaxhinge.configure_cpu`), and the two round differently (control_wheels: Omega 7.0e-12 rad/s apart, of ~900 rad/s;
control_torque: hub and panel positions 3e-14 m apart, of ~3 m). XLA reads its flags once per process, so the
comparisons run in a second pytest process, with the same flags less `--xla_backend_optimization_level=0`.

Measured (2026-11, the 2-core machine, each run alone): all 45 comparisons take 38 s (41 s CPU) at -O0 and 47-77 s
(59-73 s CPU) at the default level; compiling the trajectory programs is most of it, twice as long there. The
subset below (one scenario per family) takes the time printed in the suite's --durations.
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # run from where the suite runs

# The comparisons with Basilisk's runs, truth values and unit tests, one scenario per model family (each family is
# its own vector field and so its own rounding: the seed panel free (its truth values and energy conservation),
# with gravity, pulses and a motor torque; a chain; a random 3-D geometry; wheels on a recorded slew; the
# controller torquing the hub and driving the wheels), and Basilisk's own wheel, mrpFeedback and rwMotorTorque
# tests. The families' other scenarios differ from these in values or in one term (random3d_01..05 in geometry,
# the seed's damping, freqAmp and thetaSS cases in k, c and the span, chain_dual_gravity and the n-hinged chain in
# loads and length, wheels_mixed and wheels_conserve in loads and speeds, control_integral in its integral gain)
# and run at -O0 in the suite; leaving them out here saves 30 s of the suite's 6 minutes.
COMPARISONS = (
    *(f"tests/test_basilisk_reference.py::test_matches_basilisk[{s}]" for s in (
        "seed_gravity", "seed_lagrange", "seed_motorTorque", "chain_dual_mixed", "random3d_00", "wheels_slew_record",
        "control_torque", "control_wheels")),
    "tests/test_basilisk_reference.py::test_wheel_torques_and_conservation_match_basilisk[wheels_slew_record]",
    "tests/test_basilisk_seed.py::test_no_gravity_truth",
    "tests/test_basilisk_seed.py::test_damping_conservation",
    "tests/test_wheels.py::test_basilisks_own_wheel_tests",
    "tests/test_control.py::test_basilisks_own_mrp_feedback_test",
    "tests/test_control.py::test_basilisks_own_rw_motor_torque_test",
)
LEVEL = re.compile(r"\s*--xla_backend_optimization_level=\S*")


@pytest.mark.slow
@pytest.mark.skipif(not LEVEL.search(os.environ.get("XLA_FLAGS", "")),
                    reason="this run compiles at XLA's default level: the comparisons have run at it")
def test_basilisk_comparisons_at_xla_default_optimisation_level():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not an xdist worker's
    env["XLA_FLAGS"] = LEVEL.sub("", env["XLA_FLAGS"]).strip()
    env["JAXHINGE_TEST_XLA_OPT"] = "1"
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # its own cache (keys hold the flags: nothing to share), removed
    env.pop("JAXHINGE_TEST_OWNS_CACHE", None)  # by it, not this run's, which this run removes at its end
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-o", "addopts=", "-rfEs",
           *COMPARISONS]
    r = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    flags = re.search(r"^XLA_FLAGS: (.*)$", out, re.MULTILINE)
    assert flags and "optimization_level" not in flags.group(1) and "fusion_emitters=false" in flags.group(1), out
    collected = re.search(r"collected (\d+) items", out)
    assert collected and int(collected.group(1)) >= 16, out[-6000:]
    summary = out.strip().splitlines()[-1]  # "===== 45 passed in 93.04s (0:01:33) =====": all ran, all passed
    assert re.fullmatch(rf"=+ {collected.group(1)} passed in [^,=]+ =+", summary), out[-6000:]
