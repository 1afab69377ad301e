"""(c) compile time of one simulate (single); (d) reverse-mode gradient of a trajectory loss w.r.t. all k and c,
relative to one forward run (both compiled, seed scenario 10 s, rk4 at 1 ms); by default (each save interval
recomputed on the way back) and with every step kept (`RecursiveCheckpointAdjoint(checkpoints >= steps)`)."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from _common import compile_time, print_table, quick_flag, row, seed_scenario, timeit

import jaxhinge as jh


def run(quick=False):
    sc = seed_scenario(t_end=2.0 if quick else 10.0, dt=0.001)
    tl, tc, fwd = compile_time(jh.simulate_unjitted, sc)
    theta_ref = fwd(sc).theta * 1.01  # a target trajectory (any fixed data will do)

    def loss(kc, sc, adjoint=None):
        k, c = kc
        s = eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), sc, (k, c))
        return jnp.mean((jh.simulate_unjitted(s, adjoint).theta - theta_ref) ** 2)

    keep = diffrax.RecursiveCheckpointAdjoint(checkpoints=round(sc.simulation.t_end / sc.simulation.dt))

    kc = (sc.spacecraft.panels.k, sc.spacecraft.panels.c)
    gl, gc, grad = compile_time(jax.grad(loss), kc, sc)
    _, _, vg = compile_time(jax.value_and_grad(loss), kc, sc)
    _, _, vg_keep = compile_time(jax.value_and_grad(lambda kc, sc: loss(kc, sc, keep)), kc, sc)
    t_fwd = timeit(lambda: fwd(sc).theta, repeats=5)
    t_grad = timeit(lambda: grad(kc, sc), repeats=5)
    t_vg = timeit(lambda: vg(kc, sc), repeats=5)
    t_keep = timeit(lambda: vg_keep(kc, sc), repeats=5)
    mb = vg_keep.memory_analysis().temp_size_in_bytes / 1e6, vg.memory_analysis().temp_size_in_bytes / 1e6
    return [
        row("(c) compile simulate, single (trace+lower excluded)", tc, None, "s", f"trace+lower {tl:.2f} s"),
        row("(c) compile grad of trajectory loss", gc, None, "s", f"trace+lower {gl:.2f} s"),
        row("(d) forward run", t_fwd, None, "s"),
        row("(d) reverse-mode grad wrt all k,c / forward", t_grad / t_fwd, None, "x", f"grad {t_grad:.3f} s"),
        row("(d) value_and_grad / forward", t_vg / t_fwd, None, "x", f"{t_vg:.3f} s; temporaries {mb[1]:.2f} MB"),
        row("(d) value_and_grad / forward, every step kept (checkpoints >= steps)", t_keep / t_fwd, None, "x",
            f"{t_keep:.3f} s; temporaries {mb[0]:.2f} MB"),
    ]


if __name__ == "__main__":
    print_table(run(quick_flag()), "compile and gradient")
