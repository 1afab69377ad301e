"""The outputs of sensitivities and the metrics of campaigns as declarations (`_analysis/_studies/_outputs.py`,
issue 44): the docs table is made from them, and a new metric is one declaration."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import jax

from jaxhinge._analysis._studies import _outputs

jax.config.update("jax_enable_x64", True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_docs_outputs_table_is_the_declarations():
    """docs/sweeps-and-sensitivities.md holds the table `markdown_table()` makes from the declarations (regenerate
    it with `python -m jaxhinge._analysis._studies._outputs`)."""
    text = pathlib.Path(ROOT, "docs", "sweeps-and-sensitivities.md").read_text()
    m = re.search(r"<!-- outputs:begin[^\n]*-->\n(.*?)<!-- outputs:end -->", text, re.DOTALL)
    assert m, "docs/sweeps-and-sensitivities.md lacks the <!-- outputs:begin/end --> markers"
    assert m.group(1) == _outputs.markdown_table()


def test_every_declaration_is_named_once_and_knows_its_layout():
    """One name per declaration; every one has a unit, a description and its options' words when it takes any."""
    names = [o.name for o in _outputs.DECLARED]
    assert len(names) == len(set(names)) == len(_outputs.OUTPUTS)
    for o in _outputs.DECLARED:
        assert o.unit and o.description and o.options == ()
        assert bool(o.option_keys) == bool(o.option_text), o.name
        assert o.kind in ("history", "scalar", "vector", "modal")


_NEW_METRIC = """    FinalValue("final_thetaDot", _U["thetaDot"], "hypothetical: hinge rate at t_end, one per panel",
               history="thetaDot"),
"""

_SCRIPT = textwrap.dedent('''
    import os, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import jaxhinge as jh
    from jaxhinge._analysis._studies import _outputs
    from jaxhinge._jobs._campaign_chunks import metric_layout
    from jaxhinge._analysis._studies._sensitivity import output_blocks
    from jaxhinge._jobs._sensitivity import load_study, run_study
    from jaxhinge._jobs._sweep import load_sweep
    assert jh.__file__.startswith(sys.argv[1]), jh.__file__
    scenario = jh.example_path("two_panel")
    with open("SENS.toml", "w") as f:  # parsed from a SENS file
        f.write(f'scenario = "{scenario}"\\noutputs = ["final_thetaDot", "final_theta"]\\nparameters = ["p0.k"]\\n'
                'tornado = ["final_thetaDot[p0]"]\\n[output]\\ndir = "sens_out"\\n')
    study = load_study("SENS.toml")
    res = run_study(study)  # computed
    b = res.block("final_thetaDot")  # sized
    assert b.shape == (2,) and b.labels == ("p0", "p1") and b.unit == "rad/s" and b.kind == "vector", b
    s = jh.load_scenario(scenario)
    ref = np.asarray(jh.simulate(s).thetaDot)[-1]
    v, J, _ = res.output("final_thetaDot")
    np.testing.assert_allclose(v, ref, rtol=1e-12, atol=1e-15)
    assert np.all(np.isfinite(J)) and np.any(J != 0)
    with open("SWEEP.toml", "w") as f:  # parsed from a SWEEP file
        f.write(f'scenario = "{scenario}"\\nmembers = 4\\n[[dispersions]]\\nparam = "p0.k"\\ndist = "uniform"\\n'
                'low = 80.0\\nhigh = 120.0\\n[metrics]\\nnames = ["final_thetaDot"]\\n[output]\\ndir = "sweep_out"\\n')
    sweep = load_sweep("SWEEP.toml")
    assert [o.name for o in sweep.metrics][0] == "final_thetaDot", sweep.metrics
    meta, coords = metric_layout(sweep.scenario, output_blocks(sweep.scenario, sweep.metrics))  # its store array
    assert meta["final_thetaDot"] == (("panel",), "rad/s", "metric final_thetaDot"), meta
    try:
        jh.sensitivity(s, ["final_thetaDott"])
    except jh.SensitivityError as e:  # among the names a file may give
        assert "did you mean 'final_thetaDot'" in str(e) and "final_thetaDot, or a time history" in str(e), e
    else:
        raise AssertionError("a misspelt output was accepted")
    row = [r for r in _outputs.markdown_table().splitlines() if r.startswith("| `final_thetaDot` ")]
    assert row == ["| `final_thetaDot` |  | hypothetical: hinge rate at t_end, one per panel | rad/s |"], row  # documented
    print("ok")
''')


def test_a_new_metric_is_one_declaration(tmp_path):
    """Must-show of issue 44: a metric declared in a copy of the outputs table (and nowhere else) is parsed from a
    SENS and a SWEEP file, computed, sized (its block, its campaign-store array) and in the docs table."""
    pkg = tmp_path / "jaxhinge"
    shutil.copytree(os.path.join(ROOT, "jaxhinge"), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    module = pkg / "_analysis" / "_studies" / "_outputs.py"
    text = module.read_text()
    anchor = "    # -- the time histories"
    assert anchor in text
    module.write_text(text.replace(anchor, _NEW_METRIC + anchor, 1))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, "-c", _SCRIPT, str(pkg)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600, check=False)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_wheel_metrics_reduce_the_wheel_speed_history():
    """`final_Omega` and `peak_abs_Omega` are the last row and the largest |.| of the `Omega` history computed in
    the same run (numpy here), one per wheel, labelled by the wheels' names; the wheels' store axis is `wheel`."""
    import numpy as np

    import jaxhinge as jh
    from jaxhinge._analysis._studies._sensitivity import output_blocks, parse_outputs
    from jaxhinge._jobs._campaign_chunks import metric_layout

    s = jh.load_scenario(jh.example_path("wheels_slew"))
    res = jh.sensitivity(s, ["final_Omega", "peak_abs_Omega", "Omega"], ["hub.mHub"], mode="forward")
    history = res.output("Omega")[0]
    wheels = s.spacecraft.wheels.labels
    for name, expected in (("final_Omega", history[-1]), ("peak_abs_Omega", np.abs(history).max(axis=0))):
        b = res.block(name)
        assert b.labels == wheels and b.axis == "wheel" and b.unit == "rad/s"
        assert np.array_equal(res.output(name)[0], expected)
    meta, coords = metric_layout(s, output_blocks(s, parse_outputs(s, ["final_Omega", "peak_abs_theta"])))
    assert meta["final_Omega"][0] == ("wheel",) and coords["wheel"] == wheels
    assert meta["peak_abs_theta"][0] == ("panel",) and coords["panel"] == s.spacecraft.panels.labels
