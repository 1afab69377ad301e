"""(i) Kernels per RK4 step: the GPU-launch proxy measurable without a GPU.

Counts the kernels XLA runs per RK4 step of the seed scenario (two panels), read from the optimised HLO of the
compiled `simulate` program: every instruction of a computation executed by a loop that is a kernel of its own
(fusion, dot, custom call, reduce, copy, ...), the per-step loop's own plus, for a loop nested inside it (the four
stages), its count times its trip count, and for a `call`, the kernels of the computation it calls. Control and
bookkeeping instructions (parameter, constant, tuple, get-tuple-element, bitcast, the loop counters'
compare/add, which XLA fuses into scalar kernels on CPU but are not data kernels) are listed separately.

On XLA:CPU with `jaxhinge.configure_cpu` (set by `_common.py`) a loop whose body touches under 1 MB is compiled into
one function (`xla_cpu_small_call` in the compiled program): its fusions are then loops inside that function, not
kernel calls, and the per-step kernel calls on CPU are 0 (one call runs the whole integration). The fusion count
stays the GPU-launch proxy; the "CPU kernel calls" rows say which programs are compiled that way.
"""

import re

import jax
import numpy as np
from _common import print_table, quick_flag, row, seed_scenario

NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "conditional", "call",
               "after-all", "partition-id", "replica-id", "opt-barrier", "add-dependency"}


def computations(hlo: str) -> dict[str, list[tuple[str, str]]]:
    """`{computation name: [(opcode, instruction line), ...]}` of an HLO module's text."""
    comps, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if head and not line.startswith(" "):
            name = head.group(1)
            comps[name] = []
            continue
        if line.startswith("}"):
            name = None
            continue
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(", line)
        if name is not None and m:
            comps[name].append((m.group(1), line))
    return comps


def _trip_count(line: str) -> int | None:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
    return int(m.group(1)) if m else None


def kernels_per_iteration(comps, body: str) -> tuple[float, dict[str, int]]:
    """Kernels one iteration of loop `body` runs (nested loops: body count x trip count), and its opcodes."""
    total, ops = 0.0, {}
    for op, line in comps[body]:
        if op in ("while", "call"):  # a nested loop (times its trip count), or a called computation, e.g. a
            # loop XLA:CPU compiled into one function (its kernels counted as if inlined)
            inner = re.search(r"(?:body|to_apply)=%?([\w.\-]+)", line).group(1)
            n = (_trip_count(line) or 1) if op == "while" else 1
            k, inner_ops = kernels_per_iteration(comps, inner)
            total += n * k
            for o, c in inner_ops.items():
                ops[o] = ops.get(o, 0) + n * c
        elif op not in NOT_KERNELS:
            total += 1
            ops[op] = ops.get(op, 0) + 1
    return total, ops


def step_kernels(compiled_text: str, steps: int) -> tuple[float, dict[str, int]]:
    """Kernels per RK4 step: the loop whose trip count is `steps` (the inner scan over the steps of a save
    interval) is the step loop."""
    comps = computations(compiled_text)
    for lines in comps.values():
        for op, line in lines:
            if op == "while" and _trip_count(line) == steps:
                return kernels_per_iteration(comps, re.search(r"body=%?([\w.\-]+)", line).group(1))
    raise RuntimeError(f"no loop of {steps} iterations in the program")


def run(quick=False):
    import jaxhinge as jh

    sc = seed_scenario(t_end=1.0, dt=0.001, save_dt=0.01)  # 10 steps per save interval
    text = jax.jit(jh.simulate_unjitted).lower(sc).compile().as_text()
    n, ops = step_kernels(text, 10)
    members = 64
    batch = jax.tree.map(lambda x: np.broadcast_to(x, (members,) + np.shape(x)), sc)
    btext = jax.jit(jax.vmap(jh.simulate_unjitted)).lower(batch).compile().as_text()
    nb, bops = step_kernels(btext, 10)
    top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:6])
    ng, loops = grad_step_kernels(sc, 10)
    nf, nt = vector_field_kernels(sc)
    hoisted, bhoisted = ("xla_cpu_small_call" in t for t in (text, btext))
    return [
        row("(i) kernels per rk4 step, one trajectory (compiled HLO)", n, None, "kernel", top),
        row("(i) XLA:CPU kernel calls per rk4 step, one trajectory", 0 if hoisted else n, None, "call",
            "integration loop compiled into one function (xla_cpu_small_call)" if hoisted else "one per kernel"),
        row(f"(i) XLA:CPU kernel calls per rk4 step, vmapped batch ({members} members)", 0 if bhoisted else nb,
            None, "call", "loop compiled into one function" if bhoisted else "one per kernel (loop body over 1 MB)"),
        row(f"(i) kernels per rk4 step, vmapped batch ({members} members)", nb, None, "kernel",
            ", ".join(f"{k} {v}" for k, v in sorted(bops.items(), key=lambda kv: -kv[1])[:6])),
        row("(i) kernels per rk4 step, reverse-mode gradient of a trajectory loss", ng, None, "kernel",
            f"step loops: {' + '.join(str(int(x)) for x in loops)} (primal, recomputed forward, backward)"),
        row("(i) kernels of one vector-field evaluation: forward / its reverse-mode transpose", nf, nt, "kernel",
            "reference column: the transpose (VJP w.r.t. state, k and c)"),
    ]


def vector_field_kernels(sc) -> tuple[int, int]:
    """Kernels of one vector-field evaluation compiled on its own (state, k, c as inputs), and of its VJP (the
    backward function of `jax.vjp` w.r.t. them): the transposes a reverse-mode stage runs."""
    import equinox as eqx
    import jax.numpy as jnp

    import jaxhinge as jh
    from jaxhinge._dynamics._backsub import state_derivative_held
    from jaxhinge._simulation._propagate import flat_state, unflat_state

    sp, z = sc.spacecraft, jnp.zeros(3)
    y0 = flat_state(jh.initial_state(sp, sc.initial))

    def vf(y, k, c):
        s = eqx.tree_at(lambda s: (s.panels.k, s.panels.c), sp, (k, c))
        return flat_state(state_derivative_held(s, unflat_state(y, s.panels.count), z, z, z, 0.0))

    args = (y0, sp.panels.k, sp.panels.c)
    out, back = jax.vjp(vf, *args)
    count = lambda text: len(re.findall(r"^\s*(?:ROOT )?%?\S+ = \S+ fusion\(", text, re.MULTILINE))
    return (count(jax.jit(vf).lower(*args).compile().as_text()),
            count(jax.jit(back).lower(out).compile().as_text()))


def grad_step_kernels(sc, steps: int) -> tuple[float, list[float]]:
    """Kernels per RK4 step of `jax.grad` of a trajectory loss w.r.t. all k and c: the sum over the program's
    loops of `steps` iterations (the primal steps, their recomputation inside the checkpointed save intervals,
    and the backward steps)."""
    import equinox as eqx
    import jax.numpy as jnp

    import jaxhinge as jh

    ref = jh.simulate_unjitted(sc).theta * 1.01

    def loss(kc, sc):
        s = eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), sc, kc)
        return jnp.mean((jh.simulate_unjitted(s).theta - ref) ** 2)

    kc = (sc.spacecraft.panels.k, sc.spacecraft.panels.c)
    comps = computations(jax.jit(jax.grad(loss)).lower(kc, sc).compile().as_text())
    loops = [kernels_per_iteration(comps, re.search(r"body=%?([\w.\-]+)", line).group(1))[0]
             for lines in comps.values() for op, line in lines if op == "while" and _trip_count(line) == steps]
    return sum(loops), loops


if __name__ == "__main__":
    print_table(run(quick_flag()), "kernels per step")
