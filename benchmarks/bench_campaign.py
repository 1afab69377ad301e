"""(m) Campaigns at scale (issue 38): the bundled sweep (`jaxhinge/examples/sweep.toml`: two panels, four
dispersions) with t_end = 0.5 s, the summary metrics for every member and the histories of every 1000th, run by
`jh.run_campaign` into a Zarr store, each size in its own process (peak resident memory, `ru_maxrss`):

- peak memory at 5 000 and 50 000 members (the campaign holds one chunk: the two should be within 1.25x);
- per member against `jh.simulate_batch` of the same chunks (what the store, the metrics and the statistics
  cost on top of the simulation): the campaign's first chunks, up to 20 000 members, one call per chunk, draws
  excluded (before 2026-11-28: one timing of one chunk);
- `--members N` runs one size (e.g. 1 000 000), `--chunk C` sets the chunk size (default the SWEEP's 256, or on a
  GPU what its memory holds).

    python benchmarks/bench_campaign.py [--quick] [--members 1000000] [--chunk 65536] [--out FILE.json]

On a GPU machine the same command measures the GPU (one prepared command, 1 000 to 1 000 000 members:
`--members 1000,10000,100000,1000000`). Basilisk's per-member time is that of one seed-scenario run of the same
length (`_common.basilisk_time`), where Basilisk is installed.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = os.path.join(ROOT, "jaxhinge", "examples", "sweep.toml")
SCENARIO = os.path.join(ROOT, "jaxhinge", "examples", "two_panel.toml")
T_END = 0.5
REF_MEMBERS = 20_000  # simulate_batch (the reference) runs the campaign's first chunks, up to this many members


def _write_sweep(folder: str, members: int, chunk: int | None) -> str:
    """The bundled sweep at `members`, t_end = 0.5 s, every 1000th history kept, in `folder`."""
    with open(SCENARIO) as fh:
        text = fh.read().replace("t_end = 2.5 ", f"t_end = {T_END} ")
    assert f"t_end = {T_END} " in text
    with open(os.path.join(folder, "two_panel.toml"), "w") as fh:
        fh.write(text)
    with open(SWEEP) as fh:
        sweep = fh.read().replace("members = 64", f"members = {members}")
    if chunk:
        sweep = sweep.replace("chunk_size = 256", f"chunk_size = {chunk}")
    sweep = sweep.replace("[output]", "[retain]\nevery = 1000\n\n[output]")
    path = os.path.join(folder, "SWEEP.toml")
    with open(path, "w") as fh:
        fh.write(sweep)
    return path


def child(members: int, chunk: int | None) -> dict:
    """One campaign in this process: wall time, peak memory, per-member time against `simulate_batch` of one
    chunk of the same members."""
    import jax

    from jaxhinge import configure_cpu

    if not os.environ.get("JAXHINGE_BENCH_XLA_DEFAULTS"):  # as _common.py: XLA's defaults on request
        configure_cpu()
    jax.config.update("jax_enable_x64", True)
    import jaxhinge as jh

    with tempfile.TemporaryDirectory() as d:
        path = _write_sweep(d, members, chunk)
        size = min(jh.load_sweep(path).chunk_size, members)
        with tempfile.TemporaryDirectory() as w:  # compile first: one chunk of the same size (the same program)
            t0 = time.perf_counter()
            jh.run_campaign(_write_sweep(w, size, size))
            first = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = jh.run_campaign(path)
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # kB -> MB (Linux): the campaign's peak
        sweep = jh.load_sweep(path)
        p = jh.sample_dispersions(sweep.scenario, sweep.dispersions, members, sweep.seed, indices=range(size))
        jh.simulate_batch(sweep.scenario, p, chunk_size=size).theta.block_until_ready()  # compiled
        # the reference: simulate_batch of the campaign's first chunks (all of them up to REF_MEMBERS), one call per
        # chunk (its trajectory to NumPy, then dropped), the draws made before the clock starts
        ref = members if members <= REF_MEMBERS else max(size, REF_MEMBERS // size * size)
        draws = [jh.sample_dispersions(sweep.scenario, sweep.dispersions, members, sweep.seed,
                                       indices=range(s, min(s + size, ref))) for s in range(0, ref, size)]
        t1 = time.perf_counter()
        for p in draws:
            jh.simulate_batch(sweep.scenario, p, chunk_size=size).theta.block_until_ready()
        batch_per_member = (time.perf_counter() - t1) / ref
        del draws
        store_mb = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(res.store) for f in fs) / 1e6
    return {"members": members, "chunk": size, "wall_s": wall, "first_chunk_with_compile_s": first, "campaign_per_member_s": res.wall_s / members,
            "batch_per_member_s": batch_per_member, "batch_members": ref,
            "load_average": os.getloadavg(), "peak_rss_mb": rss, "store_mb": store_mb,
            "failed": int((~res.success).sum()), "device": jax.devices()[0].device_kind}


def measure(members: int, chunk: int | None) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(members)]
                         + (["--chunk", str(chunk)] if chunk else []), capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", type=int)
    ap.add_argument("--members", default=None)
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.chunk)))
        return 0
    sizes = [int(m) for m in a.members.split(",")] if a.members else ([1000, 5000] if a.quick else [5000, 50000])
    rows = []
    for m in sizes:
        r = measure(m, a.chunk)
        r["overhead"] = r["campaign_per_member_s"] / r["batch_per_member_s"] - 1.0
        rows.append(r)
        print(f"{m:>9} members ({r['device']}, chunk {r['chunk']}): {r['wall_s']:.1f} s wall, "
              f"{r['campaign_per_member_s'] * 1e6:.1f} us per member in the campaign vs "
              f"{r['batch_per_member_s'] * 1e6:.1f} us in simulate_batch of {r['batch_members']} "
              f"({100 * r['overhead']:+.1f} %), load average {r['load_average'][0]:.2f}, "
              f"peak memory {r['peak_rss_mb']:.0f} MB, store {r['store_mb']:.1f} MB", flush=True)
    if len(rows) > 1:
        print(f"peak memory {rows[-1]['members']} / {rows[0]['members']} members: "
              f"{rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f}x")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
