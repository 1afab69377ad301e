"""Run every notebook here in a Jupyter kernel and store its outputs (figures, printed numbers) in the file, so a
reader browsing the repository sees them: `python notebooks/execute.py [name.ipynb ...]`. The test suite runs the
same cells (tests/test_notebooks.py) without storing anything."""

import glob
import os
import sys

import nbformat
from nbclient import NotebookClient

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    for path in sys.argv[1:] or sorted(glob.glob(os.path.join(HERE, "*.ipynb"))):
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": HERE}}).execute()
        nbformat.write(nb, path)
        print("executed", os.path.basename(path))
