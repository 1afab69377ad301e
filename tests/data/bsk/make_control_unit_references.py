"""Basilisk's own mrpFeedback unit test (`src/fswAlgorithms/attControl/mrpFeedback/_UnitTest/test_mrpFeedback.py`)
run in bsk 2.12.1, its outputs saved for tests/test_control.py: `control_unit_tests.json`.

    python tests/data/bsk/make_control_unit_references.py [OUT_DIR]

The test's inputs (a fixed guidance message with a rotating reference: sigma_BR = [0.3, -0.5, 0.7], omega_BR_B =
[0.01, -0.02, 0.015], omega_RN_B = [-0.02, -0.01, 0.005], domega_RN_B = [2e-4, 3e-4, 1e-4]; ISCPntB_B =
diag(1000, 800, 800); K = 0.15, P = 150, knownTorquePntB_B = [1, 1, 1]; four wheels (three orthogonal and one
skewed, Js = 0.1, speeds 10, 25, 50, 100 rad/s) or none; Ki = 0.01 or -1; integralLimit = 0 or 20; the module
updated every 0.5 s from 0 to 1 s, then `Reset`, then to 2 s), as its parametrisation with all wheels available.
Written per case: the inputs and the five `torqueRequestBody` outputs (t = 0, 0.5, 1.0, 1.5, 2.0). The test file's
tolerance is 1e-8; the file also states the test's own truth model (a Python re-derivation), which these
outputs are checked against here to that tolerance.
"""

import itertools
import json
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
SIGMA_BR = [0.3, -0.5, 0.7]
OMEGA_BR_B = [0.010, -0.020, 0.015]
OMEGA_RN_B = [-0.02, -0.01, 0.005]
DOMEGA_RN_B = [0.0002, 0.0003, 0.0001]
ISC = [1000.0, 0.0, 0.0, 0.0, 800.0, 0.0, 0.0, 0.0, 800.0]
OMEGA = [10.0, 25.0, 50.0, 100.0]
GS = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.577350269190, 0.577350269190, 0.577350269190]
JS = [0.1, 0.1, 0.1, 0.1]
K, P, KNOWN = 0.15, 150.0, [1.0, 1.0, 1.0]


def run_case(ki, rw_num, integral_limit):
    from Basilisk.architecture import messaging
    from Basilisk.fswAlgorithms import mrpFeedback
    from Basilisk.utilities import SimulationBaseClass, macros

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("p")
    proc.addTask(sim.CreateNewTask("t", macros.sec2nano(0.5)))
    mod = mrpFeedback.mrpFeedback()
    mod.ModelTag = "mrpFeedback"
    sim.AddModelToTask("t", mod)
    mod.K, mod.Ki, mod.P, mod.integralLimit = K, ki, P, integral_limit
    mod.knownTorquePntB_B = KNOWN
    guid = messaging.AttGuidMsgPayload()
    guid.sigma_BR, guid.omega_BR_B, guid.omega_RN_B, guid.domega_RN_B = SIGMA_BR, OMEGA_BR_B, OMEGA_RN_B, DOMEGA_RN_B
    guid_msg = messaging.AttGuidMsg().write(guid)
    veh = messaging.VehicleConfigMsgPayload()
    veh.ISCPntB_B = ISC
    veh_msg = messaging.VehicleConfigMsg().write(veh)
    speeds = messaging.RWSpeedMsgPayload()
    speeds.wheelSpeeds = OMEGA
    speed_msg = messaging.RWSpeedMsg().write(speeds)
    mod.guidInMsg.subscribeTo(guid_msg)
    mod.vehConfigInMsg.subscribeTo(veh_msg)
    mod.rwSpeedsInMsg.subscribeTo(speed_msg)
    keep = [guid, guid_msg, veh, veh_msg, speeds, speed_msg]
    if rw_num > 0:
        cfg = messaging.RWArrayConfigMsgPayload()
        cfg.GsMatrix_B = GS
        cfg.JsList = JS
        cfg.numRW = rw_num
        cfg_msg = messaging.RWArrayConfigMsg().write(cfg)
        mod.rwParamsInMsg.subscribeTo(cfg_msg)
        keep += [cfg, cfg_msg]
    rec = mod.cmdTorqueOutMsg.recorder()
    sim.AddModelToTask("t", rec)
    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(1.0))
    sim.ExecuteSimulation()
    mod.Reset(1)
    sim.ConfigureStopTime(macros.sec2nano(2.0))
    sim.ExecuteSimulation()
    return np.asarray(rec.times(), dtype=float) * 1e-9, np.asarray(rec.torqueRequestBody, dtype=float)


def truth(ki, rw_num, integral_limit):
    """The test file's own truth model (findTrueTorques), restated: its calls' dt are [0, 0, 0.5, 0, 0.5]."""
    out, s_int = [], np.zeros(3)
    w_br, w_rn = np.array(OMEGA_BR_B), np.array(OMEGA_RN_B)
    w = w_br + w_rn
    isc = np.reshape(ISC, (3, 3))
    gs = np.reshape(GS[: 3 * rw_num], (rw_num, 3))
    for dt in [0, 0, 0.5, 0, 0.5]:
        if dt == 0:
            s_int = np.zeros(3)
        if ki > 0:
            s_int = K * dt * np.array(SIGMA_BR) + s_int
            s_int = np.where(np.abs(s_int) > integral_limit, integral_limit * np.sign(s_int), s_int)
            z = s_int + isc @ w_br
        else:
            z = np.zeros(3)
        hs = sum((JS[i] * (w @ gs[i] + OMEGA[i]) * gs[i] for i in range(rw_num)), np.zeros(3))
        lr = K * np.array(SIGMA_BR) + P * w_br + P * ki * z - np.cross(w_rn + ki * z, isc @ w + hs)
        lr = lr + isc @ (-np.array(DOMEGA_RN_B) + np.cross(w, w_rn)) + np.array(KNOWN)
        out.append(-lr)
    return np.array(out)


def main(argv):
    out_dir = pathlib.Path(argv[0]) if argv else HERE
    import importlib.metadata

    cases, fails = [], 0
    for ki, rw_num, lim in itertools.product([0.01, -1.0], [4, 0], [0.0, 20.0]):
        t, lr = run_case(ki, rw_num, lim)
        err = float(np.max(np.abs(lr - truth(ki, rw_num, lim))))
        ok = err < 1e-8
        fails += not ok
        print(f"Ki = {ki:5}, rwNum = {rw_num}, integralLimit = {lim:4}: {len(t)} outputs, |bsk - test truth| = {err:.1e}"
              f" [{'ok' if ok else 'FAIL'}]")
        cases.append({"Ki": ki, "rwNum": rw_num, "integralLimit": lim, "t": t.tolist(), "torqueRequestBody": lr.tolist()})
    data = {"source": "src/fswAlgorithms/attControl/mrpFeedback/_UnitTest/test_mrpFeedback.py (useRwAvailability = NO)",
            "bsk_version": importlib.metadata.version("bsk"), "tolerance": 1e-8,
            "inputs": {"sigma_BR": SIGMA_BR, "omega_BR_B": OMEGA_BR_B, "omega_RN_B": OMEGA_RN_B,
                       "domega_RN_B": DOMEGA_RN_B, "ISCPntB_B": ISC, "wheelSpeeds": OMEGA, "GsMatrix_B": GS,
                       "JsList": JS, "K": K, "P": P, "knownTorquePntB_B": KNOWN, "update_s": 0.5,
                       "reset_after_s": 1.0},
            "cases": cases}
    (out_dir / "control_unit_tests.json").write_text(json.dumps(data, indent=1) + "\n")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
