"""Execute every notebook in notebooks/ (each states its claims and asserts them).

The cells run in an IPython shell inside the test process (the same interpreter a Jupyter kernel runs, without
starting one: a kernel costs seconds of start-up and imports per notebook), in the notebook's folder, with a fresh
namespace per notebook; any failing cell or assert fails the test. `python notebooks/execute.py` runs them in
real kernels and stores their outputs in the files."""

import glob
import os

import matplotlib
import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(os.path.dirname(path))
    shell = InteractiveShell.instance()
    shell.reset(new_session=True)
    nb = nbformat.read(path, as_version=4)
    try:
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            result = shell.run_cell(cell.source, store_history=False, silent=True)
            error = result.error_before_exec or result.error_in_exec
            assert result.success, f"{os.path.basename(path)}, code cell {i + 1}: {error!r}\n{cell.source}"
    finally:
        plt.close("all")
        shell.reset(new_session=True)
