"""The `jaxhinge` program's entry point (`[project.scripts]`): Ctrl-C handled from the first instruction on.

The handler is installed before anything heavy is imported (`jaxhinge/__init__.py` imports its names lazily),
so Ctrl-C at any moment - while JAX is imported, while a program compiles or runs in XLA's threads, while outputs
are written - ends the process with one line on stderr and exit status 130, after removing the temporary files
and new folders of the writes in progress (`_io._writers.abandon_writes`: nothing half-written is left).
"""

import os
import signal
import sys


def _interrupted(signum, frame) -> None:
    """Remove the writes in progress (if the writer module is loaded: never import from inside a signal handler),
    say so in one line and end the process at once, status 130 (`os._exit`: a normal teardown while XLA's threads
    compile or run can crash)."""
    writers = sys.modules.get("jaxhinge._io._writers")
    if writers is not None:
        writers.abandon_writes()
    try:
        os.write(2, b"jaxhinge: interrupted\n")
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


def main() -> int:
    install()  # before anything heavy is imported
    from ._cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
