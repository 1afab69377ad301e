"""The batch hang of issue 38 (item 7): batched LAPACK calls that deadlock XLA:CPU's thread pool (jaxlib 0.10).

Two programs, each run in a fresh process; count the runs that do not finish (docs/speed.md, "A hang in XLA:CPU
batched eigen-solves", has the numbers, the native stacks and the cause):

- `modes` (default): notebook 07's map, `jax.vmap(jh.modes)` over an N x N grid (default 80) of the two-wing
  model's hinge stiffnesses; prints the map's time. jaxhinge solves each member's eigenproblems one member at a
  time under `vmap` (`one_member_at_a_time` in `jaxhinge/_analysis/_linear/_modes.py`), so this finishes.
- `minimal`: plain JAX, no jaxhinge: one jitted program with independent batched `eigvals`, `eigvalsh`,
  `cholesky` and `solve` on 6400 4 x 4 matrices, called CALLS times (default 20). On a 2-core machine with jaxlib
  0.10.2 about half of the processes hang.

    for i in $(seq 30); do timeout -s KILL 30 python benchmarks/repro_modes_hang.py modes 80 || echo HANG; done
    for i in $(seq 10); do timeout -s KILL 30 python benchmarks/repro_modes_hang.py minimal 20 || echo HANG; done

(from the repository root, with `PYTHONPATH=$PWD` for a checkout). `REPRO_TIMEOUT=s` prints the Python stacks and
exits after s seconds; attach `gdb -p PID -batch -ex "thread apply all bt"` before that for the native ones.
"""

import faulthandler
import os
import sys
import time

faulthandler.dump_traceback_later(float(os.environ.get("REPRO_TIMEOUT", "1e9")), exit=True)
WHAT = sys.argv[1] if len(sys.argv) > 1 else "modes"
if WHAT == "modes":
    from jaxhinge import configure_cpu

    configure_cpu()  # as notebook 07

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np


def minimal(calls: int) -> None:
    @jax.jit
    def f(a):  # independent batched LAPACK calls (geev, syevd, potrf, getrf) in one program
        s = a @ jnp.swapaxes(a, -1, -2) + jnp.eye(4)
        return (jnp.linalg.eigvals(jnp.sin(a)), jnp.linalg.eigvalsh(jnp.cos(s)), jnp.linalg.cholesky(s),
                jnp.linalg.solve(s, jnp.tanh(a)), jnp.linalg.eigvalsh(s))

    a = jax.random.normal(jax.random.PRNGKey(0), (6400, 4, 4))
    t0 = time.perf_counter()
    for i in range(calls):
        jax.block_until_ready(f(a + i))
    print(f"minimal: {calls} calls in {time.perf_counter() - t0:.2f} s", flush=True)


def modes(n: int) -> None:
    import jaxhinge as jh

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    wings = jh.load_scenario(os.path.join(root, "tests", "data", "fea", "wings", "wings.toml"))
    kp, km = np.meshgrid(np.linspace(300, 650, n), np.linspace(150, 330, n))
    f_of = jax.vmap(lambda k: jh.modes(jh.apply_parameters(wings, {"wing_pY.k": k[0], "wing_mY.k": k[1]}),
                                       "free").frequency_hz)
    k = np.stack([kp.ravel(), km.ravel()], -1)
    t0 = time.perf_counter()
    f = np.asarray(f_of(k))
    t1 = time.perf_counter()
    np.asarray(f_of(k + 1e-9))
    print(f"modes {n}x{n}: first call {t1 - t0:.2f} s (with compilation), second {time.perf_counter() - t1:.2f} s, "
          f"f[0] = {f[0]}", flush=True)


if __name__ == "__main__":
    if WHAT == "minimal":
        minimal(int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    else:
        modes(int(sys.argv[2]) if len(sys.argv) > 2 else 80)
