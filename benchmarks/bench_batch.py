"""(b) 1024 members with dispersed k and c (vmap in one compiled program): per-member time vs one Basilisk run;
(c, batched part) compile time of the batched program."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxhinge as jh
from _common import basilisk_time, compile_time, print_table, quick_flag, row, seed_scenario, timeit


def dispersed(sc, members, seed=0):
    """`members` copies of `sc` with k and c of every panel drawn uniformly (k +-20 %, c in [0, 5])."""
    rng = np.random.default_rng(seed)
    n = sc.spacecraft.panels.k.shape[0]
    k = np.asarray(sc.spacecraft.panels.k) * rng.uniform(0.8, 1.2, (members, n))
    c = rng.uniform(0.0, 5.0, (members, n))

    def member(k, c):
        return eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), sc, (k, c))

    return jax.vmap(member)(jnp.asarray(k), jnp.asarray(c))


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
    return [
        row(f"(b) {members} members k,c dispersed, {t_end:g} s rk4: per member", per, bsk_single, "s",
            f"batch total {t:.2f} s, all success={ok}"),
        row("(c) compile, batched (vmap) simulate", tc, None, "s"),
    ]


if __name__ == "__main__":
    print_table(run(quick_flag()), "batch")
