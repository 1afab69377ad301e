"""The `jaxhinge` program's entry point (`[project.scripts]`): Ctrl-C handled from the first instruction on.

The handler (`_io._interrupt`) is installed before anything heavy is imported (`jaxhinge/__init__.py` imports its
names lazily, `_io/__init__.py` is empty), so Ctrl-C at any moment - while JAX is imported, while a program
compiles or runs in XLA's threads, while outputs are written - ends the process with one line on stderr and exit
status 130, after removing the temporary files and new folders of the writes in progress (nothing half-written is
left). The command line itself is imported after that, on the first call of `main`.
"""

import sys

from ._io._interrupt import install


def main() -> int:
    install()  # before anything heavy is imported
    from ._cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
