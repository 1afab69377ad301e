"""Every output file is written here: all or nothing, never half-written.

`atomic_write(path, write)` (one file) and `write_output_files(folder, writers)` (a set of files in one folder,
all or nothing) write through temporary files in the target folder, `fsync`, give the file the mode of the file
it replaces (or `0o666 & ~umask`) and rename with `os.replace`: a failed write (a full disk: a one-line
`OutputError`) or one stopped by `abandon_writes` (Ctrl-C) leaves no half-written or temporary file and no new
empty folder. `toml_text` (TOML through tomli-w, floats exact), `write_json` (JSON, NaN and inf as `null`).
"""

import contextlib
import json
import os
import re
import tempfile
import threading
import tomllib
from collections.abc import Callable, Mapping
from typing import IO, Any

import tomli_w

from .._errors import OutputError
from .._format import to_json

__all__ = ["abandon_writes", "atomic_write", "toml_text", "write_json", "write_output_files"]


_COMMIT = threading.Lock()  # held while outputs are renamed into place, and by `abandon_writes`
_PENDING: set[str] = set()  # the temporary files, and the output folders created, of the writes in progress


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode_for(dest: str) -> int:
    """The mode a new version of `dest` gets: that of the file it replaces, else `0o666 & ~umask`."""
    try:
        return os.stat(dest).st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def _unlink(path: str) -> None:
    _PENDING.discard(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def abandon_writes() -> None:
    """Remove the temporary files and new output folders of the writes in progress and keep the lock of their
    final renames (none completes): the CLI's Ctrl-C handler, which then ends the process, leaves no output."""
    _COMMIT.acquire()
    for path in sorted(_PENDING, reverse=True):  # a folder's temporary files before the folder
        with contextlib.suppress(OSError):
            (os.rmdir if os.path.isdir(path) else os.unlink)(path)


def _cannot_write(dest: str, e: OSError) -> OutputError:  # disk full, quota, I/O error: one line
    return OutputError(f"{dest}: cannot write: {e.strerror or e}; nothing was written", source=dest, field=None)


def _fsync_folder(folder: str) -> None:
    """Make the renames durable (best effort: not every platform can open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_temp(dest: str, write: Callable[[IO[bytes]], Any]) -> str:
    """Write `dest`'s new content through `write(fileobj)` into a temporary file beside it, fsync it and give
    it its final mode. **Returns:** the temporary path (the caller renames it); removed on any exception, an
    `OSError` (disk full, ...) raised as a one-line `OutputError` (`_cannot_write`)."""
    folder, name = os.path.split(dest)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".jaxhinge-{name}.", suffix=".tmp", dir=folder)
        _PENDING.add(tmp)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(dest))
    except BaseException as e:
        if tmp is not None:
            _unlink(tmp)
        if isinstance(e, OSError):
            raise _cannot_write(dest, e) from None
        raise
    return tmp


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write `path` through `write(fileobj)` (a binary file object): into a temporary file in the same folder,
    fsynced, with the mode of the file it replaces (or `0o666 & ~umask`, never mkstemp's 0600), then
    `os.replace`d onto `path`. On any exception the temporary file is removed, `path` is untouched, and the
    exception propagates (an `OSError` as a one-line `OutputError`: `path: cannot write: No space left on
    device; nothing was written`)."""
    dest = os.path.abspath(os.fspath(path))
    tmp = _write_temp(dest, write)
    try:
        with _COMMIT:
            os.replace(tmp, dest)
    except OSError as e:
        raise _cannot_write(dest, e) from None
    finally:
        _unlink(tmp)
    _fsync_folder(os.path.dirname(dest))


def write_output_files(
    folder: str | os.PathLike, writers: Mapping[str, Callable[[IO[bytes]], Any]]
) -> list[str]:
    """Write a set of files, all or nothing: `writers[name](fileobj)` writes each (`name` a file name in
    `folder`, or a path relative to it) into a temporary file beside it, as `atomic_write` does; only when every
    one succeeded are they renamed to their names. On any exception (an `OSError` as `atomic_write` raises it)
    no temporary file is left, no output file is replaced, and `folder` is removed again if this call created it.

    **Returns:** the written paths, in the order of `writers`.

    **Raises:** `OutputError` (one line) when the folder cannot be created; the writers' own exceptions.
    """
    folder = os.path.abspath(os.fspath(folder))
    created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise OutputError(
            f"{folder}: cannot create the output folder: {e.strerror or e}", source=folder
        ) from None
    if created:
        _PENDING.add(folder)
    tmps: dict[str, str] = {}
    try:
        for name, write in writers.items():
            tmps[name] = _write_temp(os.path.join(folder, name), write)
        with _COMMIT:
            written = [os.path.join(folder, name) for name in tmps]
            for tmp, dest in zip(tmps.values(), written):
                os.replace(tmp, dest)
        created = False
        for d in {os.path.dirname(w) for w in written}:
            _fsync_folder(d)
        return written
    finally:
        for tmp in tmps.values():
            _unlink(tmp)
        _PENDING.discard(folder)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


_NUMERIC_ARRAY = re.compile(r"\[\n(?:[ \t]*(?:\[|\]|[-+0-9.eE]+|inf|nan),?\n)*[ \t]*\]")


def _inline(match: re.Match) -> str:
    """A multi-line array of numbers (tomli-w's layout) on one line: `[[900.0, 0.0, 0.0], [...], ...]`."""
    text = re.sub(r"\s+", "", match.group(0))
    return text.replace(",]", "]").replace(",", ", ")


def toml_text(data: Mapping[str, Any], header: str = "") -> str:
    """`data` as TOML text (tomli-w) after an optional comment `header` line: the one TOML writer (scenario
    files, fitted scenarios). Floats are exact (`repr`: they read back bit for bit); arrays of numbers are put
    on one line (a 3x3 matrix reads as one); the text is parsed back and compared with `data` before it is
    returned."""
    text = (header + "\n\n" if header else "") + _NUMERIC_ARRAY.sub(_inline, tomli_w.dumps(data))
    if tomllib.loads(text) != data:  # pragma: no cover - a writer bug, not a user error
        raise AssertionError("internal error: the TOML writer does not round-trip this data")
    return text


def write_json(data: Any, file: str | os.PathLike | IO[bytes], *, indent: int | None = 2) -> None:
    """Write `to_json(data)` as JSON (no NaN: `null`), with a final newline, into a binary file object or,
    for a path, atomically (`atomic_write`)."""
    payload = (json.dumps(to_json(data), indent=indent, allow_nan=False) + "\n").encode("utf-8")
    if isinstance(file, (str, os.PathLike)):
        atomic_write(file, lambda f: f.write(payload))
    else:
        file.write(payload)
