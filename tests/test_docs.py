"""The documentation: every relative link and `#anchor` in the Markdown files resolves (GitHub's and mkdocs'
heading slugs alike), pages of the site link only inside it, README.md stays short, its test command is what CI
runs, docs/api.md covers the public API, and the site builds with `mkdocs build --strict`. The build needs the
docs packages, which the `test` extra carries (CI's `pip install ".[test]"`); it is skipped without them, except
under CI (`CI=true`), where it fails.

Reads files only (no JAX): a few milliseconds, plus about two seconds for the build."""

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
import unicodedata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 350


def _markdown_files() -> list[str]:
    """Every Markdown file a reader follows links in, relative to the repository root."""
    files = ["README.md", "fits/README.md"]
    for folder in ("docs", "benchmarks"):
        files += sorted(f"{folder}/{f}" for f in os.listdir(os.path.join(ROOT, folder)) if f.endswith(".md"))
    data = os.path.join(ROOT, "tests", "data")
    files += sorted(f"tests/data/{d}/README.md" for d in os.listdir(data)
                    if os.path.isfile(os.path.join(data, d, "README.md")))
    return files


def _read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _prose_lines(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks; code spans blanked out unless `code_spans`."""
    out, fence = [], None
    for i, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        out.append((i, line if code_spans else re.sub(r"(`+)(?:(?!\1).)+?\1", lambda s: " " * len(s.group(0)), line)))
    return out


_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")


def _links(text: str) -> list[tuple[int, str]]:
    found = []
    for i, line in _prose_lines(text):
        found += [(i, m.group(1)) for m in _LINK.finditer(line)]
        m = _REFERENCE.match(line)
        if m:
            found.append((i, m.group(1)))
    return found


def _heading_text(raw: str) -> str:
    """A heading as rendered text: links become their text, emphasis and code marks go."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw.strip().rstrip("#").strip())
    return re.sub(r"[`*]|(?<!\w)_|_(?!\w)", "", text)


def _slug_mkdocs(text: str) -> str:
    """Python-Markdown's `toc` slugify (what mkdocs uses)."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _slug_github(text: str) -> str:
    """GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> tuple[set[str], set[str]]:
    """The heading anchors of a Markdown text, as (mkdocs, GitHub), duplicates numbered as each numbers them."""
    mk, gh = set(), set()
    for _, line in _prose_lines(text, code_spans=True):
        m = re.match(r"^ {0,3}#{1,6}\s+(.*)$", line)
        if not m:
            continue
        title = _heading_text(m.group(1))
        base = _slug_mkdocs(title)
        slug, n = base, 0
        while slug in mk:
            n += 1
            slug = f"{base}_{n}"
        mk.add(slug)
        base = _slug_github(title)
        slug, n = base, 0
        while slug in gh:
            n += 1
            slug = f"{base}-{n}"
        gh.add(slug)
    return mk, gh


def _link_problems(rel: str) -> list[str]:
    problems = []
    here = os.path.dirname(os.path.join(ROOT, rel))
    for line, target in _links(_read(rel)):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:: not checked here
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, rel)
        where = f"{rel}:{line}: {target}"
        if os.path.relpath(dest, ROOT).startswith(os.pardir):
            problems.append(f"{where}: points outside the repository")
            continue
        if not os.path.exists(dest):
            problems.append(f"{where}: no such file")
            continue
        if anchor:
            if not dest.endswith(".md"):
                problems.append(f"{where}: an anchor into a file that is not Markdown")
                continue
            mk, gh = _anchors(_read(os.path.relpath(dest, ROOT)))
            if anchor not in mk or anchor not in gh:
                missing = " and ".join(n for n, s in (("mkdocs", mk), ("GitHub", gh)) if anchor not in s)
                problems.append(f"{where}: no heading with this anchor ({missing})")
    return problems


@pytest.mark.parametrize("rel", _markdown_files())
def test_every_relative_link_and_anchor_resolves(rel):
    assert _link_problems(rel) == []


def _links_out_of_site(rel: str) -> list[str]:
    """Relative links of a docs/ page that leave docs/: they resolve in a clone but not in the built site."""
    here = os.path.dirname(os.path.join(ROOT, rel))
    out = []
    for line, target in _links(_read(rel)):
        path = target.partition("#")[0]
        if not path or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # an anchor here, or an external link
            continue
        if os.path.relpath(os.path.normpath(os.path.join(here, path)), os.path.join(ROOT, "docs")).startswith(os.pardir):
            out.append(f"{rel}:{line}: {target}")
    return out


def test_site_pages_link_inside_the_site():
    """A docs/ page names repository files outside docs/ (README.md, benchmarks/RESULTS.md) in code spans, not
    links: the site does not contain them. (The strict build refuses them too; this check runs without mkdocs.)"""
    pages = [f for f in _markdown_files() if f.startswith("docs/")]
    assert [p for rel in pages for p in _links_out_of_site(rel)] == []


def test_out_of_site_checker_finds_links_out_of_docs(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("[in](b.md#x) [web](https://example.org/../x.md) [out](../README.md)\n"
                                            "`[code](../README.md)` [out](../benchmarks/RESULTS.md#speed)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    assert _links_out_of_site("docs/a.md") == ["docs/a.md:1: ../README.md", "docs/a.md:2: ../benchmarks/RESULTS.md#speed"]


def test_link_checker_finds_broken_links(tmp_path, monkeypatch):
    """The checker itself: a missing file, a missing anchor and a link out of the repository are found; code
    spans, fenced code and external links are not checked."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# Page A\n\n## The `fit` command: FIT.toml\n\n"
        "[ok](#the-fit-command-fittoml) [ok](../b.md) [web](https://example.org/x.md)\n"
        "`[code](missing.md)`\n\n```\n[fenced](missing.md)\n# not a heading\n```\n"
        "[bad](missing.md) [bad](#not-a-heading) [bad](../b.md#nope) [bad](../../outside.md)\n")
    (tmp_path / "b.md").write_text("# B\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    problems = _link_problems("docs/a.md")
    assert [p.split(": ")[1] for p in problems] == ["missing.md", "#not-a-heading", "../b.md#nope",
                                                   "../../outside.md"], problems


def test_readme_is_short():
    lines = _read("README.md").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details to docs/ (at most {README_MAX_LINES})"


def test_readme_test_command_is_what_ci_runs():
    """The one command .ci/run executes (its lines that are not comments, `set` or `cd`: read from the script, not
    written here) is the README's line under the comment that names .ci/run, inside a code block; the extra it
    installs is one pyproject.toml declares."""
    import tomllib

    ci = [ln.strip() for ln in _read(".ci/run").splitlines()
          if ln.strip() and not ln.lstrip().startswith(("#", "set ", "cd "))]
    assert len(ci) == 1, ci
    readme = _read("README.md").splitlines()
    under = [i for i, ln in enumerate(readme) if ln.startswith("#") and ".ci/run" in ln]
    assert len(under) == 1, under
    assert readme[under[0] + 1] == ci[0], (readme[under[0] + 1], ci[0])
    fences = [i for i, ln in enumerate(readme) if _FENCE.match(ln)]
    assert sum(f < under[0] for f in fences) % 2 == 1, "the README's CI command is not inside a code block"
    extra = re.search(r'pip install "\.\[(\w+)\]"', ci[0])
    assert extra, ci[0]
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert extra.group(1) in tomllib.load(f)["project"]["optional-dependencies"]


def test_api_reference_covers_the_public_api():
    import jaxhinge  # cheap: its names are imported on first use

    public = {n for n in jaxhinge.__all__ if not n.startswith("_")}
    documented = set(re.findall(r"^::: jaxhinge\.(\w+)\s*$", _read("docs/api.md"), flags=re.MULTILINE))
    assert public - documented == set(), "public names without an entry in docs/api.md"
    assert documented - public == set(), "docs/api.md entries that jaxhinge/__init__.py does not export"


_DOCS_EXTRA = ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material")


def _missing_docs_packages() -> list[str]:
    missing = []
    for name in _DOCS_EXTRA:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package of a dotted name is absent
            found = False
        if not found:
            missing.append(name)
    return missing


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+(\[[^\]]*\])?", r).group(0).lower() for r in reqs}


def test_test_extra_carries_the_docs_packages():
    """CI installs `.[test]` only: the docs build runs there only if the test extra has every docs package."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert _requirement_names(extras["docs"]) - _requirement_names(extras["test"]) == set()


def test_docs_build(tmp_path):
    missing = _missing_docs_packages()
    if missing:
        why = f"the docs packages are not installed (no {', '.join(missing)}): pip install \".[test]\""
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; under CI the site must build")
        pytest.skip(why)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", os.path.join(ROOT, "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
