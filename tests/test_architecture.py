"""The layout docs/architecture.md describes: floors that only look down (no import from a higher floor, no
import cycle), the physics has one code path for every panel (no chain special case), and notebooks use the
public API only."""

import ast
import glob
import json
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "jaxhinge")


def _module(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel.removesuffix(".__init__")


def _imports(path: str, lazy: bool = False) -> set[str]:
    """Imports of jaxhinge modules by the module at `path`: at module level (import time), or with `lazy` also
    those inside functions (`TYPE_CHECKING` blocks and the public face's lazy table are not imports)."""
    mod = _module(path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out = set()
    tree = ast.parse(open(path).read())
    for node in (ast.walk(tree) if lazy else tree.body):  # module level: function-local imports run later
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


# The floors, bottom up: a module may import from its own floor or lower ones only.
FLOORS = [
    ("jaxhinge._errors", "jaxhinge._format", "jaxhinge._math", "jaxhinge._paths", "jaxhinge._version",
     "jaxhinge._runtime"),
    ("jaxhinge._model",),
    ("jaxhinge._dynamics",),
    ("jaxhinge._simulation",),
    ("jaxhinge._analysis",),
    ("jaxhinge._report",),
    ("jaxhinge._io",),
    ("jaxhinge._cli", "jaxhinge._entry", "jaxhinge.__main__"),
]


def _floor(mod: str) -> int:
    for i, prefixes in enumerate(FLOORS):
        if any(mod == p or mod.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{mod}: on no floor; add it to FLOORS (and to docs/architecture.md)")


def _graph(lazy: bool = False) -> dict[str, set[str]]:
    return {_module(p): _imports(p, lazy) for p in glob.glob(os.path.join(PKG, "**", "*.py"), recursive=True)}


def test_floors_only_look_down():
    """Every import of a jaxhinge module, at module level or inside a function, goes to the same floor or a lower
    one (`jaxhinge/__init__.py`, the public face, is above them all and imported by nobody)."""
    bad = []
    for mod, deps in _graph(lazy=True).items():
        if mod == "jaxhinge":
            continue
        for d in deps:
            if d == "jaxhinge" or _floor(d) > _floor(mod):
                bad.append(f"{mod} (floor {_floor(mod)}) imports {d}" + ("" if d == "jaxhinge" else
                                                                           f" (floor {_floor(d)})"))
    assert not bad, "imports from a higher floor:\n" + "\n".join(sorted(bad))


def test_floor_check_fails_on_an_upward_import(tmp_path, monkeypatch):
    """The checks above can fail: a module that imports from a higher floor, or two that import each other, are
    reported."""
    pkg = tmp_path / "jaxhinge"
    (pkg / "_model").mkdir(parents=True)
    (pkg / "_io").mkdir()
    (pkg / "_model" / "_a.py").write_text("from .._io._b import x\n")
    (pkg / "_io" / "_b.py").write_text("from .._model._a import y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    graph = {_module(str(p)): _imports(str(p), True) for p in pkg.rglob("*.py")}
    assert graph["jaxhinge._model._a"] == {"jaxhinge._io._b"} and _floor("jaxhinge._io._b") > _floor("jaxhinge._model._a")
    with pytest.raises(AssertionError, match="import cycle"):
        _check_acyclic(graph)


def _check_acyclic(graph: dict[str, set[str]]) -> None:
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


def test_no_import_cycle():
    graph = _graph()
    # packages' __init__ files are empty (except jaxhinge/__init__.py, the public face, imported by nobody)
    assert "jaxhinge" not in {m for deps in graph.values() for m in deps}
    _check_acyclic(graph)


def test_physics_has_one_code_path_for_every_panel():
    """The dynamics and the linearisation never ask whether a panel is in a chain: the topology (parent
    indices) enters as data through `Topology`."""
    for path in glob.glob(os.path.join(PKG, "_dynamics", "*.py")) + [os.path.join(PKG, "_analysis", "_linear", "_modes.py"),
                                                                      os.path.join(PKG, "_analysis", "_linear", "_linearize.py")]:
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
