"""The file layer (`jaxhinge._io._writers`, `jaxhinge._io._checker`): atomic writers (no temporary file left, the old file kept on failure,
modes from the umask or the replaced file), the all-or-nothing folder writer, the TOML writer (bit-exact floats,
the header line), the JSON helpers (NaN and inf as null) and the checker's one-line errors (TOML syntax with
file:line:col, unknown keys with "did you mean", typed scalars, output folders and files)."""

import json
import math
import os
import stat
import tomllib

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._errors import OutputError, ScenarioError
from jaxhinge._io._checker import Checker as _Checker
from jaxhinge._io._writers import atomic_write, toml_text, write_json, write_output_files
from jaxhinge._format import json_number, to_json
from jaxhinge._paths import output_dir_problem, output_file_problem
from jaxhinge._io._scenario_file import example_path

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # root may write anywhere: no "not writable" case


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ------------------------------------------------------------------------------------------------------------
# atomic_write, write_output_files
# ------------------------------------------------------------------------------------------------------------


def test_atomic_write_writes_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "a.bin"
    atomic_write(path, lambda f: f.write(b"hello"))
    assert path.read_bytes() == b"hello"
    assert os.listdir(tmp_path) == ["a.bin"]


def test_atomic_write_failure_keeps_old_file_and_removes_temp(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old contents\n")

    def write(f):
        f.write(b"half a new file")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        atomic_write(path, write)
    assert path.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_atomic_write_interrupt_removes_temp(tmp_path):
    def write(f):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "new.txt", write)
    assert os.listdir(tmp_path) == []


def test_new_file_mode_follows_umask_not_mkstemp(tmp_path, umask_027):
    """mkstemp creates 0600 files; a new output file gets 0o666 & ~umask like `open(path, "w")` would."""
    atomic_write(tmp_path / "a", lambda f: f.write(b"x"))
    with open(tmp_path / "b", "w") as f:
        f.write("x")
    assert _mode(tmp_path / "a") == 0o640 == _mode(tmp_path / "b")
    write_output_files(tmp_path / "out", {"c": lambda f: f.write(b"x")})
    assert _mode(tmp_path / "out" / "c") == 0o640


def test_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"old")
    os.chmod(path, 0o604)
    atomic_write(path, lambda f: f.write(b"new"))
    assert path.read_bytes() == b"new" and _mode(path) == 0o604
    write_output_files(tmp_path, {"a": lambda f: f.write(b"newer")})
    assert path.read_bytes() == b"newer" and _mode(path) == 0o604


def test_write_output_files_all_or_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.json").write_text("old a\n")

    def boom(f):
        f.write(b"partial")
        raise ValueError("plot failed")

    with pytest.raises(ValueError, match="plot failed"):
        write_output_files(out, {"a.json": lambda f: f.write(b"new a"), "b.png": boom, "c.csv": lambda f: None})
    assert os.listdir(out) == ["a.json"] and (out / "a.json").read_text() == "old a\n"
    written = write_output_files(out, {"a.json": lambda f: f.write(b"new a"), "b.png": lambda f: f.write(b"b")})
    assert written == [str(out / "a.json"), str(out / "b.png")]
    assert sorted(os.listdir(out)) == ["a.json", "b.png"] and (out / "a.json").read_bytes() == b"new a"


def test_interrupted_write_leaves_no_folder_and_no_temp_file(tmp_path):
    """Issue 14 item 15: a fit's outputs (several files in a new folder) interrupted while being written leave
    nothing, not an empty folder; an existing folder stays. `abandon_writes` (the CLI's Ctrl-C handler, run
    while another thread writes) removes the temporary files and the new folder of the writes in progress and
    holds the lock of the final renames."""
    from jaxhinge._io import _writers as _files

    def interrupt(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_output_files(tmp_path / "out", {"result.json": lambda f: f.write(b"{}"), "fit.png": interrupt})
    assert os.listdir(tmp_path) == []
    (tmp_path / "kept").mkdir()
    with pytest.raises(KeyboardInterrupt):
        write_output_files(tmp_path / "kept", {"fit.png": interrupt})
    assert os.listdir(tmp_path) == ["kept"] and os.listdir(tmp_path / "kept") == []

    def handler_runs_now(f):
        assert len(os.listdir(tmp_path / "new")) == 2  # the first file's temporary file and this one
        _files.abandon_writes()
        try:
            assert not (tmp_path / "new").exists() and not _files._COMMIT.acquire(blocking=False)
        finally:
            _files._COMMIT.release()
        raise KeyboardInterrupt  # (the handler would end the process here)

    with pytest.raises(KeyboardInterrupt):
        write_output_files(tmp_path / "new", {"a.json": lambda f: f.write(b"{}"), "b.png": handler_runs_now})
    assert os.listdir(tmp_path) == ["kept"] and not _files._PENDING


def test_write_output_files_creates_the_folder_or_says_why_not(tmp_path):
    write_output_files(tmp_path / "new", {"x": lambda f: f.write(b"1")})
    assert (tmp_path / "new" / "x").read_bytes() == b"1"
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=r"file/sub: cannot create the output folder: "):
        write_output_files(tmp_path / "file" / "sub", {"x": lambda f: None})


# ------------------------------------------------------------------------------------------------------------
# TOML and JSON
# ------------------------------------------------------------------------------------------------------------

EDGE_FLOATS = [0.1 + 0.2, -0.0, 5e-324, 1.7976931348623157e308, -1e-300, 1 / 3, 3.986004415e14, 1e16, 2.5e-17]


def test_toml_text_floats_are_bit_exact():
    data = {"x": EDGE_FLOATS, "t": {"m": [[1.0, 2.0], [3.0, 4.0]], "s": 'q"uote\\ \n', "n": 7, "b": True}}
    back = tomllib.loads(toml_text(data))
    assert back == data
    assert [math.copysign(1, x) for x in back["x"]] == [math.copysign(1, x) for x in EDGE_FLOATS]
    assert [x.hex() for x in back["x"]] == [x.hex() for x in EDGE_FLOATS]


def test_toml_text_header_and_arrays_of_tables():
    text = toml_text({"a": {"k": 1.0}, "p": [{"n": "x"}, {"n": "y", "v": [1.0, 2.0, 3.0] * 20}]}, header="# hi")
    assert text.startswith("# hi\n\n[a]\nk = 1.0\n")
    assert "v = [1.0, 2.0, 3.0, 1.0" in text  # arrays inline, one line
    assert tomllib.loads(text)["p"][1]["v"] == [1.0, 2.0, 3.0] * 20


@pytest.mark.parametrize("name", ["spacecraft_three_panels", "folding_wing", "slew_two_panel"])
def test_dumped_scenario_has_header_and_loads_back_identically(tmp_path, name):
    s = jh.load_scenario(example_path(name))
    jh.dump_scenario(s, tmp_path / "s.toml")
    text = (tmp_path / "s.toml").read_text()
    assert text.splitlines()[0] == "# jaxhinge scenario (SI units, radians; Basilisk names and frames)"
    assert tomllib.loads(text) == jh.scenario_to_dict(s)
    s2 = jh.load_scenario(tmp_path / "s.toml")
    import jax

    la, lb = jax.tree_util.tree_leaves(s), jax.tree_util.tree_leaves(s2)
    assert len(la) == len(lb) and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(la, lb))


def test_json_helpers():
    assert json_number(np.float64("nan")) is None and json_number(float("-inf")) is None
    assert json_number(np.float32(0.5)) == 0.5 and type(json_number(np.int64(3))) is float
    data = {"a": np.array([1.0, np.nan]), "b": (np.int64(2), np.bool_(True), None, "s"), 3: {"c": math.inf}}
    assert to_json(data) == {"a": [1.0, None], "b": [2, True, None, "s"], "3": {"c": None}}
    assert json.dumps(to_json(data), allow_nan=False)


def test_write_json_to_path_and_file_object(tmp_path):
    write_json({"x": float("nan"), "y": [1.5]}, tmp_path / "a.json")
    assert (tmp_path / "a.json").read_text() == '{\n  "x": null,\n  "y": [\n    1.5\n  ]\n}\n'
    with open(tmp_path / "b.json", "wb") as f:
        write_json({"x": 1}, f, indent=None)
    assert (tmp_path / "b.json").read_text() == '{"x": 1}\n'
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]


# ------------------------------------------------------------------------------------------------------------
# The checker
# ------------------------------------------------------------------------------------------------------------


def test_read_toml_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text('a = 1\nb = "unterminated\n')
    with pytest.raises(ScenarioError) as e:
        _Checker(str(bad)).read_toml("sweep file")
    assert str(e.value).startswith(f"{bad}:2:") and "TOML syntax error: " in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(ScenarioError, match=f"^{tmp_path / 'nope.toml'}: cannot read sweep file: No such file"):
        _Checker(str(tmp_path / "nope.toml")).read_toml("sweep file")
    bad.write_bytes(b"a = \"\xff\"\n")
    with pytest.raises(ScenarioError, match=r"not a UTF-8 text file \(invalid start byte at byte 5\)"):
        _Checker(str(bad)).read_toml()


def test_read_toml_uses_the_loaders_error_class(tmp_path):
    from jaxhinge._errors import FitError

    (tmp_path / "FIT.toml").write_text("[fit\n")
    with pytest.raises(FitError, match=r"FIT.toml:1:\d+: TOML syntax error"):
        jh.load_fit(tmp_path / "FIT.toml")


def test_keys_and_sections():
    ck = _Checker("f.toml", aliases={"out": "dir"}, descriptions={"members": "an integer > 0"})
    with pytest.raises(ScenarioError, match=r"^f.toml: top level: unknown key 'member' \(did you mean 'members'\?\); "
                                            r"allowed keys: members, seed$"):
        ck.keys({"member": 1}, None, ("members", "seed"))
    with pytest.raises(ScenarioError, match=r"^f.toml: output: unknown key 'out' \(did you mean 'dir'\?\)"):
        ck.section({"output": {"out": "x"}}, "output", ("dir",))
    with pytest.raises(ScenarioError, match=r"^f.toml: top level: missing required key 'members' \(an integer > 0\)$"):
        ck.keys({}, None, ("members",), ("members",))
    with pytest.raises(ScenarioError, match=r"^f.toml: missing required table \[fit\]$"):
        ck.section({}, "fit", ("free",), required=True)
    with pytest.raises(ScenarioError, match=r'^f.toml: fit = "x": must be a table \(\[fit\]\), got a string$'):
        ck.section({"fit": "x"}, "fit", ("free",))
    assert ck.section({}, "output", ("dir",)) == {}


@pytest.mark.parametrize(
    "method, args, value, message",
    [
        ("integer", (), 0, "n = 0: must be an integer > 0"),
        ("integer", (), 2.0, "n = 2.0: must be an integer > 0"),
        ("integer", (), True, "n = true: must be an integer > 0"),
        ("integer", (0,), -1, "n = -1: must be an integer >= 0"),
        ("finite_positive", (), "1", 'n = "1": must be a number, got a string'),
        ("finite_positive", (), math.inf, "n = inf: must be a finite number > 0"),
        ("finite_positive", (), 0, "n = 0: must be a finite number > 0"),
        ("boolean", (), 1, "n = 1: must be true or false"),
        ("string", ("a folder name",), "", 'n = "": must be a folder name'),
        ("choice", (("lm", "adam"),), "newton", 'n = "newton": allowed values are "lm", "adam"'),
        ("choice", (("lm", "adam"),), 1, 'n = 1: allowed values are "lm", "adam"'),
        ("path", (), 3, "n = 3: must be a file name (a string, relative to this file)"),
    ],
)
def test_typed_scalars_refused_in_one_line(method, args, value, message):
    with pytest.raises(ScenarioError) as e:
        getattr(_Checker("f.toml"), method)(value, "n", *args)
    assert str(e.value) == f"f.toml: {message}"


def test_typed_scalars_accepted(tmp_path):
    ck = _Checker(str(tmp_path / "sub" / "f.toml"))
    assert ck.integer(3, "n") == 3 and ck.integer(0, "n", 0) == 0
    assert ck.finite_positive(2, "x") == 2.0 and isinstance(ck.finite_positive(2, "x"), float)
    assert ck.boolean(False, "b") is False and ck.choice("lm", "s", ("lm", "adam")) == "lm"
    assert ck.path("../s.toml", "p") == str(tmp_path / "s.toml")
    assert ck.path("/abs/s.toml", "p") == "/abs/s.toml"


def test_output_dir_problems(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "out" / "result.json").mkdir(parents=True)
    assert output_dir_problem(tmp_path / "new") is None  # created later; its parent exists
    assert output_dir_problem(tmp_path / "out") is None
    assert output_dir_problem(tmp_path / "file") == f"{str(tmp_path / 'file')!r} exists and is not a folder"
    assert output_dir_problem(tmp_path / "a" / "b") == f"its parent folder {str(tmp_path / 'a')!r} does not exist"
    assert output_dir_problem(tmp_path / "file" / "b") == (
        f"its parent folder {str(tmp_path / 'file')!r} does not exist")
    assert output_dir_problem(tmp_path / "out", ["x.png", "result.json"]) == (
        f"{str(tmp_path / 'out' / 'result.json')!r} is an existing folder; the output file result.json cannot "
        "replace it")
    ck = _Checker(str(tmp_path / "S.toml"))
    assert ck.output_dir("new", "output.dir") == str(tmp_path / "new")
    with pytest.raises(ScenarioError, match=r'^.*S.toml: output.dir = "file": .* exists and is not a folder$'):
        ck.output_dir("file", "output.dir")


def test_output_paths_not_writable(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    if ROOT:  # root writes anywhere: answer os.access as the folder's mode does for anyone else
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: (
            not (mode & os.W_OK and os.path.abspath(p) == str(ro))) and access(p, mode))
    try:
        assert output_dir_problem(ro) == f"the folder {str(ro)!r} is not writable"
        assert output_dir_problem(ro / "new") == f"its parent folder {str(ro)!r} is not writable"
        assert output_file_problem(ro / "t.npz", (".npz",)) == f"folder {str(ro)!r} is not writable"
    finally:
        os.chmod(ro, 0o755)


def test_output_file_problems(tmp_path):
    (tmp_path / "t.npz").mkdir()
    assert output_file_problem(tmp_path / "x.npz", (".npz",)) is None
    assert output_file_problem(tmp_path / "x.NPZ", (".npz",)) is None
    assert output_file_problem(tmp_path / "x.txt", (".npz",)) == "the file name must end with .npz"
    assert output_file_problem(tmp_path / "x.txt", (".png", ".pdf")) == "the file name must end with .png or .pdf"
    assert output_file_problem(tmp_path / "t.npz", (".npz",)) == (
        f"{str(tmp_path / 't.npz')!r} is an existing folder, not a file")
    assert output_file_problem(tmp_path / "no" / "x.npz", (".npz",)) == (
        f"folder {str(tmp_path / 'no')!r} does not exist")
