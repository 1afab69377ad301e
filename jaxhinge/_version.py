__version__ = "0.2.0"  # the one place the version is written (pyproject.toml reads it)
