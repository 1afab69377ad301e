"""Output paths checked before any compute: what is wrong with a folder or file as an output, in words."""

import os
from collections.abc import Iterable

__all__ = ["output_dir_problem", "output_file_problem"]


def output_dir_problem(path: str | os.PathLike, files: Iterable[str] = ()) -> str | None:
    """What is wrong with `path` as an output folder, in words, or `None` when it can be used: it exists and
    is not a folder, it is a folder that is not writable, one of the output `files` in it is an existing
    folder, or (when it does not exist yet, it is created) its parent folder is missing or not writable."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            return f"the folder {path!r} is not writable"
        for name in files:
            dest = os.path.join(path, name)
            if os.path.isdir(dest):
                return f"{dest!r} is an existing folder; the output file {name} cannot replace it"
        return None
    if os.path.lexists(path):
        return f"{path!r} exists and is not a folder"
    return _folder_problem(os.path.dirname(path), "its parent folder")


def output_file_problem(path: str | os.PathLike, suffixes: Iterable[str] = ()) -> str | None:
    """What is wrong with `path` as an output file, in words, or `None`: a name without one of the `suffixes`
    (case-insensitive), an existing folder, or a folder that is missing or not writable."""
    path = os.fspath(path)
    suffixes = tuple(suffixes)
    if suffixes and not path.lower().endswith(suffixes):
        return f"the file name must end with {' or '.join(suffixes)}"
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return f"{full!r} is an existing folder, not a file"
    return _folder_problem(os.path.dirname(full), "folder")


def _folder_problem(folder: str, what: str) -> str | None:
    """`None` when `folder` exists and can be written into, else what is wrong, naming it as `what`."""
    if not os.path.isdir(folder):
        return f"{what} {folder!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{what} {folder!r} is not writable"
    return None
