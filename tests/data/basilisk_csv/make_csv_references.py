"""(Re)generate the Basilisk trajectory CSVs under `tests/data/basilisk_csv/`.

    pip install bsk==2.12.1        # Basilisk (only for generating; not a jaxhinge dependency)
    python tests/data/basilisk_csv/make_csv_references.py [--out tests/data/basilisk_csv] [--check]

Each CSV is Basilisk's run of one of the seed scenarios of `tests/data/bsk/` (the same TOML file
`tests/data/bsk/bsk_run.py` runs for the `.npz` references, which `tests/_seed.py` builds in code), recorded every
0.01 s instead of the TOML's `save_dt`:

| file | scenario | dt [s] | t_end [s] |
|---|---|---|---|
| `bsk_ref_noGravity_noDamping.csv` | `tests/data/bsk/seed_noGravity.toml` | 1e-3 | 2.5 |
| `bsk_ref_noGravity_damping.csv` | `tests/data/bsk/seed_damping.toml` | 1e-3 | 2.5 |
| `bsk_ref_motorTorque.csv` | `tests/data/bsk/seed_motorTorque.toml` | 1e-2 | 10 |

Columns (25, header line first): t (the recorder's nanoseconds times `macros.NANO2SEC`), r_BN_N, v_BN_N, sigma_BN, omega_BN_B (`scStateOutMsg`), theta1, thetaDot1,
theta2, thetaDot2 (the panels' `hingedRigidBodyOutMsg`), totOrbEnergy, totRotEnergy, totOrbAngMomPntN_N,
totRotAngMomPntC_N (the `Spacecraft` members, `sc.logger`). Numbers are written with 17 significant digits
(`%.17g`), which round-trips every float64 exactly.

`--check` writes nothing: it regenerates in memory and compares with the files in `--out` (exit status 1 on any
difference beyond the `%.17g` round trip, i.e. any bit).
"""

import argparse
import importlib.metadata
import io
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ next to the data
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bsk"))
import bsk_run  # tests/data/bsk/bsk_run.py: the runner of the .npz references

SAVE_DT = 0.01
CASES = {  # CSV name -> seed scenario of tests/data/bsk/
    "bsk_ref_noGravity_noDamping.csv": "seed_noGravity",
    "bsk_ref_noGravity_damping.csv": "seed_damping",
    "bsk_ref_motorTorque.csv": "seed_motorTorque",
}
HEADER = ",".join(
    ["t"]
    + [f"{k}_{i}" for k in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B") for i in (1, 2, 3)]
    + ["theta1", "thetaDot1", "theta2", "thetaDot2", "totOrbEnergy", "totRotEnergy"]
    + [f"{k}_{i}" for k in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N") for i in (1, 2, 3)]
)


def table(seed):
    """Basilisk's run of `tests/data/bsk/<seed>.toml`, sampled every SAVE_DT: the (T, 25) array of the CSV."""
    scen = bsk_run.load_scenario(HERE.parent / "bsk" / f"{seed}.toml")
    scen["simulation"]["save_dt"] = SAVE_DT
    out = bsk_run.run(scen)
    if out["theta"].shape[1] != 2:
        raise RuntimeError(f"{seed}: the CSV layout has two panels, the scenario {out['theta'].shape[1]}")
    from Basilisk.utilities import macros

    # sample times as Basilisk's scripts make them: the recorder's integer nanoseconds (checked by bsk_run to be
    # k * save_dt) times macros.NANO2SEC (1e-9; e.g. 2.0100000000000002 s, not 201 * 0.01 or 2.01)
    t = np.rint(out["t"] * 1e9).astype(np.int64) * macros.NANO2SEC
    th, thd = out["theta"], out["thetaDot"]
    return np.column_stack([
        t, out["r_BN_N"], out["v_BN_N"], out["sigma_BN"], out["omega_BN_B"], th[:, 0], thd[:, 0],
        th[:, 1], thd[:, 1], out["totOrbEnergy"], out["totRotEnergy"], out["totOrbAngMomPntN_N"],
        out["totRotAngMomPntC_N"],
    ])  # fmt: skip


def to_csv(a):
    buf = io.StringIO()
    np.savetxt(buf, a, fmt="%.17g", delimiter=",", header=HEADER, comments="")
    return buf.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    ap.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    args = ap.parse_args(argv)
    print(f"bsk {importlib.metadata.version('bsk')}, numpy {np.__version__}")
    bad = 0
    for name, seed in CASES.items():
        a = table(seed)
        path = args.out / name
        if args.check:
            old = np.loadtxt(path, delimiter=",", skiprows=1)
            same_text = path.read_text() == to_csv(a)
            diff = np.abs(old - a).max() if old.shape == a.shape else np.inf
            print(f"{name}: {a.shape}, max |difference| {diff:.3g}, identical text: {same_text}")
            bad += not (old.shape == a.shape and np.array_equal(old, a))
        else:
            path.write_text(to_csv(a))
            print(f"{name}: {a.shape} written")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
