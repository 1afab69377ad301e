"""The `jaxhinge` program's entry point (`[project.scripts]`): Ctrl-C handled from the first instruction on.

The handler (`_io._interrupt`) is installed before anything heavy is imported (`jaxhinge/__init__.py` imports its
names lazily, `_io/__init__.py` is empty), so Ctrl-C at any moment - while JAX is imported, while a program
compiles or runs in XLA's threads, while outputs are written - ends the process with one line on stderr and exit
status 130, after removing the temporary files and new folders of the writes in progress (nothing half-written is
left). The command line itself is imported after that, on the first call of `main`.

When the command is done, the program ends at once (`_end`): its outputs are written and closed, the compile and
program caches are written as each program is stored, and what Python's teardown would still do (JAX's exit
hook clearing its backends and caches, then every module's teardown) took 0.5 s of a 3.4 s warm
`jaxhinge fit` (docs/speed.md, "The main job, warm").
"""

import os
import sys

from ._io._interrupt import install


def _end(status: int) -> None:
    """Flush stdout and stderr and end the process with `status`, without Python's teardown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said on it
            pass
    os._exit(status)


def main() -> int:
    as_program = install()  # before anything heavy is imported
    from ._cli import main as cli_main

    status = cli_main()
    if as_program:  # (a caller that handles Ctrl-C itself gets the status back, as from `_cli.main`)
        _end(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
