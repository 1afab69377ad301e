"""The layout the README's "Architecture" section describes: no import cycle between jaxhinge's modules, the
physics has one code path for every panel (no chain special case), and notebooks use the public API only."""

import ast
import glob
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "jaxhinge")


def _module(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel.removesuffix(".__init__")


def _imports(path: str) -> set[str]:
    """Module-level (import-time) imports of jaxhinge modules by the module at `path`."""
    mod = _module(path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out = set()
    for node in ast.parse(open(path).read()).body:  # module level only: function-local imports run later
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n.startswith("jaxhinge.") and os.path.exists(_file(n))}
    return out - {mod}


def _file(mod: str) -> str:
    p = os.path.join(ROOT, *mod.split("."))
    return p + ".py" if os.path.exists(p + ".py") else os.path.join(p, "__init__.py")


def test_no_import_cycle():
    graph = {_module(p): _imports(p) for p in glob.glob(os.path.join(PKG, "**", "*.py"), recursive=True)}
    # packages' __init__ files are empty (except jaxhinge/__init__.py, the public face, imported by nobody)
    assert "jaxhinge" not in {m for deps in graph.values() for m in deps}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for d in graph.get(m, ()):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, m, d]))
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


def test_physics_has_one_code_path_for_every_panel():
    """The dynamics and the linearisation never ask whether a panel is in a chain: the topology (parent
    indices) enters as data through `Topology`."""
    for path in glob.glob(os.path.join(PKG, "_dynamics", "*.py")) + [os.path.join(PKG, "_analysis", "_modes.py")]:
        code = open(path).read()
        for node in ast.walk(ast.parse(code)):
            name = getattr(node, "attr", None) or getattr(node, "id", None) or ""
            assert "chain" not in name.lower(), (path, node.lineno, name)
            if isinstance(node, (ast.If, ast.IfExp)):
                assert "chain" not in ast.get_source_segment(code, node.test), (path, node.lineno)


def test_notebooks_use_the_public_api_only():
    for path in glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")):
        for cell in json.load(open(path))["cells"]:
            src = "".join(cell["source"])
            assert not re.search(r"jaxhinge\._|from jaxhinge import _", src), (os.path.basename(path), src[:80])
