"""Ctrl-C in the `jaxhinge` program: one line on stderr, exit status 130, and the writes in progress removed
(`_writers.abandon_writes`: nothing half-written is left).

Installed by the program's entry point (`jaxhinge._entry`) before anything heavy is imported, and by the command
line (`jaxhinge._cli.main`) when it runs as a program; this module imports nothing but the standard library, so
installing it costs nothing.
"""

import os
import signal
import sys

_NOTE: list[bytes] = []  # one line said after "interrupted" (`set_note`), e.g. how to resume


def set_note(text: str | None) -> None:
    """What Ctrl-C says after "jaxhinge: interrupted" (a campaign: what is stored and how to resume), or nothing."""
    _NOTE[:] = [] if text is None else [f"jaxhinge: {text}\n".encode()]


def note() -> str | None:
    """The line `set_note` set (without its prefix), or None."""
    return _NOTE[0].decode()[len("jaxhinge: "):].rstrip("\n") if _NOTE else None


def _interrupted(signum, frame) -> None:
    """Remove the writes in progress (if the writer module is loaded: never import from inside a signal handler),
    say so in one line and end the process at once, status 130 (`os._exit`: a normal teardown while XLA's threads
    compile or run can crash)."""
    writers = sys.modules.get("jaxhinge._io._writers")
    if writers is not None:
        writers.abandon_writes()
    try:
        os.write(2, b"jaxhinge: interrupted\n" + b"".join(_NOTE))
    finally:
        os._exit(130)


def install() -> bool:
    """Install the handler if Ctrl-C has Python's default handling (not ignored, not handled by the caller);
    **returns** whether this process now ends on Ctrl-C through it (the `jaxhinge` program)."""
    current = signal.getsignal(signal.SIGINT)
    if current is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
        return True
    return current is _interrupted
