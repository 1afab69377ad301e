"""(g) XLA's CPU options, A/B/C: what the CLI, the tests and the other benchmarks use (`jaxhinge.configure_cpu`:
the elemental emitters `--xla_cpu_use_fusion_emitters=false` and small loops compiled into one function,
`xla_cpu_small_while_loop_byte_threshold=1000000`), the elemental emitters alone (threshold 0), and XLA's
defaults (MLIR fusion emitters, threshold 1024 bytes). Each setting runs in its own processes (XLA reads its flags
when JAX starts its backend), alternating, `--repeats` processes each (2 by default); each process is pinned to
one core where `taskset` exists (the single-trajectory timing is bimodal otherwise, see RESULTS.md). Measured:
compile time of `simulate` (seed scenario, 10 s rk4 at 1 ms), of the reverse-mode `value_and_grad` of a
trajectory loss, of a vmapped 256-member batch and of `simulate` of the folding wing (singles and chains,
`examples/folding_wing.toml`), and their run times; the run time of the seed scenario with the default adaptive
integrator (`tsit5`, equinox's runtime checks as set in the environment). Prints the minimum over processes of each.

    python benchmarks/bench_codegen.py [--quick] [--repeats N]
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = {  # column name: XLA_FLAGS
    "configure_cpu": "--xla_cpu_use_fusion_emitters=false "
                     "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000",
    "elemental only": "--xla_cpu_use_fusion_emitters=false "
                      "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=0",
    # XLA's defaults written out (configure_cpu, run by _common.py in the child, keeps a choice already made)
    "XLA defaults": "--xla_cpu_use_fusion_emitters=true "
                    "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024",
}


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

    wing = jh.load_scenario(jh.example_path("folding_wing")).with_simulation(
        t_end=2.0 if quick else 10.0, dt=0.001, save_dt=0.01, integrator="rk4")  # singles and chains
    t0 = time.perf_counter()
    chains = jax.jit(jh.simulate_unjitted).lower(wing).compile()
    c_chains = time.perf_counter() - t0
    adaptive = seed_scenario(t_end=2.0 if quick else 10.0).with_simulation(integrator="tsit5")  # the default
    tsit5 = jax.jit(jh.simulate_unjitted).lower(adaptive).compile()
    return {
        "compile simulate [s]": c_fwd,
        "compile simulate, folding wing [s]": c_chains,
        "compile value_and_grad [s]": c_grad,
        "compile vmapped batch of 256 [s]": c_batch,
        "run simulate [ms]": 1e3 * timeit(lambda: fwd(sc).theta, repeats=10),
        "run value_and_grad [ms]": 1e3 * timeit(lambda: vg(kc, sc), repeats=4),
        "run batch [us per member-step]": 1e6 * timeit(lambda: bat(batch).theta, repeats=4) / (1000 * M),
        "run folding wing [us per step]": 1e6 * timeit(lambda: chains(wing).theta, repeats=5)
        / round(wing.simulation.t_end / 0.001),
        "run simulate, tsit5 [ms]": 1e3 * timeit(lambda: tsit5(adaptive).theta, repeats=5),
    }


def measure_all(quick=False, repeats=2):
    """{(measure, setting): the minimum over `repeats` processes}, each setting in its own processes."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    best = {}
    for _ in range(repeats):
        for name, flags in SETTINGS.items():
            env = {k: v for k, v in os.environ.items() if k != "JAXHINGE_BENCH_XLA_DEFAULTS"}
            env["XLA_FLAGS"] = flags
            out = subprocess.run([*pin, sys.executable, os.path.abspath(__file__), "--child"]
                                 + (["--quick"] if quick else []), env=env, cwd=HERE, capture_output=True,
                                 text=True, check=True).stdout
            measured = json.loads(out.strip().splitlines()[-1])
            for k, v in measured.items():
                best[(k, name)] = min(best.get((k, name), float("inf")), v)
    return best


def run(quick=False, repeats=2):
    """(g) rows for run_all.py: `configure_cpu` against XLA's defaults (ratio > 1: configure_cpu is faster), the
    elemental emitters alone in the note."""
    from _common import row

    best = measure_all(quick, repeats)
    rows = []
    for k in dict.fromkeys(k for k, _ in best):
        name, unit = k.rsplit(" [", 1)
        rows.append(row(f"(g) {name}", best[(k, "configure_cpu")], best[(k, "XLA defaults")], unit.rstrip("]"),
                        f"elemental only (threshold 0): {best[(k, 'elemental only')]:.4g}; minimum of {repeats} "
                        "processes each"))
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(measure("--quick" in argv)))
        return
    quick = "--quick" in argv
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 2
    best = measure_all(quick, repeats)
    names = list(SETTINGS)
    print(f"{'measure':36s}" + "".join(f"{n:>18s}" for n in names))
    for k in dict.fromkeys(k for k, _ in best):
        print(f"{k:36s}" + "".join(f"{best[(k, n)]:18.3f}" for n in names))
    for n, flags in SETTINGS.items():
        print(f"{n}: XLA_FLAGS={flags}")


if __name__ == "__main__":
    main()
