"""(c') XLA's CPU code generators, A/B: the elemental emitters (`--xla_cpu_use_fusion_emitters=false`, what the
CLI, the tests and the other benchmarks use; `jaxhinge._cli._cpu_codegen`) against XLA's default MLIR fusion
emitters. Each setting runs in its own processes (the flag is read when JAX starts its backend), alternating,
`--repeats` processes each (2 by default); each process is pinned to one core where `taskset` exists (the
single-trajectory timing is bimodal otherwise, see RESULTS.md). Measured: compile time of `simulate` (seed
scenario, 10 s rk4 at 1 ms), of the reverse-mode `value_and_grad` of a trajectory loss and of a vmapped 256-member
batch, and their run times. Prints the minimum over processes of each.

    python benchmarks/bench_codegen.py [--quick] [--repeats N]
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FLAG = "--xla_cpu_use_fusion_emitters"


def measure(quick=False):
    """One process's numbers (run by `main` in a child process with XLA_FLAGS set)."""
    import time

    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    from _common import seed_scenario, timeit

    import jaxhinge as jh

    sc = seed_scenario(t_end=2.0 if quick else 10.0)
    t0 = time.perf_counter()
    fwd = jax.jit(jh.simulate_unjitted).lower(sc).compile()
    c_fwd = time.perf_counter() - t0
    ref = fwd(sc).theta * 1.01

    def loss(kc, sc):
        s = eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), sc, kc)
        return jnp.mean((jh.simulate_unjitted(s).theta - ref) ** 2)

    kc = (sc.spacecraft.panels.k, sc.spacecraft.panels.c)
    t0 = time.perf_counter()
    vg = jax.jit(jax.value_and_grad(loss)).lower(kc, sc).compile()
    c_grad = time.perf_counter() - t0
    M = 256
    batch = jax.tree.map(lambda x: np.broadcast_to(x, (M,) + np.shape(x)).copy(), seed_scenario(t_end=1.0))
    t0 = time.perf_counter()
    bat = jax.jit(jax.vmap(jh.simulate_unjitted)).lower(batch).compile()
    c_batch = time.perf_counter() - t0
    return {
        "compile simulate [s]": c_fwd,
        "compile value_and_grad [s]": c_grad,
        "compile vmapped batch of 256 [s]": c_batch,
        "run simulate [ms]": 1e3 * timeit(lambda: fwd(sc).theta, repeats=10),
        "run value_and_grad [ms]": 1e3 * timeit(lambda: vg(kc, sc), repeats=4),
        "run batch [us per member-step]": 1e6 * timeit(lambda: bat(batch).theta, repeats=4) / (1000 * M),
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(measure("--quick" in argv)))
        return
    quick = "--quick" in argv
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 2
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    best = {}
    for _ in range(repeats):
        for value in ("false", "true"):
            env = {k: v for k, v in os.environ.items() if k != "JAXHINGE_BENCH_XLA_DEFAULTS"}
            env["XLA_FLAGS"] = f"{FLAG}={value}"
            out = subprocess.run([*pin, sys.executable, os.path.abspath(__file__), "--child"]
                                 + (["--quick"] if quick else []), env=env, cwd=HERE, capture_output=True,
                                 text=True, check=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            for k, v in row.items():
                best[(k, value)] = min(best.get((k, value), float("inf")), v)
    print(f"{'measure':36s} {'elemental (=false)':>20s} {'default (=true)':>16s} {'default / elemental':>20s}")
    for k in dict.fromkeys(k for k, _ in best):
        a, b = best[(k, "false")], best[(k, "true")]
        print(f"{k:36s} {a:20.3f} {b:16.3f} {b / a:20.2f}")


if __name__ == "__main__":
    main()
