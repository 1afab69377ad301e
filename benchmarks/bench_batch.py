"""(b) 1024 members with dispersed k and c (vmap in one compiled program): per-member time vs one Basilisk run;
(c, batched part) compile time of the batched program. Also the same batch sharded over every core as separate
XLA host devices (`--xla_force_host_platform_device_count`, set in a child process: XLA reads it at start-up;
the library sets no global flag), the layout `simulate_batch` uses when several devices are present."""

import json
import os
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import basilisk_time, compile_time, print_table, quick_flag, row, seed_scenario, timeit

import jaxhinge as jh


def dispersed(sc, members, seed=0):
    """`members` copies of `sc` with k and c of every panel drawn uniformly (k +-20 %, c in [0, 5])."""
    rng = np.random.default_rng(seed)
    n = sc.spacecraft.panels.k.shape[0]
    k = np.asarray(sc.spacecraft.panels.k) * rng.uniform(0.8, 1.2, (members, n))
    c = rng.uniform(0.0, 5.0, (members, n))

    def member(k, c):
        return eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), sc, (k, c))

    return jax.vmap(member)(jnp.asarray(k), jnp.asarray(c))


def sharded_time(t_end, members, devices):
    """Per-member time of the batch sharded over `devices` XLA host devices, measured in a child process."""
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
               f"--xla_force_host_platform_device_count={devices}".strip())
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--sharded-child", str(t_end), str(members)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _sharded_child(t_end, members):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    sc = seed_scenario(t_end=t_end, dt=0.001)
    devices = jax.local_devices()
    batch = jax.device_put(dispersed(sc, members), NamedSharding(Mesh(np.array(devices), ("b",)), PartitionSpec("b")))
    f = jax.jit(jax.vmap(jh.simulate_unjitted)).lower(batch).compile()
    t = timeit(lambda: f(batch).theta, repeats=3)
    print(json.dumps({"per_member": t / members, "devices": len(devices),
                      "success": bool(np.all(np.asarray(f(batch).success)))}))


def step_flops(sc) -> float:
    """Floating-point operations of one rk4 step of `sc` (four vector-field evaluations and the update), by XLA's
    cost analysis before fusion (each arithmetic operation counted once; a fused program may repeat some). The
    analysis counts a loop body once, so the step (its four stages are a loop) gets three more evaluations."""
    from jaxhinge._dynamics._backsub import state_derivative_held
    from jaxhinge._simulation._propagate import flat_state, step as rk4_step, unflat_state

    y0 = flat_state(jh.initial_state(sc.spacecraft, sc.initial))
    n = sc.spacecraft.panels.count
    loads = (jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), jnp.zeros(n))
    step = jax.jit(rk4_step).lower(sc.spacecraft, y0, 1e-3, loads).cost_analysis()["flops"]
    vf = jax.jit(lambda s, y: state_derivative_held(s, unflat_state(y, s.panels.count), *loads)).lower(sc.spacecraft, y0)
    return float(step + 3 * vf.cost_analysis()["flops"])


def blas_rate(n=2000, repeats=3) -> float:
    """float64 flop/s of a matrix product (NumPy's BLAS, all cores): what this machine's arithmetic reaches in
    practice, the reference for the batch's fraction of peak."""
    a = np.random.default_rng(0).random((n, n))
    return 2.0 * n**3 / timeit(lambda: a @ a, repeats=repeats)


def run(quick=False, members=1024, bsk_single=None):
    t_end = 2.0 if quick else 10.0
    sc = seed_scenario(t_end=t_end, dt=0.001)
    batch = dispersed(sc, members)
    _, tc, f = compile_time(jax.vmap(jh.simulate_unjitted), batch)
    t = timeit(lambda: f(batch).theta, repeats=2 if quick else 3)
    per = t / members
    if bsk_single is None:
        bsk_single, _ = basilisk_time(sc, repeats=2 if quick else 3)
    elif t_end != 10.0:
        bsk_single = bsk_single * t_end / 10.0
    ok = bool(np.all(np.asarray(f(batch).success)))
    cores = os.cpu_count() or 1
    sh = sharded_time(t_end, members, cores)
    steps = round(t_end / 1e-3)
    flops, blas = step_flops(sc), blas_rate()
    rate = lambda per_member: flops * steps / per_member  # flop/s of the batch
    need = None if bsk_single is None else flops * steps * 200 / bsk_single  # for 1/200 of a Basilisk run
    return [
        row(f"(b) {members} members k,c dispersed, {t_end:g} s rk4: per member", per, bsk_single, "s",
            f"batch total {t:.2f} s, all success={ok}; {per / (t_end / 1e-3) * 1e6:.3f} us per member-step"),
        row(f"(b) same, sharded over {sh['devices']} host devices (one per core): per member", sh["per_member"],
            bsk_single, "s", f"{sh['per_member'] / (t_end / 1e-3) * 1e6:.3f} us per member-step, "
            f"all success={sh['success']}"),
        row("(c) compile, batched (vmap) simulate", tc, None, "s"),
        row("(b) flops per rk4 step (XLA cost analysis, before fusion)", flops, None, "flop",
            "four vector-field evaluations and the update"),
        row("(b) arithmetic rate, batch / float64 matrix product (NumPy BLAS, all cores)", rate(per) / 1e9, blas / 1e9,
            "GFLOP/s", f"{100 * rate(per) / blas:.1f} % of the BLAS rate; sharded {rate(sh['per_member']) / 1e9:.2f} "
            f"GFLOP/s ({100 * rate(sh['per_member']) / blas:.1f} %)"
            + ("" if need is None else f"; 1/200 of a Basilisk run needs {need / 1e9:.1f} GFLOP/s "
               f"({100 * need / blas:.0f} % of the BLAS rate)")),
    ]


if __name__ == "__main__":
    if "--sharded-child" in sys.argv:
        i = sys.argv.index("--sharded-child")
        _sharded_child(float(sys.argv[i + 1]), int(sys.argv[i + 2]))
    else:
        print_table(run(quick_flag()), "batch")
