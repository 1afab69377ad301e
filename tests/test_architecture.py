"""The layout docs/architecture.md describes: floors that only look down (no import from a higher floor and none
of the public face from inside the package), no import cycle, no module over `MAX_LINES` lines, one physics code
path for every panel (no chain special case), and notebooks that use the public API only.

The layout checks are functions of a package folder: the tests run them on jaxhinge, and on small packages written
for the test, each breaking one rule in one way, on which they must fail."""

import ast
import glob
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "jaxhinge")
MAX_LINES = 600  # a module a reader holds in their head (CONVENTIONS.md 20)

# The floors, bottom up, as module prefixes under the package (the longest matching prefix decides): a module
# imports from its own floor or lower ones only. `_analysis/` has two storeys: `_linear/` below the fits and
# studies that use it. The public face (the package's `__init__.py`) is above them all and imported by none.
FLOORS = [
    ("_errors", "_format", "_math", "_paths", "_version", "_runtime"),
    ("_model",),
    ("_io",),
    ("_dynamics",),
    # the scenario loader: a `[control]` without an inertia model gets the spacecraft's inertia at the initial hinge
    # angles, which the dynamics compute (docs/architecture.md, "The scenario loader")
    ("_io._scenario_file",),
    ("_simulation",),
    ("_analysis", "_analysis._linear"),
    ("_analysis._fitting", "_analysis._studies"),
    ("_report",),
    ("_jobs",),
    ("_cli", "_entry", "__main__"),
]
APART = [("_analysis._fitting", "_analysis._studies")]  # side by side on one floor: neither imports the other


# ------------------------------------------------------------------------------------------------------------
# The import graph of a package folder, read from its source (nothing is imported)
# ------------------------------------------------------------------------------------------------------------


def _modules(pkg_dir: str) -> dict[str, str]:
    """Module name -> file, e.g. `jaxhinge._io._fea`; a package is its `__init__.py` (`jaxhinge._io`)."""
    top = os.path.dirname(os.path.abspath(pkg_dir))
    out = {}
    for path in sorted(glob.glob(os.path.join(pkg_dir, "**", "*.py"), recursive=True)):
        name = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
        out[name.removesuffix(".__init__")] = path
    return out


def _resolve(package: str, level: int, module: str | None) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `package`."""
    base = package.split(".")
    base = base[: len(base) - (level - 1)] if level else []
    return ".".join(base + ([module] if module else []))


def _imports(name: str, path: str, known: set[str]) -> tuple[list[tuple[str, int, bool]], list[str]]:
    """Every import of a module of the package by module `name` (file `path`): `(target, line, at import time)`
    for `import`, `from ... import` (relative or absolute; `from X import y` is the module `X.y` when there is
    one, else `X`, whose `__init__` defines `y`), `importlib.import_module` / `__import__` with a literal name
    (relative to a literal package, `__name__` or `__package__`), and the public face's lazy table (`_PUBLIC`:
    `{name: (module, attribute)}`); and the problems: an import of a computed name, which cannot be checked.
    Imports inside functions run later (`at import time` False); `TYPE_CHECKING` blocks count as imports."""
    root = name.split(".")[0]
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: list[tuple[str, int, bool]] = []
    problems: list[str] = []

    def visit(node, now: bool):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.level, node.module)
            for a in node.names:
                found.append((f"{base}.{a.name}" if f"{base}.{a.name}" in known else base, node.lineno, now))
        elif isinstance(node, ast.Import):
            found.extend((a.name, node.lineno, now) for a in node.names)
        elif isinstance(node, ast.Call) and _is_import_call(node.func):
            target = _literal_target(node, name, package)
            if target is None:
                if name != root:  # the public face's __getattr__ imports what its _PUBLIC table names
                    problems.append(f"{name}:{node.lineno} imports a module whose name is computed (not a "
                                    "string literal): its floor cannot be checked")
            else:
                found.append((target, node.lineno, now))
        elif (name == root and isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
              and any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in node.targets)):
            for v in node.value.values:
                if isinstance(v, ast.Tuple) and isinstance(v.elts[0], ast.Constant):
                    found.append((f"{root}.{v.elts[0].value}", v.lineno, False))
        inner = now and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    mine = [(t, line, now) for t, line, now in found if t == root or t.startswith(root + ".")]
    return mine, problems


def _is_import_call(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))


def _literal_target(call: ast.Call, name: str, package: str) -> str | None:
    """The module `import_module(...)` / `__import__(...)` loads, or None when its name is not a literal."""
    if not call.args or not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return None
    target = call.args[0].value
    if not target.startswith("."):
        return target
    anchor = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "package"),
                                                          None)
    if isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
        anchor = anchor.value
    elif isinstance(anchor, ast.Name) and anchor.id in ("__name__", "__package__"):
        anchor = name if anchor.id == "__name__" else package
    else:
        return None
    level = len(target) - len(target.lstrip("."))
    return _resolve(anchor, level, target[level:] or None)


def import_graph(pkg_dir: str, import_time_only: bool = False) -> tuple[dict[str, set[str]], list[str]]:
    """`({module: modules of the package it imports}, problems)`: every import, or (`import_time_only`) those
    that run when the module is imported."""
    mods = _modules(pkg_dir)
    graph, problems = {}, []
    for name, path in mods.items():
        found, bad = _imports(name, path, set(mods))
        graph[name] = {t for t, _, now in found if (now or not import_time_only) and t != name}
        problems += bad
    return graph, problems


def _floor(mod: str, root: str) -> int | None:
    best, floor = -1, None
    for i, prefixes in enumerate(FLOORS):
        for p in prefixes:
            full = f"{root}.{p}"
            if (mod == full or mod.startswith(full + ".")) and len(full) > best:
                best, floor = len(full), i
    return floor


def _under(mod: str, root: str, prefix: str) -> bool:
    return mod == f"{root}.{prefix}" or mod.startswith(f"{root}.{prefix}.")


def floor_problems(pkg_dir: str) -> list[str]:
    """Every import, at module level or inside a function, that goes to a higher floor, or to the public face from
    inside the package, or across `APART`, or that cannot be checked; a module on no floor."""
    mods = _modules(pkg_dir)
    root = os.path.basename(os.path.abspath(pkg_dir))
    bad = []
    for name, path in mods.items():
        found, problems = _imports(name, path, set(mods))
        bad += problems
        if name == root:  # the public face: above every floor
            continue
        mine = _floor(name, root)
        if mine is None:
            bad.append(f"{name}: on no floor; add it to FLOORS (and to docs/architecture.md)")
            continue
        for target, line, _ in found:
            theirs = _floor(target, root)
            if target == root:
                bad.append(f"{name}:{line} imports the public face ({root}): import from the module that "
                           "defines the name")
            elif theirs is None:
                bad.append(f"{name}:{line} imports {target}, on no floor")
            elif theirs > mine:
                bad.append(f"{name}:{line} (floor {mine}) imports {target} (floor {theirs})")
            elif any(_under(name, root, a) and _under(target, root, b) for pair in APART
                     for a, b in (pair, pair[::-1])):
                bad.append(f"{name}:{line} imports {target}: they stand side by side (APART)")
    return sorted(set(bad))


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (`[a, b, ..., a]`), or None."""
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return [*path[path.index(d):], d] if d in path else [*path, d]
            if d not in state and (cycle := visit(d, [*path, d])):
                return cycle
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m, [m])):
            return cycle
    return None


def long_modules(pkg_dir: str, limit: int = MAX_LINES) -> list[str]:
    out = []
    for name, path in _modules(pkg_dir).items():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > limit:
            out.append(f"{name}: {n} lines > {limit}")
    return out


# ------------------------------------------------------------------------------------------------------------
# jaxhinge
# ------------------------------------------------------------------------------------------------------------


def test_floors_only_look_down():
    """Every import of a jaxhinge module (relative, absolute, through the public face, `importlib`), at module
    level or inside a function, goes to the same floor or a lower one."""
    bad = floor_problems(PKG)
    assert not bad, "imports that break the floors:\n" + "\n".join(bad)


def test_no_import_cycle():
    """No cycle, counting the imports inside functions too (a lazy import is still a dependency); the packages'
    `__init__` files are empty, except the public face."""
    graph, problems = import_graph(PKG)
    assert not problems
    assert (cycle := import_cycle(graph)) is None, "import cycle: " + " -> ".join(cycle)
    for name, path in _modules(PKG).items():
        if path.endswith("__init__.py") and name != "jaxhinge":
            assert os.path.getsize(path) == 0, name


def test_no_module_over_max_lines():
    assert not long_modules(PKG), long_modules(PKG)


def private_imports(pkg_dir: str) -> list[str]:
    """Every `from X import _y` by which a module takes a private name (one underscore, not a module) of another
    module of the package: a seam between modules is a public name (CONVENTIONS.md 13-24)."""
    modules = _modules(pkg_dir)
    bad = []
    for name, path in modules.items():
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _resolve(package, node.level, node.module)
            if base.split(".")[0] != name.split(".")[0]:
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__") and f"{base}.{a.name}" not in modules:
                    bad.append(f"{name}:{node.lineno} imports the private name {a.name} of {base}")
    return bad


def test_no_private_name_crosses_a_module():
    assert not private_imports(PKG), "\n".join(private_imports(PKG))


# The checks fail: a small package named jaxhinge with a model module `_model/_a.py`, a file module `_io/_b.py`
# and a public face; each case adds or replaces files so that one rule is broken in one way.
_CLEAN = {
    "__init__.py": "import importlib\n_PUBLIC = {'x': ('_io._b', 'x')}\n\n\ndef __getattr__(name):\n"
                   "    return importlib.import_module(f'.{_PUBLIC[name][0]}', __name__)\n",
    "_math.py": "x = 1\n",
    "_model/__init__.py": "",
    "_model/_a.py": "from .._math import x\n",
    "_model/_c.py": "from ._a import x\n",
    "_io/__init__.py": "",
    "_io/_b.py": "from .._model._a import x\nfrom jaxhinge._model import _c\nimport jaxhinge._math\n",
}
_BROKEN = {
    "relative upward import": ({"_model/_a.py": "from .._io._b import x\n"}, "floor", r"_model\._a:1 .*_io\._b"),
    "absolute upward import": ({"_model/_a.py": "import jaxhinge._io._b\n"}, "floor", r"_model\._a:1 .*_io\._b"),
    "upward module by from-import": ({"_model/_a.py": "from jaxhinge._io import _b\n"}, "floor",
                                     r"_model\._a:1 .*_io\._b"),
    "from .. import x (the public face)": ({"_model/_a.py": "from .. import x\n"}, "floor",
                                           r"_model\._a:1 imports the public face"),
    "from jaxhinge import x": ({"_model/_a.py": "from jaxhinge import x\n"}, "floor",
                               r"_model\._a:1 imports the public face"),
    "import jaxhinge": ({"_model/_a.py": "import jaxhinge\n"}, "floor", r"_model\._a:1 imports the public face"),
    "upward import inside a function": ({"_model/_a.py": "def f():\n    from .._io import _b\n"}, "floor",
                                        r"_model\._a:2 .*_io\._b"),
    "importlib with a literal name": (
        {"_model/_a.py": "import importlib\n\n\ndef f():\n    return importlib.import_module('jaxhinge._io._b')\n"},
        "floor", r"_model\._a:5 .*_io\._b"),
    "importlib relative to __package__": (
        {"_model/_a.py": "from importlib import import_module\nm = import_module('.._io._b', __package__)\n"},
        "floor", r"_model\._a:2 .*_io\._b"),
    "importlib with a computed name": (
        {"_model/_a.py": "import importlib\nm = importlib.import_module('jaxhinge.' + '_io')\n"},
        "floor", r"_model\._a:2 .*computed"),
    "a module on no floor": ({"_extra.py": "x = 1\n"}, "floor", r"_extra: on no floor"),
    "side by side": ({"_analysis/__init__.py": "", "_analysis/_fitting/__init__.py": "",
                      "_analysis/_fitting/_f.py": "from .._studies import _s\n", "_analysis/_studies/__init__.py": "",
                      "_analysis/_studies/_s.py": "x = 1\n"}, "floor", r"_fitting\._f:1 imports .*_studies\._s"),
    "cycle at import time": ({"_model/_a.py": "from ._c import y\n"}, "cycle", r"_a -> .*_c -> .*_a"),
    "cycle through a lazy import": ({"_model/_a.py": "def f():\n    from ._c import y\n"}, "cycle",
                                    r"_a -> .*_c -> .*_a"),
    "long module": ({"_model/_a.py": "x = 1\n" * (MAX_LINES + 1)}, "length", rf"_model\._a: {MAX_LINES + 1} lines"),
    "a private name across modules": ({"_model/_c.py": "from ._a import _y\n"}, "private",
                                      r"_model\._c:1 imports the private name _y of jaxhinge\._model\._a"),
}


def _write(tmp_path, files) -> str:
    pkg = tmp_path / "jaxhinge"
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return str(pkg)


def _problems(pkg: str, check: str) -> list[str]:
    if check == "floor":
        return floor_problems(pkg)
    if check == "private":
        return private_imports(pkg)
    if check == "cycle":
        graph, problems = import_graph(pkg)
        cycle = import_cycle(graph)
        return problems + ([] if cycle is None else [" -> ".join(cycle)])
    return long_modules(pkg)


@pytest.mark.parametrize("case", list(_BROKEN))
def test_checks_fail_on_a_package_that_breaks_them(tmp_path, case):
    """The same checks as above, on the small clean package (no problem) and on it broken one way (found, by
    module, line and target)."""
    clean = _write(tmp_path / "clean", _CLEAN)
    assert not floor_problems(clean) and import_cycle(import_graph(clean)[0]) is None and not long_modules(clean)
    assert not private_imports(clean)
    assert import_graph(clean)[0]["jaxhinge"] == {"jaxhinge._io._b"}  # the public face's lazy table is read
    change, check, match = _BROKEN[case]
    found = _problems(_write(tmp_path / "broken", {**_CLEAN, **change}), check)
    assert any(re.search(match, p) for p in found), found


# ------------------------------------------------------------------------------------------------------------
# Physics and notebooks
# ------------------------------------------------------------------------------------------------------------


def test_physics_has_one_code_path_for_every_panel():
    """The dynamics and the linearisation never ask whether a panel is in a chain: the topology (parent
    indices) enters as data through `Topology`."""
    linear = os.path.join(PKG, "_analysis", "_linear")
    for path in glob.glob(os.path.join(PKG, "_dynamics", "*.py")) + [os.path.join(linear, "_modes.py"),
                                                                      os.path.join(linear, "_linearize.py")]:
        with open(path, encoding="utf-8") as f:
            code = f.read()
        for node in ast.walk(ast.parse(code)):
            name = getattr(node, "attr", None) or getattr(node, "id", None) or ""
            assert "chain" not in name.lower(), (path, node.lineno, name)
            if isinstance(node, (ast.If, ast.IfExp)):
                assert "chain" not in ast.get_source_segment(code, node.test), (path, node.lineno)


def test_notebooks_use_the_public_api_only():
    for path in glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")):
        with open(path, encoding="utf-8") as f:
            cells = json.load(f)["cells"]
        for cell in cells:
            src = "".join(cell["source"])
            assert not re.search(r"jaxhinge\._|from jaxhinge import _", src), (os.path.basename(path), src[:80])
