"""The runtime policy of a jaxhinge process: float64, XLA:CPU options and the compilation caches.

- `enable_x64()`: float64 (Basilisk-level accuracy needs it; importing jaxhinge sets nothing).
- `configure_cpu()`: the XLA:CPU options jaxhinge is measured with (public: `jaxhinge.configure_cpu`).
- `use_compile_cache(enabled, as_program)`: JAX's persistent compilation cache for a CLI run, and, as a
  program, the exported-program cache (`_programs`).
"""

import os
import re
import sys
import warnings

from .._paths import output_dir_problem

__all__ = ["CPU_CODEGEN_FLAG", "SMALL_LOOP_BYTES", "SMALL_LOOP_OPTION", "cache_off",
           "cache_problem", "compile_cache_dir", "configure_cpu", "enable_x64", "use_compile_cache"]


def enable_x64() -> None:
    """Turn on float64 in JAX (`jax_enable_x64`)."""
    import jax

    jax.config.update("jax_enable_x64", True)


CPU_CODEGEN_FLAG = "--xla_cpu_use_fusion_emitters=false"
SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000


def configure_cpu() -> None:
    """Set the XLA:CPU options jaxhinge is measured with (`benchmarks/RESULTS.md`), by adding them to
    `XLA_FLAGS`. Call it before JAX runs its first computation (XLA reads `XLA_FLAGS` once, when its backend
    starts); after that it changes nothing for the running process.

    - `--xla_cpu_use_fusion_emitters=false` (`CPU_CODEGEN_FLAG`): XLA's elemental CPU emitters instead of its MLIR
      fusion emitters: the same programs compile faster and run as fast or faster (measured in
      `benchmarks/bench_codegen.py`, numbers in docs/speed.md).
    - `--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000` (`SMALL_LOOP_OPTION`,
      `SMALL_LOOP_BYTES`): XLA:CPU compiles a loop whose body touches fewer bytes than this into one function
      instead of calling one kernel per fused operation on every iteration (its default is 1024 bytes). The
      integration loop of one trajectory, of a batch of up to ~16 members and their gradients fall under it and
      run faster (A/B in `benchmarks/bench_codegen.py`); larger batches keep XLA's kernels, which are faster
      there.

    With jaxlib 0.11 or later the first option is not set: XLA removed it (and refuses unknown flags).

    A choice already in `XLA_FLAGS` is kept (`--xla_cpu_use_fusion_emitters=true`, or the byte threshold in
    your own `--xla_backend_extra_options`; a threshold of 0 turns the loop compilation off). The CLI calls this
    when it owns the process, as do the tests' and the benchmarks' set-up; importing jaxhinge sets nothing. In
    your own scripts and notebooks, call `jaxhinge.configure_cpu()` first: called after JAX has started its
    backend, it warns that the options take effect only in a new process. Other backends (GPU) ignore both."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" not in flags and _has_elemental_emitters():
        flags = f"{flags} {CPU_CODEGEN_FLAG}".strip()
    if SMALL_LOOP_OPTION not in flags:
        option = f"{SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
        extra = re.search(r"--xla_backend_extra_options=(\S*)", flags)
        if extra:  # one map flag: add the option to the user's others
            value = f"{extra.group(1)},{option}" if extra.group(1) else option
            flags = f"{flags[:extra.start()]}--xla_backend_extra_options={value}{flags[extra.end():]}"
        else:
            flags = f"{flags} --xla_backend_extra_options={option}".strip()
    if flags != os.environ.get("XLA_FLAGS", "") and backend_started():
        warnings.warn("jaxhinge.configure_cpu() was called after JAX started its backend: XLA has read its flags "
                      "already, so the options take effect only in a new process (call it before the first JAX "
                      "computation)", stacklevel=2)
    os.environ["XLA_FLAGS"] = flags


def _has_elemental_emitters() -> bool:
    """Whether the installed XLA still has the switch to its elemental CPU emitters. jaxlib 0.11 removed it (the
    fusion emitters are then the only ones) and stops at start-up on an unknown flag in `XLA_FLAGS` (seen with
    jaxlib 0.11.2 on the GPU machine, benchmarks/RESULTS.md); a version that cannot be read counts as old."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major_minor = tuple(int(p) for p in version("jaxlib").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return True
    return major_minor < (0, 11)


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (and so read `XLA_FLAGS`); False if JAX cannot say."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001 - a JAX without this private helper: no warning
        return False


def cache_off() -> bool:
    """Whether the compile caches are turned off for this process (`JAXHINGE_CACHE_DIR=off`, `0` or `none`)."""
    return os.environ.get("JAXHINGE_CACHE_DIR", "").lower() in ("off", "0", "none")


def compile_cache_dir() -> str:
    """Where the CLI keeps compiled programs: `$JAXHINGE_CACHE_DIR`, else `$XDG_CACHE_HOME/jaxhinge/xla`
    (`~/.cache/jaxhinge/xla`)."""
    if os.environ.get("JAXHINGE_CACHE_DIR"):
        return os.path.abspath(os.path.expanduser(os.environ["JAXHINGE_CACHE_DIR"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxhinge", "xla")


def cache_problem(path: str) -> str | None:
    """What is wrong with `path` as the compile-cache folder, in words, or `None` when it can be used: it is
    created with its parents when missing, then checked as any output folder (`output_dir_problem`)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"{e.strerror or e}"
    return output_dir_problem(path)


def use_compile_cache(enabled: bool, as_program: bool = False) -> None:
    """JAX's persistent compilation cache for this CLI run, so that a second run on the same model structure
    loads its compiled programs instead of compiling them again. Off with `--no-cache` or
    `JAXHINGE_CACHE_DIR=off`; a cache the user configured for JAX itself (`JAX_COMPILATION_CACHE_DIR`) is
    used as is. A folder that cannot be created or written gives a warning and a run without the cache; JAX
    skips unreadable (corrupt) entries with a warning and compiles.

    As a program (`as_program`), with the cache on and `EQX_ON_ERROR` not set by the user, equinox's runtime
    checks (`error_if`, inside diffrax's adaptive solves) return NaN instead of raising through a host callback:
    a program with a host callback cannot be cached. A run they would have stopped ends with a non-finite state
    instead, which every command already reports as a failed run (`Trajectory.success`, `failure_reason`).

    As a program, the traced programs are kept as well (`jaxhinge._runtime._programs`: `jax.export`, in `jaxhinge-programs/`
    inside the compile cache folder), so that a second
    run skips tracing the model too, not only XLA's compilation."""
    import jax

    if not enabled or cache_off():
        return
    if as_program and "EQX_ON_ERROR" not in os.environ:
        try:
            import equinox._errors as eqx_errors  # read at trace time by `error_if` (equinox 0.11-0.13)

            if getattr(eqx_errors, "EQX_ON_ERROR", None) == "raise":
                eqx_errors.EQX_ON_ERROR = "nan"
        except ImportError:  # another equinox layout: its checks stay, the programs holding them are not cached
            pass
    path = jax.config.jax_compilation_cache_dir
    if not path:
        path = compile_cache_dir()
        problem = cache_problem(path)
        if problem:
            print(f"jaxhinge: warning: compile cache folder {path!r} is not usable ({problem}); running without "
                  "it (set JAXHINGE_CACHE_DIR to another folder, or pass --no-cache)", file=sys.stderr)
            return
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if as_program:  # traced programs too (`_programs`), next to the compiled ones
        from . import _programs

        _programs.enable(os.path.join(path, "jaxhinge-programs"))
