"""Multi-host batches with `jax.distributed`: two local processes (coordinator on localhost), each running
half of a dispersed batch, agree with one single-process run of the whole batch."""

import os
import socket
import subprocess
import sys
import textwrap

import _seed
import jax
import numpy as np
import pytest

import jaxhinge as jh

SIM = jh.SimulationConfig(t_end=0.2, save_dt=0.05, integrator="rk4", dt=0.01)
MEMBERS = 4

WORKER = textwrap.dedent(
    """
    import os, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    addr, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    jax.distributed.initialize(coordinator_address=addr, num_processes=2, process_id=pid,
                               initialization_timeout=60)
    sys.path.insert(0, os.environ["JH_TESTS"])
    import numpy as np
    import jaxhinge as jh
    from test_distributed import members
    assert jax.process_count() == 2 and jax.process_index() == pid
    scenario, params = members()
    mine = np.array_split(np.arange(len(next(iter(params.values())))), jax.process_count())[pid]
    traj = jh.simulate_batch(scenario, {k: v[mine] for k, v in params.items()})
    np.savez(out, members=mine, theta=np.asarray(traj.theta), sigma_BN=np.asarray(traj.sigma_BN),
             success=np.asarray(traj.success))
    jax.distributed.shutdown()
    """
)


def members():
    scenario = _seed.damping(sim=SIM)
    params = jh.sample_dispersions(
        scenario,
        [
            {"param": "panel1.k", "dist": "uniform", "low": 80.0, "high": 120.0},
            {"param": "panel2.c", "dist": "uniform", "low": 1.0, "high": 9.0},
        ],
        MEMBERS,
        3,
    )
    return scenario, params


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_split_a_batch_like_one(tmp_path):
    addr = f"localhost:{_free_port()}"
    env = dict(os.environ, JH_TESTS=os.path.dirname(__file__), JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    outs = [tmp_path / f"p{i}.npz" for i in range(2)]
    # the single-process reference first, run the same way (two halves: the same compiled program, which the
    # workers then find in the persistent compilation cache)
    scenario, params = members()
    halves = np.array_split(np.arange(MEMBERS), 2)
    ref = [jh.simulate_batch(scenario, {k: v[h] for k, v in params.items()}) for h in halves]
    ref = jax.tree.map(lambda *x: np.concatenate(x), *ref)
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, addr, str(i), str(outs[i])], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)
    ]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    parts = [np.load(o) for o in outs]
    idx = np.concatenate([q["members"] for q in parts])
    np.testing.assert_array_equal(np.sort(idx), np.arange(MEMBERS))  # every member ran exactly once
    for name in ("theta", "sigma_BN"):
        got = np.concatenate([q[name] for q in parts])
        np.testing.assert_allclose(got, np.asarray(getattr(ref, name))[idx], rtol=0, atol=1e-13)
    assert np.all(np.concatenate([q["success"] for q in parts]))
    # the dispersion really changed the members (the comparison is not between identical runs)
    assert np.ptp(np.asarray(ref.theta)[:, -1, 0]) > 1e-6
