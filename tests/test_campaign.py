"""Campaigns (`jaxhinge sweep`, `jh.run_campaign`): the chunked Zarr store against the in-memory batch
(`simulate_batch`, bit for bit), its labelled reading (`open_campaign`), and that nothing is lost: a process
SIGKILLed in the middle of writing a chunk leaves a store that `--resume` completes, equal bit for bit to an
uninterrupted run's; a resume after any input file (SWEEP, scenario, `[inputs]` CSV) or jaxhinge's source changed
is refused, the store untouched. Bad `[metrics]`, `--members` and `--scheduler` are one-line errors that write
nothing; failed members are left out of the summary's statistics as NumPy's NaN-aware statistics say; the store's
on-disk format is pinned. On Dask workers (`--workers`, `--scheduler`) the
store equals the in-process one bit for bit, also when a worker is killed in the middle of writing a chunk. The
percentile bands' quantile sketch (of the deviation from the nominal run) is within its stated bound of NumPy's
exact percentiles."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._io._campaign_format import HISTORIES

EXAMPLES = os.path.dirname(str(jh.example_path("sweep")))


def _sweep(tmp_path, members=10, chunk_size=4, seed=3, inputs=False):
    """A short SWEEP file (0.2 s runs of the bundled two-panel example) with three chunks, the last padded;
    `inputs`: the scenario reads a hub torque record, `inputs.csv` (`[inputs]`)."""
    sc = tmp_path / "two_panel.toml"
    with open(os.path.join(EXAMPLES, "two_panel.toml")) as fh:
        text = fh.read().replace("t_end = 2.5 ", "t_end = 0.2 ")
    assert "t_end = 0.2" in text
    if inputs:
        (tmp_path / "inputs.csv").write_text("t,extTorquePntB_B_3\n0.0,0.0\n0.1,0.002\n0.2,0.0\n")
        text += '\n[inputs]\ncsv = "inputs.csv"\n'
    sc.write_text(text)
    path = tmp_path / "SWEEP.toml"
    path.write_text(textwrap.dedent(f"""\
        scenario = "two_panel.toml"
        members = {members}
        seed = {seed}
        chunk_size = {chunk_size}
        [[dispersions]]
        param = "p0.k"
        dist = "uniform"
        low = 80.0
        high = 120.0
        [[dispersions]]
        param = "hub.omega_BN_BInit"
        dist = "normal"
        std = [0.01, 0.01, 0.01]
        [output]
        dir = "out"
        """))
    return path


def _arrays(store_path):
    import zarr

    g = zarr.open_group(str(store_path), mode="r")
    return {name: np.asarray(a[...]) for name, a in g.arrays()}


def test_store_matches_the_in_memory_batch_and_reads_as_labelled_data(tmp_path):
    """Every stored member equals `simulate_batch` of the same draws bit for bit (padding the last chunk changes
    nothing), the draws equal `sample_dispersions`', and `open_campaign` labels the data with units and
    Basilisk names."""
    path = _sweep(tmp_path)
    res = jh.run_campaign(path)
    sweep = jh.load_sweep(path)
    params = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    ref = jh.simulate_batch(sweep.scenario, params, chunk_size=4)
    assert (res.members, res.chunks, res.chunks_run) == (10, 3, 3)
    stored = _arrays(res.store)
    for name in HISTORIES:
        np.testing.assert_array_equal(stored[name], np.asarray(getattr(ref, name)))
    np.testing.assert_array_equal(stored["success"], np.asarray(ref.success))
    for k, v in params.items():
        np.testing.assert_array_equal(stored[f"param_{k}"], v)
    assert stored["chunk_done"].all()
    ds = jh.open_campaign(tmp_path / "out")
    assert ds["theta"].dims == ("member", "time", "panel") and list(ds["panel"].values) == ["p0", "p1"]
    assert ds["omega_BN_B"].attrs["units"] == "rad/s" and ds["sigma_BN"].attrs["basilisk"] == "scStateOutMsg.sigma_BN"
    assert ds["param_p0.k"].attrs["units"] == "N m/rad"
    np.testing.assert_array_equal(ds["time"].values, np.asarray(ref.t)[0])
    assert sorted(os.listdir(tmp_path / "out")) == ["campaign.zarr", "envelopes.png", "histograms.png", "summary.json"]


_KILLER = """
import os, signal, sys
import jax
import jaxhinge as jh

jax.config.update("jax_enable_x64", True)
from jaxhinge._io import _campaign_store

write = _campaign_store.CampaignStore.write_chunk

def torn(self, c, params, success, *rest):
    if c == 2:  # chunk 2: its parameters and success written, then killed before its histories and flag
        for name, v in params.items():
            self.group[f"param_{name}"][c * self.chunk_size:c * self.chunk_size + len(v)] = v
        self.group["success"][8:10] = success
        os.kill(os.getpid(), signal.SIGKILL)
    write(self, c, params, success, *rest)

_campaign_store.CampaignStore.write_chunk = torn
from jaxhinge._jobs import _campaign, _campaign_sketch

_campaign.CHECKPOINT_S = 0.0  # the sketch's checkpoint after every chunk ... but only the first one written:
save = _campaign_sketch.SketchMerge.save  # it lags the store (chunk 0 merged, chunks 0 and 1 done)

def once(self):
    if not os.path.exists(_campaign_store.checkpoint_path(self.store.path)):
        save(self)

_campaign_sketch.SketchMerge.save = once
jh.run_campaign(sys.argv[1])
"""


def test_sigkill_while_writing_then_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch):
    """SIGKILL in the middle of chunk 2's writes: chunks 0 and 1 are done, chunk 2 half written (no flag), and
    the sketch's checkpoint lags the store (chunk 0 merged only). `jaxhinge sweep --resume` writes only chunk
    2, computes chunk 1's sketch again from the checkpoint on (without writing it), and the store equals an
    uninterrupted run's bit for bit (arrays, the sketch's counts and the draws archived in it)."""
    from jaxhinge._cli import main
    from jaxhinge._io._campaign_store import CampaignStore

    path = _sweep(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", _KILLER, str(path)], env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr
    store = tmp_path / "out" / "campaign.zarr"
    half = _arrays(store)
    assert half["chunk_done"].tolist() == [True, True, False]
    assert np.isnan(half["theta"][8:]).all() and half["success"][8:].any()  # the torn chunk: some arrays only
    assert not half["sketch_done"] and not half["sketch_theta"].any()  # the sketch: in the checkpoint only
    checkpoint = tmp_path / "out" / "campaign.sketch.npz"
    with np.load(checkpoint) as f:
        assert f["merged"].tolist() == [True, False, False] and f["sketch_theta"].sum() == 4 * 21 * 2
    written = []
    write = CampaignStore.write_chunk
    monkeypatch.setattr(CampaignStore, "write_chunk", lambda self, c, *a: (written.append(c), write(self, c, *a)))
    assert main(["sweep", str(path), "--resume"]) == 0
    assert written == [2] and not checkpoint.exists()
    resumed = _arrays(store)
    assert resumed["sketch_done"] and resumed["sketch_theta"].sum() == resumed["success"].sum() * 21 * 2
    clean = tmp_path / "clean"
    jh.run_campaign(path, out_dir=str(clean))
    whole = _arrays(clean / "campaign.zarr")
    assert resumed.keys() == whole.keys()
    for name in whole:
        np.testing.assert_array_equal(resumed[name], whole[name], err_msg=name)


def test_an_error_in_the_next_chunks_compute_leaves_every_chunk_before_it_done(tmp_path, monkeypatch,
                                                                            in_process_store):
    """In-process, chunk k+1 is computed on a helper thread while chunk k is reduced and written: an error in
    chunk 2's compute (raised on that thread, while chunk 1 is written) stops the campaign once chunk 1 is written
    whole, the progress called in chunk order; `resume` completes the store, equal bit for bit to an
    uninterrupted run's (the one of the Dask tests, the same SWEEP file)."""
    import threading

    from jaxhinge._jobs import _campaign_chunks

    path = _sweep(tmp_path)
    compute, threads = _campaign_chunks.compute_chunk, set()

    def failing(sweep, members, size, **kw):
        threads.add(threading.current_thread().name)
        if members.start == 8:
            raise RuntimeError("chunk 2 failed")
        return compute(sweep, members, size, **kw)

    monkeypatch.setattr(_campaign_chunks, "compute_chunk", failing)
    seen = []
    with pytest.raises(RuntimeError, match="chunk 2 failed"):
        jh.run_campaign(path, progress=lambda done, failed: seen.append(done))
    assert seen == [4, 8] and threads == {"jaxhinge-chunk_0"}
    store = tmp_path / "out" / "campaign.zarr"
    assert _arrays(store)["chunk_done"].tolist() == [True, True, False]
    monkeypatch.setattr(_campaign_chunks, "compute_chunk", compute)
    assert jh.run_campaign(path, resume=True).chunks_run == 1
    resumed = _arrays(store)
    assert resumed.keys() == in_process_store.keys()
    for name in resumed:
        np.testing.assert_array_equal(resumed[name], in_process_store[name], err_msg=name)


def test_resume_is_refused_when_the_sweep_changed_or_nothing_was_started(tmp_path, capsys):
    """`--resume` with no store, after the SWEEP file changed (its draws would differ), or of a store an older
    jaxhinge made without the percentile sketch or without its centre: one line, exit 2, before any compute; the
    store is left as it was."""
    from jaxhinge._cli import main

    path = _sweep(tmp_path)
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume:" in err and "does not exist: nothing to resume" in err and err.count("\n") == 1
    jh.run_campaign(path)
    before = _arrays(tmp_path / "out" / "campaign.zarr")
    path.write_text(path.read_text().replace("seed = 3", "seed = 4"))
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "SWEEP.toml changed since the campaign" in err and err.count("\n") == 1
    after = _arrays(tmp_path / "out" / "campaign.zarr")
    assert all(np.array_equal(before[k], after[k], equal_nan=before[k].dtype.kind == "f") for k in before)
    path.write_text(path.read_text().replace("seed = 4", "seed = 3"))
    import zarr

    g = zarr.open_group(str(tmp_path / "out" / "campaign.zarr"), mode="r+")
    del g.attrs["sketch_centre"]  # (a store of the sketch without a centre: its counts are of other values)
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "was made by a jaxhinge whose percentile sketch has no centre" in err and err.count("\n") == 1
    del g.attrs["bands"]  # (an older store)
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "was made by a jaxhinge without the percentile sketch" in err and err.count("\n") == 1


def _files(folder) -> dict[str, tuple[int, bytes]]:
    """`{path: (mtime_ns, bytes)}` of every file under `folder` (what a refused command must leave as it was)."""
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            p = os.path.join(root, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = (os.stat(p).st_mtime_ns, fh.read())
    return out


def test_resume_is_refused_when_an_input_file_or_jaxhinge_changed(tmp_path, capsys, monkeypatch):
    """An interrupted campaign, then its scenario's `[inputs]` CSV edited, or jaxhinge's source changed (another
    version, an edit): `--resume` would fill the store with members of two input records (or two codes), so it
    is refused: one line naming the file (or jaxhinge's source), exit 2, every file of the output folder left as
    it was (names, bytes, modification times) and nothing new written. Restored, the resume completes."""
    from jaxhinge._cli import main
    from jaxhinge._runtime import _programs

    path = _sweep(tmp_path, members=8, chunk_size=4, inputs=True)
    store = tmp_path / "out" / "campaign.zarr"
    with pytest.raises(KeyboardInterrupt):  # (interrupted after its first chunk, as by Ctrl-C)
        jh.run_campaign(path, progress=lambda done, failed: (_ for _ in ()).throw(KeyboardInterrupt()))
    import zarr

    attrs = dict(zarr.open_group(str(store), mode="r").attrs)
    assert set(attrs["input_files"]) == {"SWEEP.toml", "two_panel.toml", "inputs.csv"}
    assert attrs["jaxhinge_source"] == _programs.source_digest()
    before = _files(tmp_path / "out")
    assert before and not np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:]).all()
    csv = tmp_path / "inputs.csv"
    record = csv.read_text()
    csv.write_text(record.replace("0.1,0.002", "0.1,0.003"))
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxhinge: error: ") and err.count("\n") == 1, err
    assert "--resume: inputs.csv changed since the campaign" in err, err
    assert _files(tmp_path / "out") == before
    with pytest.raises(jh.SweepError, match="--resume: inputs.csv changed since the campaign"):
        jh.run_campaign(path, resume=True)
    assert _files(tmp_path / "out") == before
    csv.write_text(record)
    monkeypatch.setattr(_programs, "source_digest", lambda: "0" * 64)  # (another jaxhinge, or an edited one)
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume: jaxhinge's source" in err and "changed since the campaign" in err and err.count("\n") == 1, err
    assert _files(tmp_path / "out") == before
    monkeypatch.undo()
    assert jh.run_campaign(path, resume=True).chunks_run == 1
    assert np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:]).all()


def test_progress_is_a_bar_on_a_terminal_and_lines_on_a_pipe():
    """A terminal gets one line redrawn in place with the rate, the time left and the failures; a pipe gets
    today's lines (a CI log stays readable), with the failures when there are any."""
    import io

    from jaxhinge._report._progress import MemberProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    pipe = io.StringIO()
    p = MemberProgress(100, pipe)
    p.update(40, 0)
    p.update(100, 3)
    p.close()
    lines = pipe.getvalue().splitlines()
    assert [line.split(", ")[0] for line in lines] == ["jaxhinge: 40/100 members done", "jaxhinge: 100/100 members done"]
    assert lines[1].endswith(" s, 3 failed") and "\r" not in pipe.getvalue()
    tty = Tty()
    p = MemberProgress(100, tty)
    p.t0 -= 10.0  # 10 s ago: 40 members in 10 s, 60 left at 4/s
    assert p.line(40, 2, p.t0 + 10.0) == ("jaxhinge: [###########.................] 40/100 members, 4/s, ETA 15 s, "
                                          "2 failed")
    p.update(40, 2)
    p.update(100, 2)
    p.close()
    out = tty.getvalue()
    assert out.startswith("\r\x1b[Kjaxhinge: [###") and out.count("\r\x1b[K") == 2  # the last update always shows
    assert out.endswith(" done, 2 failed\n") and "100/100 members" in out.split("\r")[-1]


def test_retention_statistics_and_bands_against_numpy(tmp_path):
    """`[retain] every = 3, members = [4]`: only those members' histories are stored (the others take no space:
    their Zarr chunks are never written), the metrics of every member are, and the envelopes' min, max, mean and
    std (merged from the chunks' moments) equal NumPy's over all members of the in-memory batch; the percentile
    bands (1, 5, 50, 95, 99 %, from the merged sketch of every member's deviation from the nominal run `c`, stored
    in `sketch_centre_<history>`) are within the stated bound `ALPHA |q - c| + FLOOR` of NumPy's exact
    percentiles `q` (`method="lower"`), and the bound is not loose (the worst error is more than 5 % of it).
    theta_p0 sits at 5 deg with a p1-p99 spread of at most 0.03 deg: 1 % of its value (the bound of a sketch
    without the centre) is wider than the whole band at every time after 0; about the nominal run its bands are
    within 1 % of the band's width (measured: 0.50 %) and 0.01 % of the value (measured: 0.002 %)."""
    import zarr

    from jaxhinge._io._campaign_format import ALPHA, FLOOR

    path = _sweep(tmp_path, members=40)
    path.write_text(path.read_text().replace("[output]", "[retain]\nevery = 3\nmembers = [4]\n[output]"))
    res = jh.run_campaign(path)
    sweep = jh.load_sweep(path)
    params = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    ref = jh.simulate_batch(sweep.scenario, params, chunk_size=4)
    nominal = jh.simulate(sweep.scenario)
    g = zarr.open_group(res.store, mode="r")
    kept = np.zeros(40, dtype=bool)
    kept[::3] = kept[4] = True
    np.testing.assert_array_equal(g["retained"][:], kept)
    theta = np.asarray(g["theta"][:])
    np.testing.assert_array_equal(theta[kept], np.asarray(ref.theta)[kept])
    assert np.isnan(theta[~kept]).all()
    files = set(os.listdir(os.path.join(res.store, "theta", "c")))
    assert files == {str(m) for m in np.flatnonzero(kept)}  # one chunk file per kept member, none for the others
    np.testing.assert_array_equal(res.metrics["final_theta"], np.asarray(ref.theta)[:, -1, :])
    env = res.envelopes
    assert env["percentiles"] == (1.0, 5.0, 50.0, 95.0, 99.0) and env["band_stride"] == 1
    np.testing.assert_array_equal(env["t_bands"], env["t"])
    ok = np.asarray(ref.success)
    worst = 0.0
    for name in ("omega_BN_B", "theta"):
        x = np.asarray(getattr(ref, name))
        np.testing.assert_array_equal(env[name]["min"], x.min(axis=0))
        np.testing.assert_array_equal(env[name]["max"], x.max(axis=0))
        np.testing.assert_allclose(env[name]["mean"], x.mean(axis=0), rtol=1e-13, atol=1e-15)  # merge order
        np.testing.assert_allclose(env[name]["std"], x.std(axis=0), rtol=1e-9, atol=1e-15)
        q = np.percentile(x[ok], env["percentiles"], axis=0, method="lower")
        c = np.asarray(g[f"sketch_centre_{name}"][:])
        np.testing.assert_array_equal(c, np.asarray(getattr(nominal, name)))  # (band_stride 1)
        ratio = np.abs(env[name]["percentiles"] - q) / (ALPHA * np.abs(q - c) + FLOOR)
        assert ratio.max() <= 1.0, (name, ratio.max())
        worst = max(worst, ratio.max())
    assert worst > 0.05
    q0 = np.percentile(np.asarray(ref.theta)[ok, :, 0], env["percentiles"], axis=0, method="lower")
    err, width = np.abs(env["theta"]["percentiles"][:, :, 0] - q0), q0[-1] - q0[0]  # (p1-p99)
    assert (np.abs(q0) > np.radians(4.9)).all() and width.max() < np.radians(0.03)
    assert (ALPHA * np.abs(q0[:, 1:]) > width[1:]).all()  # uncentred, a band could be off by more than its width
    assert (err <= ALPHA * width + FLOOR).all() and (err <= 1e-4 * np.abs(q0)).all()
    bands = res.summary["percentile bands"]
    assert bands["centre"] == "the nominal run (the scenario without dispersions)"
    assert bands["members counted"] == 40 and bands["alpha"] == ALPHA
    assert bands["band times"] == "21 of 21 sample times (stride 1)"


def test_a_failed_nominal_run_centres_the_sketch_at_zero(tmp_path, monkeypatch):
    """The nominal run (the sketch's centre) fails: the centre is zero, `summary.json` says why, and the bands are
    within `ALPHA |q| + FLOOR` of NumPy's percentiles (the sketch without a centre)."""
    import equinox as eqx

    import jaxhinge._simulation._simulate as simulate_module
    from jaxhinge._io._campaign_format import ALPHA, FLOOR

    real = simulate_module.simulate

    def failing(scenario, *a, **k):  # a non-finite state: success False, result 0
        t = real(scenario, *a, **k)
        return eqx.tree_at(lambda t: (t.theta, t.success), t, (t.theta * np.nan, np.asarray(False)))

    monkeypatch.setattr(simulate_module, "simulate", failing)
    path = _sweep(tmp_path)
    res = jh.run_campaign(path)
    bands = res.summary["percentile bands"]
    assert bands["centre"].startswith("zero: the nominal run failed (") and "non-finite" in bands["centre"]
    ds = jh.open_campaign(tmp_path / "out")
    assert not ds["sketch_centre_theta"].values.any() and not ds["sketch_centre_omega_BN_B"].values.any()
    monkeypatch.undo()
    sweep = jh.load_sweep(path)
    params = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    ref = jh.simulate_batch(sweep.scenario, params, chunk_size=4)
    for name in ("omega_BN_B", "theta"):
        q = np.percentile(np.asarray(getattr(ref, name)), res.envelopes["percentiles"], axis=0, method="lower")
        assert (np.abs(res.envelopes[name]["percentiles"] - q) <= ALPHA * np.abs(q) + FLOOR).all(), name


def test_the_sketch_merges_exactly_in_any_order_within_its_stated_bound():
    """The quantile sketch on values of mixed sign over 17 decades, zeros and values below `FLOOR` and above
    `CEIL`: bucket indices increase with the value; counts merged from uneven parts in two orders are equal;
    every percentile is within `ALPHA |q| + FLOOR` of NumPy's (`method="lower"`) where `|q| <= CEIL`, the
    worst error is a fair part of that bound, and an element with no value gives NaN."""
    from jaxhinge._analysis._studies._stats import bucket_index, sketch_add, sketch_quantiles
    from jaxhinge._io._campaign_format import ALPHA, BUCKETS, CEIL, FLOOR

    rng = np.random.default_rng(7)
    x = rng.choice([-1.0, 1.0], (997, 4, 3)) * 10.0 ** rng.uniform(-12, 5, (997, 4, 3))
    x[rng.random(x.shape) < 0.05] = 0.0
    x[:, 0, 0] = rng.normal(0.0, 1e-9, 997)  # around FLOOR
    x[:, 1, 1] = rng.normal(1e6, 1e5, 997)  # around CEIL
    idx = bucket_index(x)
    assert idx.dtype == np.int16 and -(BUCKETS // 2) <= idx.min() and idx.max() <= BUCKETS // 2
    order = np.argsort(x, axis=0)
    assert (np.diff(np.take_along_axis(idx, order, axis=0).astype(int), axis=0) >= 0).all()
    a, b = np.zeros((4, 3, BUCKETS), np.int32), np.zeros((4, 3, BUCKETS), np.int32)
    for part in np.split(idx, [100, 101, 600]):
        sketch_add(a, part)
    for part in np.split(idx, [100, 101, 600])[::-1]:
        sketch_add(b, part)
    np.testing.assert_array_equal(a, b)
    assert (a.sum(axis=-1) == 997).all()
    p = [0.0, 1.0, 5.0, 25.0, 50.0, 95.0, 99.0, 100.0]
    q = np.percentile(x, p, axis=0, method="lower")
    ratio = np.abs(sketch_quantiles(a, p) - q) / (ALPHA * np.abs(q) + FLOOR)
    assert ratio[np.abs(q) <= CEIL].max() <= 1.0 and ratio.max() > 0.5
    assert np.isnan(sketch_quantiles(np.zeros((2, BUCKETS), np.int32), [50.0])).all()
    # centred: values near 5 with a spread of 1e-3, sketched as deviations from a centre per element: within
    # ALPHA |q - c| + FLOOR, 1 % of the spread where 1 % of the value would be 50 times the spread
    c = np.array([5.0, 5.0004, 4.999])
    y = 5.0 + rng.normal(0.0, 1e-3, (997, 3))
    counts = np.zeros((3, BUCKETS), np.int32)
    sketch_add(counts, bucket_index(y - c))
    q = np.percentile(y, p, axis=0, method="lower")
    ratio = np.abs(sketch_quantiles(counts, p, centre=c) - q) / (ALPHA * np.abs(q - c) + FLOOR)
    assert ratio.max() <= 1.0 and ratio.max() > 0.5


def test_a_campaign_too_large_to_keep_every_history_is_refused_with_the_retain_line_that_fits(tmp_path, capsys,
                                                                                               monkeypatch):
    """Without `[retain]`, histories that exceed the memory limit are refused before any compute, naming the size,
    the limit and a `[retain] every = N` that fits; bad `[retain]` values are refused naming the field."""
    from jaxhinge._cli import main

    path = _sweep(tmp_path, members=10_000)
    monkeypatch.setenv("JAXHINGE_MEMORY_LIMIT_GB", "0.01")
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert ("members = 10000: every member's history (21 samples of theta, thetaDot, omega_BN_B and sigma_BN with 2 "
            "panel(s)) needs about 0.0168 GB, above the limit of 0.01 GB; keep some of them: [retain] every = 7 (keeps "
            "1429, 0.0024 GB)")\
        in err and err.count("\n") == 1 and not (tmp_path / "out").exists()
    original = path.read_text()
    for retain, message in [("every = 0", "retain.every = 0: must be"), ("members = [10000]", "retain.members[0]"),
                            ("outputs = ['phi']", 'retain.outputs[0] = "phi": allowed values'), ("colour = 1", "unknown key 'colour'"),
                            ("worst = [{metric = 'nope', count = 2}]", 'retain.worst[0].metric = "nope": allowed values'),
                            ("worst = [{metric = 'peak_hub_rate', count = 0}]", "retain.worst[0].count = 0"),
                            ("outputs = []\nworst = [{metric = 'peak_hub_rate', count = 1}]", "retain.outputs = [] keeps")]:
        path.write_text(original.replace("[output]", f"[retain]\n{retain}\n[output]"))
        assert main(["sweep", str(path)]) == 2
        assert message in capsys.readouterr().err, retain


def test_metrics_of_every_member_inside_the_batch(tmp_path):
    """`[metrics]` with SENS.toml's names and options: each member's modal frequencies equal `jh.modes` of that
    member's model, its final hinge angles `jh.simulate`'s, its settling time the last crossing of the threshold
    interpolated from the simulated samples (NumPy); the summary metrics are added, and the store labels the
    metrics by panel and mode with their units."""
    path = _sweep(tmp_path, members=6, chunk_size=4)
    path.write_text(path.read_text().replace("[output]", textwrap.dedent("""\
        [metrics]
        names = ["modal_frequencies", {name = "settling_time", signal = "theta", threshold = 0.01}, "final_theta"]
        [output]""")))
    res = jh.run_campaign(path)
    assert list(res.metrics) == ["modal_frequencies", "settling_time", "final_theta", "peak_hub_rate",
                                 "peak_abs_theta"]
    sweep = jh.load_sweep(path)
    params = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    for m in (0, 5):
        one = jh.apply_parameters(sweep.scenario, {k: v[m] for k, v in params.items()})
        np.testing.assert_allclose(res.metrics["modal_frequencies"][m], jh.modes(one).frequency_hz, rtol=1e-12)
        traj = jh.simulate(one)
        theta = np.asarray(traj.theta)
        np.testing.assert_allclose(res.metrics["final_theta"][m], theta[-1], rtol=1e-12, atol=1e-15)
        sig = np.abs(theta - np.asarray(one.spacecraft.panels.thetaRef)).max(axis=1)
        k = np.flatnonzero(sig > 0.01)[-1]
        t = np.asarray(traj.t)
        ts = t[k] + (sig[k] - 0.01) / (sig[k] - sig[k + 1]) * (t[k + 1] - t[k]) if k + 1 < t.size else t[-1]
        np.testing.assert_allclose(res.metrics["settling_time"][m], ts, rtol=1e-12)
    ds = jh.open_campaign(tmp_path / "out")
    assert ds["metric_modal_frequencies"].dims == ("member", "mode") and ds["metric_modal_frequencies"].attrs[
        "units"] == "Hz"
    assert ds["metric_final_theta"].dims == ("member", "panel")
    assert "settling_time [s]" in res.summary["statistics (successful members)"]


def test_a_campaign_of_modes_only_runs_no_simulation(tmp_path, monkeypatch):
    """Metrics that need no simulation and no kept history (`[retain] outputs = []`): nothing is simulated (the
    simulator is made to fail if it is ever traced), the frequencies equal `jh.modes`', no envelopes are drawn."""
    import jaxhinge._analysis._studies._batch as batch

    def no(*a, **k):
        raise AssertionError("simulated")

    monkeypatch.setattr(batch, "simulate_unjitted", no)
    path = _sweep(tmp_path, members=5, chunk_size=4)
    path.write_text(path.read_text().replace("[output]", textwrap.dedent("""\
        [metrics]
        names = ["modal_frequencies", {name = "damping_ratios", boundary = "clamped"}]
        [retain]
        outputs = []
        [output]""")))
    res = jh.run_campaign(path)
    assert list(res.metrics) == ["modal_frequencies", "damping_ratios"] and res.envelopes is None
    sweep = jh.load_sweep(path)
    params = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed)
    one = jh.apply_parameters(sweep.scenario, {k: v[3] for k, v in params.items()})
    np.testing.assert_allclose(res.metrics["modal_frequencies"][3], jh.modes(one).frequency_hz, rtol=1e-12)
    np.testing.assert_allclose(res.metrics["damping_ratios"][3], jh.modes(one, "clamped").damping_ratio, atol=1e-15)
    assert sorted(os.listdir(tmp_path / "out")) == ["campaign.zarr", "histograms.png", "summary.json"]
    assert res.success.all()


def test_worst_members_and_reruns_reproduce_the_histories_exactly(tmp_path, capsys):
    """`[retain] worst`: the 2 members with the largest peak hub rate (checked against the metric of every
    member) get their histories in the store by a second pass, equal bit for bit to a campaign that keeps every
    history; `--members 7,2` computes the same members again into members.npz, also bit for bit."""
    import zarr

    from jaxhinge._cli import main

    path = _sweep(tmp_path, members=10, chunk_size=4)
    full = _arrays(jh.run_campaign(path, out_dir=str(tmp_path / "all")).store)  # every history kept
    path.write_text(path.read_text().replace("[output]", textwrap.dedent("""\
        [retain]
        every = 100
        worst = [{metric = "peak_hub_rate", count = 2}]
        [output]""")))
    res = jh.run_campaign(path)
    worst = [int(m) for m in np.argsort(-full["metric_peak_hub_rate"])[:2]]
    assert res.summary["worst members (histories kept)"] == {"peak_hub_rate": worst}
    g = zarr.open_group(res.store, mode="r")
    assert np.flatnonzero(g["retained"][:]).tolist() == sorted([0, *worst])
    for m in (0, *worst):
        np.testing.assert_array_equal(g["theta"][m], full["theta"][m])
        np.testing.assert_array_equal(g["omega_BN_B"][m], full["omega_BN_B"][m])
    assert main(["sweep", str(path), "--members", "7,2"]) == 0
    with np.load(tmp_path / "out" / "members.npz") as f:
        assert f["member"].tolist() == [7, 2]
        np.testing.assert_array_equal(f["theta"], full["theta"][[7, 2]])
        np.testing.assert_array_equal(f["metric_peak_hub_rate"], full["metric_peak_hub_rate"][[7, 2]])
    capsys.readouterr()
    assert main(["sweep", str(path), "--members", "7,10"]) == 2
    assert capsys.readouterr().err == (f'jaxhinge: error: {path}: --members = "7,10": member 10 is not in [0, 10) '
                                       "(indices count from 0)\n")


def test_chunk_size_default_fills_a_quarter_of_a_gpus_free_memory(monkeypatch):
    """Without `chunk_size`: 256 members on a CPU; on a GPU the largest power of two of members whose outputs and
    working memory fill a quarter of the free memory, within [256, 2**18]. The reference is the documented rule
    (docs/errors.md, the memory estimate) worked out by hand for the bundled two-panel example, not the code's
    own formula: 8 bytes x 251 samples (t = 0 to 2.5 s every 0.01 s) x (39 + 19 x 2 panels) = 154 616 bytes a
    member; a quarter of 40 GB free holds 64 676 members, so 32 768; exactly 65 536 members' worth is 65 536,
    four bytes less is 32 768 again (the rule rounds down)."""
    import jax

    from jaxhinge._jobs._sweep import CPU_CHUNK, MAX_CHUNK, default_chunk_size

    sc = jh.load_scenario(jh.example_path("two_panel"))
    assert default_chunk_size(sc) == CPU_CHUNK == 256

    class Gpu:
        platform = "gpu"

        def __init__(self, free):
            self.free = free

        def memory_stats(self):
            return {"bytes_limit": self.free + 1e9, "bytes_in_use": 1e9}

    per = 8 * 251 * (39 + 19 * 2)
    assert per == 154_616
    for free, expected in [(40e9, 32_768), (4 * per * 65_536, 65_536), (4 * per * 65_536 - 4, 32_768),
                           (1e6, 256), (1e15, 1 << 18)]:
        monkeypatch.setattr(jax, "devices", lambda free=free: [Gpu(free)])
        assert default_chunk_size(sc) == expected, free
    assert MAX_CHUNK == 1 << 18


# -- what a campaign refuses, what it stores -----------------------------------------------------------------------


@pytest.mark.parametrize(("metrics", "message"), [
    ('names = "peak_hub_rate"', 'metrics.names = "peak_hub_rate": must be a non-empty list of output names'),
    ("names = []", "metrics.names = []: must be a non-empty list of output names"),
    ('names = ["no_such_metric"]', "metrics.names[0] = 'no_such_metric': unknown output; allowed: peak_hub_rate, "),
    ('names = ["theta"]', 'metrics.names[0] = "theta": is a time history, not a metric: keep histories with [retain]'),
    ("names = [3]", "metrics.names[0] = 3: must be an output name or a table with key 'name'"),
    ('names = [{name = "peak_hub_rate", bogus = 1}]', "metrics.names[0]: unknown key 'bogus' for peak_hub_rate"),
    ('names = ["peak_hub_rate"]\nother = 1', "metrics: unknown key 'other'; allowed keys: names"),
])
def test_bad_metrics_in_a_sweep_file_are_one_line_and_write_nothing(tmp_path, capsys, metrics, message):
    """A `[metrics]` table with a bad value: `jaxhinge sweep` says the file, the field, the value and the rule in
    one line, exits 2, and writes nothing (no output folder)."""
    from jaxhinge._cli import main

    path = _sweep(tmp_path)
    path.write_text(path.read_text().replace("[output]", f"[metrics]\n{metrics}\n[output]"))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jaxhinge: error: {path}: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_bad_members_option_is_one_line_and_writes_nothing(tmp_path, capsys):
    """`--members` not integers, empty, negative or past the last member: one line naming `--members`, the value
    and the rule, exit 2, before any compute (no progress line) and nothing written."""
    from jaxhinge._cli import main

    path = _sweep(tmp_path)
    rule = "must be member indices separated by commas, e.g. 17,523"
    for text, message in [("abc", f'--members = "abc": {rule}'), ("1.5", f'--members = "1.5": {rule}'),
                          ("", f'--members = "": {rule}'), ("3,,4", f'--members = "3,,4": {rule}'),
                          ("-1", '--members = "-1": member -1 is not in [0, 10) (indices count from 0)'),
                          ("2,10", '--members = "2,10": member 10 is not in [0, 10) (indices count from 0)')]:
        assert main(["sweep", str(path), f"--members={text}"]) == 2, text
        err = capsys.readouterr().err
        assert err == f"jaxhinge: error: {path}: {message}\n", err
    assert sorted(os.listdir(tmp_path)) == ["SWEEP.toml", "two_panel.toml"]


def test_an_unreachable_scheduler_is_one_line_and_creates_no_store(tmp_path, capsys):
    """`--scheduler` at an address where no scheduler listens (a closed port): after the connection's time-out,
    one line naming the address and the cause, exit 2, and no store (the cluster is reached before the store is
    created)."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    import socket

    from jaxhinge._cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = _sweep(tmp_path)
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert main(["sweep", str(path), "--scheduler", f"tcp://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f'jaxhinge: error: scheduler = "tcp://127.0.0.1:{port}": cannot connect to the '
                              "scheduler ("), err
    assert not (tmp_path / "out" / "campaign.zarr").exists()
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_failed_members_are_left_out_of_the_statistics_as_numpy_nan_statistics_say(tmp_path):
    """Two members of six with a hinge 1e10 times stiffer than the others: rk4 at 1 ms is unstable for them, their
    state turns non-finite and they fail. `summary.json` counts and lists them, and its statistics of every metric
    and parameter are NumPy's NaN-aware ones over the store's values with the failed members set to NaN
    (`np.nanmin`, `np.nanpercentile`, `np.nanmean`, `np.nanstd`, ...): the failures are left out, not averaged in
    (a failed member's stored peak hub rate is a finite number, which would move every statistic)."""
    import json

    import zarr

    path = _sweep(tmp_path, members=6)
    text = path.read_text()
    head = text.split("[[dispersions]]", 1)[0]
    path.write_text(head + textwrap.dedent("""        [[dispersions]]
        param = "p0.k"
        dist = "values"
        values = [100.0, 1e12, 110.0, 120.0, 1e12, 90.0]
        [output]
        dir = "out"
        """))
    res = jh.run_campaign(path)
    with open(tmp_path / "out" / "summary.json") as fh:
        summary = json.load(fh)
    g = zarr.open_group(res.store, mode="r")
    ok = np.asarray(g["success"][:])
    np.testing.assert_array_equal(ok, [True, False, True, True, False, True])
    assert summary["succeeded"] == 4 and summary["failed"] == 2
    assert [f["member"] for f in summary["failures"]] == [1, 4]
    assert all("non-finite" in f["reason"] for f in summary["failures"])
    stats = summary["statistics (successful members)"]
    panels = [str(p) for p in g["panel"][:]]
    names = {"peak_hub_rate": ("rad/s", [None]), "final_theta": ("rad", panels), "peak_abs_theta": ("rad", panels)}
    assert set(stats) == {f"{n}{'' if lab is None else f'[{lab}]'} [{u}]" for n, (u, labs) in names.items()
                          for lab in labs}
    peak = np.asarray(g["metric_peak_hub_rate"][:])
    assert np.isfinite(peak[~ok]).all() and np.mean(peak) != np.nanmean(np.where(ok, peak, np.nan))  # (if counted)
    for name, (unit, labels) in names.items():
        v = np.asarray(g[f"metric_{name}"][:], dtype=float).reshape(6, -1)
        v = np.where(ok[:, None], v, np.nan)
        for i, lab in enumerate(labels):
            got, x = stats[f"{name}{'' if lab is None else f'[{lab}]'} [{unit}]"], v[:, i]
            p5, p50, p95 = np.nanpercentile(x, [5, 50, 95])
            want = {"min": np.nanmin(x), "p5": p5, "p50": p50, "p95": p95, "max": np.nanmax(x),
                    "mean": np.nanmean(x), "std": np.nanstd(x)}
            assert got.keys() == want.keys()
            for key, value in want.items():  # (summation order: a few ulp)
                np.testing.assert_allclose(got[key], value, rtol=1e-13, atol=0, err_msg=f"{name} {lab} {key}")
    k = np.where(ok, np.asarray(g["param_p0.k"][:]), np.nan)
    assert summary["parameters"]["p0.k"]["max"] == np.nanmax(k) == 120.0
    np.testing.assert_allclose(summary["parameters"]["p0.k"]["mean"], np.nanmean(k), rtol=1e-15)


# The on-disk layout of `_sweep`'s campaign (10 members in chunks of 4, two panels, 21 samples, two dispersed
# parameters, the summary's metrics, every history): array -> (dimension names, data type, shape, chunk shape,
# fill value, attribute keys), as written in each array's zarr.json. A change here is a change of the store's
# format (docs/campaigns.md): readers of stored campaigns depend on it.
STORE_FORMAT = {
    "band_time": (["band_time"], "float64", [21], [21], 0.0, ["description", "units"]),
    "bucket": (["bucket"], "float64", [3457], [3457], 0.0, ["description"]),
    "chunk_done": (["chunk"], "bool", [3], [1], False, ["description"]),
    "component": (["component"], "string", [3], [3], "", ["description"]),
    "member": (["member"], "int64", [10], [4], 0, ["description"]),
    "metric_final_theta": (["member", "panel"], "float64", [10, 2], [4, 2], "NaN", ["description", "units"]),
    "metric_peak_abs_theta": (["member", "panel"], "float64", [10, 2], [4, 2], "NaN", ["description", "units"]),
    "metric_peak_hub_rate": (["member"], "float64", [10], [4], "NaN", ["description", "units"]),
    "moment": (["moment"], "string", [5], [5], "", ["description"]),
    "omega_BN_B": (["member", "time", "component"], "float64", [10, 21, 3], [4, 21, 3], "NaN",
                   ["basilisk", "description", "units"]),
    "panel": (["panel"], "string", [2], [2], "", ["description"]),
    "param_hub.omega_BN_BInit": (["member", "component"], "float64", [10, 3], [4, 3], "NaN", ["description", "units"]),
    "param_p0.k": (["member"], "float64", [10], [4], "NaN", ["description", "units"]),
    "result": (["member"], "int32", [10], [4], -1, ["description"]),
    "retained": (["member"], "bool", [10], [4], False, ["description"]),
    "sigma_BN": (["member", "time", "component"], "float64", [10, 21, 3], [4, 21, 3], "NaN",
                 ["basilisk", "description", "units"]),
    "sketch_centre_omega_BN_B": (["band_time", "component"], "float64", [21, 3], [21, 3], 0.0,
                                 ["description", "units"]),
    "sketch_centre_theta": (["band_time", "panel"], "float64", [21, 2], [21, 2], 0.0, ["description", "units"]),
    "sketch_done": ([], "bool", [], [], False, ["description"]),
    "sketch_omega_BN_B": (["band_time", "component", "bucket"], "int32", [21, 3, 3457], [21, 3, 3457], 0,
                          ["alpha", "band_stride", "ceil", "description", "floor", "history_units"]),
    "sketch_theta": (["band_time", "panel", "bucket"], "int32", [21, 2, 3457], [21, 2, 3457], 0,
                     ["alpha", "band_stride", "ceil", "description", "floor", "history_units"]),
    "stats_omega_BN_B": (["chunk", "moment", "time", "component"], "float64", [3, 5, 21, 3], [1, 5, 21, 3], "NaN",
                         ["description", "units"]),
    "stats_sigma_BN": (["chunk", "moment", "time", "component"], "float64", [3, 5, 21, 3], [1, 5, 21, 3], "NaN",
                       ["description", "units"]),
    "stats_theta": (["chunk", "moment", "time", "panel"], "float64", [3, 5, 21, 2], [1, 5, 21, 2], "NaN",
                    ["description", "units"]),
    "stats_thetaDot": (["chunk", "moment", "time", "panel"], "float64", [3, 5, 21, 2], [1, 5, 21, 2], "NaN",
                       ["description", "units"]),
    "success": (["member"], "bool", [10], [4], False, ["description"]),
    "theta": (["member", "time", "panel"], "float64", [10, 21, 2], [4, 21, 2], "NaN",
              ["basilisk", "description", "units"]),
    "thetaDot": (["member", "time", "panel"], "float64", [10, 21, 2], [4, 21, 2], "NaN",
                 ["basilisk", "description", "units"]),
    "time": (["time"], "float64", [21], [21], 0.0, ["description", "units"]),
}
STORE_ATTRIBUTES = ["band_stride", "bands", "chunk_size", "every", "format", "histories", "input_files", "jaxhinge",
                    "jaxhinge_source", "members", "metrics", "parameters", "scenario", "seed", "sketch_centre",
                    "sources", "sweep", "sweep_text"]


def test_the_store_format_is_pinned(campaign_store):
    """`campaign.zarr` of a small campaign, read from its `zarr.json` files (Zarr v3 metadata, as any reader sees
    them): every array's dimension names, data type, shape, chunks, fill value and attribute keys, and the group's
    attribute keys, are the listing written above; the format name, the moments' order, the sketch's parameters
    and the archived inputs have their stated values."""
    import json

    from jaxhinge._runtime._programs import source_digest

    def meta(*parts):
        with open(os.path.join(campaign_store, *parts, "zarr.json")) as fh:
            return json.load(fh)

    names = sorted(n for n in os.listdir(campaign_store) if os.path.isfile(os.path.join(campaign_store, n, "zarr.json")))
    assert names == sorted(STORE_FORMAT)
    for name in names:
        m = meta(name)
        assert m["node_type"] == "array" and m["zarr_format"] == 3, name
        got = [m.get("dimension_names") or [], m["data_type"], m["shape"],
               m["chunk_grid"]["configuration"]["chunk_shape"], m["fill_value"], sorted(m["attributes"])]
        assert got == list(STORE_FORMAT[name]), name
    group = meta()
    assert group["node_type"] == "group" and group["zarr_format"] == 3
    attrs = group["attributes"]
    assert sorted(attrs) == STORE_ATTRIBUTES
    assert attrs["format"] == "jaxhinge-campaign/1" and attrs["members"] == 10 and attrs["chunk_size"] == 4
    assert attrs["seed"] == 3 and attrs["parameters"] == ["p0.k", "hub.omega_BN_BInit"]
    assert attrs["histories"] == ["theta", "thetaDot", "omega_BN_B", "sigma_BN"]
    assert attrs["bands"] == ["omega_BN_B", "theta"] and attrs["band_stride"] == 1
    assert attrs["metrics"] == ["peak_hub_rate", "final_theta", "peak_abs_theta"]
    assert set(attrs["input_files"]) == {"SWEEP.toml", "two_panel.toml"} == set(attrs["sources"])
    assert attrs["jaxhinge_source"] == source_digest()
    import zarr

    g = zarr.open_group(campaign_store, mode="r")
    assert [str(x) for x in g["moment"][:]] == ["count", "mean", "m2", "min", "max"]
    sketch = meta("sketch_theta")["attributes"]
    assert (sketch["alpha"], sketch["floor"], sketch["ceil"]) == (0.01, 1e-9, 1e6)


# -- Dask workers ------------------------------------------------------------------------------------------------

# Loaded by every Dask worker process before its first task (`distributed.worker.preload`): it records which
# jaxhinge the worker imported, and the first worker to write chunk 2 writes its parameters and `success`, then
# kills itself (SIGKILL), once for the whole cluster (the mark file); the nanny starts a new worker process.
_WORKER_PRELOAD = """
import os, signal
import jaxhinge
from jaxhinge._io import _campaign_store

with open(os.environ["JH_TEST_WORKER_LOG"], "a") as fh:
    fh.write(f"{os.getpid()} {jaxhinge.__file__}\\n")
Store = _campaign_store.CampaignStore
write = getattr(Store, "jh_test_original", Store.write_chunk)  # (Dask may run a preload file twice)
Store.jh_test_original = write


def torn(self, c, params, success, *rest):
    if c == 2 and os.environ.get("JH_TEST_KILL_MARK"):
        try:
            os.close(os.open(os.environ["JH_TEST_KILL_MARK"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return write(self, c, params, success, *rest)
        for name, v in params.items():
            self.group[f"param_{name}"][c * self.chunk_size:c * self.chunk_size + len(v)] = v
        self.group["success"][c * self.chunk_size:(c + 1) * self.chunk_size] = success
        os.kill(os.getpid(), signal.SIGKILL)
    return write(self, c, params, success, *rest)


Store.write_chunk = torn
"""


@pytest.fixture(scope="module")
def campaign_store(tmp_path_factory) -> str:
    """The store of `_sweep`'s campaign (10 members in 3 chunks of 4), run in process once for the module."""
    tmp = tmp_path_factory.mktemp("in_process")
    return jh.run_campaign(_sweep(tmp)).store


@pytest.fixture(scope="module")
def in_process_store(campaign_store):
    """The arrays of the in-process store of the Dask tests' campaign (10 members in 3 chunks of 4)."""
    return _arrays(campaign_store)


@pytest.fixture
def worker_preload(tmp_path, monkeypatch):
    """Dask workers started in this test load `_WORKER_PRELOAD`; **returns** the file each writes its pid and
    jaxhinge's path into. Their environment is this process's (`PYTHONPATH` included)."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    preload, log = tmp_path / "jh_test_preload.py", tmp_path / "workers.log"
    preload.write_text(_WORKER_PRELOAD)
    monkeypatch.setenv("JH_TEST_WORKER_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    with dask.config.set({"distributed.worker.preload": [str(preload)]}):
        yield log


def _workers(log) -> dict[int, str]:
    """`{pid: jaxhinge.__file__}` of every worker process started."""
    return {int(pid): path for pid, path in (line.split(" ", 1) for line in log.read_text().splitlines())}


def test_workers_write_the_store_equal_to_the_in_process_one_also_when_one_is_killed(tmp_path, in_process_store,
                                                                                     worker_preload, capsys,
                                                                                     monkeypatch):
    """`jaxhinge sweep --workers 2`: two worker processes, each writing its chunks into the store, and the worker
    that writes chunk 2 is SIGKILLed halfway through its writes: Dask runs the chunk again on a worker alive,
    which writes it whole (its flag was never set); the campaign completes, its store equals the in-process one
    bit for bit (every array), and the workers ran this jaxhinge (the nanny started a third)."""
    from jaxhinge._cli import main

    mark = tmp_path / "killed"
    monkeypatch.setenv("JH_TEST_KILL_MARK", str(mark))
    path = _sweep(tmp_path)
    assert main(["sweep", str(path), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "on 2 local Dask worker(s)" in err and "10/10 members done" in err
    assert mark.exists()  # a worker was killed
    workers = _workers(worker_preload)
    assert len(workers) == 3 and set(workers.values()) == {jh.__file__}  # ... and the nanny started another
    stored = _arrays(tmp_path / "out" / "campaign.zarr")
    assert stored.keys() == in_process_store.keys() and stored["chunk_done"].all()
    for name in stored:
        np.testing.assert_array_equal(stored[name], in_process_store[name], err_msg=name)


def test_bad_worker_options_are_refused_before_any_compute(tmp_path, capsys, monkeypatch):
    """`--workers 0`, `--workers` with `--scheduler`, a scheduler file that does not exist, and Dask not
    installed: one line naming the option, exit 2, nothing written."""
    from jaxhinge._cli import main

    path = _sweep(tmp_path)
    missing = tmp_path / "scheduler.json"
    for argv, message in [(["--workers", "0"], "--workers = 0: must be a whole number of worker processes, 1 or more"),
                          (["--workers", "2", "--scheduler", "x"],
                           "--workers = 2 and --scheduler = 'x': give one or the other"),
                          (["--scheduler", str(missing)],
                           f'--scheduler = "{missing}": is neither an existing scheduler file nor a scheduler address')]:
        assert main(["sweep", str(path), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("jaxhinge: error: ") and message in err and err.count("\n") == 1, err
    with pytest.raises(jh.SweepError, match="workers = true: must be a whole number"):
        jh.run_campaign(path, workers=True)
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    assert main(["sweep", str(path), "--workers", "2"]) == 2
    assert 'Dask\'s distributed is not installed; install it with pip install "jaxhinge[cluster]"' in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_worker_with_another_jaxhinge_refuses_its_chunks(tmp_path):
    """A worker started by hand (`dask worker`, `--scheduler`) may import another jaxhinge than the client's (no
    `PYTHONPATH`, another installation): its chunks could differ from the in-process ones, so it refuses, naming
    its jaxhinge and the client's (the client's source SHA-256 travels with every task). Checked on the
    worker's set-up, in this process: an external cluster is `benchmarks/check_external_cluster.py`."""
    from jaxhinge._io._campaign_store import input_digests
    from jaxhinge._jobs._campaign_chunks import _worker_sweep
    from jaxhinge._runtime._programs import source_digest

    path = _sweep(tmp_path)
    sweep = jh.load_sweep(path)
    digests = tuple(sorted(input_digests(sweep).items()))
    with pytest.raises(jh.SweepError, match=r"runs the jaxhinge in .*, whose source differs from the client's "
                       r"\(/elsewhere/jaxhinge; SHA-256\): start the workers with the client's jaxhinge"):
        _worker_sweep(str(path), str(tmp_path / "out"), digests, ("0" * 64, "/elsewhere/jaxhinge"), False, False)
    here = os.path.dirname(jh.__file__)
    assert _worker_sweep(str(path), str(tmp_path / "out"), digests, (source_digest(), here), False, False).members == 10


def test_workers_start_from_a_main_module_without_spec(monkeypatch):
    """IPython (a notebook, the suite's notebook runner) replaces `__main__` with a module that has no `__spec__`,
    and multiprocessing's spawn (Dask's nannies) fails on it ("module '__main__' has no attribute '__spec__'"):
    `cluster_client` gives it the `None` a plain script has, so workers start from a notebook too."""
    import sys
    import types

    from jaxhinge._jobs._campaign_cluster import cluster_client

    main = types.SimpleNamespace(__name__="__main__")  # as IPython's DummyMod: no __spec__, no __file__
    monkeypatch.setitem(sys.modules, "__main__", main)
    with cluster_client(1, None) as client:
        assert client.submit(sum, [1, 2]).result(timeout=120) == 3


def test_a_million_member_campaign_is_checked_by_the_chunk_not_by_the_whole(tmp_path, monkeypatch):
    """The memory check of a campaign is its chunk's (one chunk is in memory at a time), also when the members are
    drawn a part at a time: a million members with metrics for all and every 1000th history pass the checks of a
    machine whose limit a million simulated histories would exceed (nothing is run here)."""
    from jaxhinge._jobs._campaign import check_members, retention

    monkeypatch.setenv("JAXHINGE_MEMORY_LIMIT_GB", "1")
    path = _sweep(tmp_path, members=1_000_000, chunk_size=256)
    path.write_text(path.read_text().replace("[output]", "[retain]\nevery = 1000\n[output]"))
    sweep = jh.load_sweep(path)
    assert retention(sweep).every == 1000
    p = jh.sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed, indices=range(256))
    assert p["p0.k"].shape == (256,)
    monkeypatch.setattr("jaxhinge._jobs._campaign.refuse_invalid_members", lambda *a: None)  # (the draws only)
    assert check_members(sweep, block=1 << 18) == ["p0.k", "hub.omega_BN_BInit"]


def test_the_command_draws_and_checks_every_member_once(tmp_path, monkeypatch, capsys):
    """`jaxhinge sweep`: every member is drawn and checked against the physical rules once, before the first line
    (`plan_campaign`), not again when the campaign runs (the chunks draw their own members to compute them); a
    `--resume` draws none for the check (its store's input files and jaxhinge are those it was checked with)."""
    from jaxhinge._cli import main
    from jaxhinge._jobs import _campaign

    path = _sweep(tmp_path)
    draws, checks = [], []
    sample, refuse = _campaign.sample_dispersions, _campaign.refuse_invalid_members
    monkeypatch.setattr(_campaign, "sample_dispersions", lambda *a, **k: (draws.append(1), sample(*a, **k))[1])
    monkeypatch.setattr(_campaign, "refuse_invalid_members",
                        lambda sc, params, who, first, members: (checks.append((first, members)),
                                                                 refuse(sc, params, who, first, members))[1])
    assert main(["sweep", str(path)]) == 0
    assert (len(draws), checks) == (1, [(0, 10)])
    assert main(["sweep", str(path), "--resume"]) == 0
    assert (len(draws), checks) == (1, [(0, 10)])
    capsys.readouterr()


def test_the_rules_check_a_block_of_members_at_a_time_in_one_shape(tmp_path, monkeypatch):
    """`check_members` hands the physical rules one block at a time (a block's models are built at once: 1.7 kB a
    member, 1.9 GB for a million in one block), the last block padded with its first member so the rules'
    operations are compiled for one shape; a campaign smaller than a block is one block of its own size."""
    from jaxhinge._jobs._campaign import check_members

    sweep = jh.load_sweep(_sweep(tmp_path, members=10))
    seen = []
    monkeypatch.setattr("jaxhinge._jobs._campaign.refuse_invalid_members",
                        lambda sc, params, who, first, members: seen.append((first, members, params)))
    assert check_members(sweep, block=4) == ["p0.k", "hub.omega_BN_BInit"]
    assert [(first, members, len(p["p0.k"])) for first, members, p in seen] == [(0, 10, 4), (4, 10, 4), (8, 10, 4)]
    every = jh.sample_dispersions(sweep.scenario, sweep.dispersions, 10, sweep.seed)
    for first, _, p in seen:
        idx = [first + k if first + k < 10 else first for k in range(4)]  # the last: 8, 9, 8, 8
        for name, v in p.items():
            np.testing.assert_array_equal(v, every[name][idx])
    seen.clear()
    check_members(sweep)
    assert [(first, len(p["p0.k"])) for first, _, p in seen] == [(0, 10)]
