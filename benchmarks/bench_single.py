"""(a) One trajectory of the seed scenario, 10 s, rk4 at 1 ms, after compilation; Basilisk in the same run."""

import jax

from _common import basilisk_time, compile_time, print_table, quick_flag, row, seed_scenario, timeit


def run(quick=False):
    sc = seed_scenario(t_end=10.0, dt=0.001)
    n = 10000
    _, tc, f = compile_time(jax.jit(jax.tree_util.Partial(_sim)), sc)
    t = timeit(lambda: f(sc), repeats=5 if quick else 10)
    tb, setup = basilisk_time(sc, repeats=2 if quick else 5)
    note = "" if tb is not None else "Basilisk not importable"
    if setup is not None:
        note = f"Basilisk setup+init {setup:.3f} s not included"
    return [
        row("(a) seed scenario 10 s rk4 dt=1 ms, one trajectory", t, tb, "s", note),
        row("(a) per step", t / n * 1e6, None if tb is None else tb / n * 1e6, "us"),
    ]


def _sim(sc):
    import jaxhinge as jh

    return jh.simulate_unjitted(sc)


if __name__ == "__main__":
    print_table(run(quick_flag()), "single trajectory")
