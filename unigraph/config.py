"""Which target runs: `Target(backend, mode)` and the rules that pick it.

Precedence, highest first: an explicit argument, `use_backend(...)` (a context variable, so
threads and async tasks do not leak into each other), `set_backend(...)`, the environment
variables `UNIGRAPH_BACKEND` / `UNIGRAPH_MODE`, `[tool.unigraph]` in the nearest
`pyproject.toml` or a `unigraph.toml` (searched from the working directory upwards; the
nearest one counts), and finally `numpy:eager`; backend and mode are resolved each on its
own. The environment and the files are read once, on first use; `reload()` reads them
again. A config file key other than those in `KNOWN_KEYS` warns (`ConfigWarning`), naming
the file, the key and the known keys.

    [tool.unigraph]                 # pyproject.toml (a unigraph.toml has no table header)
    backend = "torch"
    mode = "static"
    max_loop_iterations = 1_000_000
    threads = 1                     # every framework's thread pools (see unigraph.threads)
    flush_denormal = true           # flush subnormal floats (see unigraph.tuning); off
    tuned = true                    # frameworks' speed settings left off (unigraph.tuning)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass

from unigraph.errors import ConfigError, ConfigWarning

DEFAULT_BACKEND = "numpy"
DEFAULT_MODE = "eager"


@dataclass(frozen=True)
class Target:
    """A backend and one of its modes, e.g. `Target("paddle", "static")`."""

    backend: str
    mode: str = DEFAULT_MODE

    def __str__(self):
        return f"{self.backend}:{self.mode}"

    @staticmethod
    def parse(text: str) -> Target:
        """`"torch:static"` -> Target("torch", "static"); `"torch"` -> its default mode
        (eager, or the first mode of a backend without one, e.g. onnxruntime:static)."""
        backend, _, mode = text.partition(":")
        return Target(backend.strip(), mode.strip() or default_mode_of(backend.strip()))


def default_mode_of(backend: str) -> str:
    """The mode a backend named alone means: "eager", or its first mode if it has no eager
    one (an inference-only backend such as onnxruntime). Imports no framework."""
    from unigraph.plugins import backends

    known = backends().get(backend)
    if known is not None and DEFAULT_MODE not in known.modes:
        return known.modes[0]
    return DEFAULT_MODE


_context_target: contextvars.ContextVar = contextvars.ContextVar("unigraph_target", default=None)
_global_target: Target | None = None


def _validated(backend: str, mode: str | None) -> Target:
    """`backend` may be a target spelling, "torch:static"; checked against the registry."""
    target = _combined(backend, mode, "backend", "mode")
    _check_exists(target, "backend", "mode")
    return target


def _combined(backend: str, mode: str | None, backend_origin: str, mode_origin: str) -> Target:
    """Target from a backend (or "backend:mode", or a `Target`: the `target` fixture's
    value) and an optional separate mode."""
    if isinstance(backend, Target):
        backend = str(backend)
    if not isinstance(backend, str) or not backend.strip():
        raise ConfigError(f"{backend_origin} must name a backend, e.g. 'torch' or "
                          f"'torch:static', got {backend!r}")
    if ":" in backend:
        parsed = Target.parse(backend)
        if mode is not None and mode != parsed.mode:
            raise ConfigError(f"{backend_origin} = {backend!r} names mode {parsed.mode!r} but "
                              f"{mode_origin} = {mode!r}: give the mode once")
        return parsed
    return Target(backend.strip(), mode or default_mode_of(backend.strip()))


def _check_exists(target: Target, backend_origin: str, mode_origin: str) -> None:
    """Raise BackendError naming where a wrong backend or mode came from."""
    from unigraph.errors import BackendError
    from unigraph.plugins import backends, get_backend
    from unigraph.threads import apply_configured

    apply_configured()  # `threads`, once, before the first target can import a framework

    try:
        get_backend(target.backend, target.mode)
    except BackendError as error:
        origin = backend_origin if target.backend not in backends() else mode_origin
        if origin in ("backend", "mode"):
            raise
        raise BackendError(f"{origin}: {error}") from None


def set_backend(backend: str, mode: str | None = None) -> None:
    """Make `backend:mode` the target for the whole process (below `use_backend`).

    >>> ug.set_backend("paddle", mode="static")     # or ug.set_backend("paddle:static")
    """
    global _global_target
    _global_target = _validated(backend, mode)


@contextlib.contextmanager
def use_backend(backend: str, mode: str | None = None):
    """Run the block on `backend:mode`; restores the previous choice on exit.

    >>> with ug.use_backend("tensorflow", mode="static"):   # or use_backend("tensorflow:static")
    ...     counter(0, 10)
    """
    token = _context_target.set(_validated(backend, mode))
    try:
        yield
    finally:
        _context_target.reset(token)


# The keys a config file may hold ([tool.unigraph] in pyproject.toml, or a unigraph.toml);
# any other key warns (a misspelt `mdoe = "static"` must not be ignored silently).
KNOWN_KEYS = {
    "backend": "the backend of the default target (numpy, torch, tensorflow, paddle, ...)",
    "mode": "the mode of the default target (eager, static, ...)",
    "max_loop_iterations": "iterations after which a loop raises (see max_loop_iterations())",
    "threads": "threads of every framework's CPU pools (see threads(), ug.set_threads)",
    "flush_denormal": "flush subnormal floats to zero (see unigraph.tuning, "
                      "ug.set_flush_denormal)",
    "tuned": "turn on framework speed settings left off by default (see unigraph.tuning, "
             "ug.set_tuned)",
}
DEFAULT_MAX_LOOP_ITERATIONS = 10_000_000
_UNREAD = object()
_file_config = _UNREAD  # (path, table) of the nearest config file, or None; read once


def _config_file() -> tuple | None:
    """(path, table) of the nearest config file, searched from the working directory up:
    a unigraph.toml, or a pyproject.toml with a [tool.unigraph] table. Read once."""
    global _file_config
    if _file_config is _UNREAD:
        _file_config = _find_config_file(os.getcwd())
    return _file_config


def _find_config_file(cwd: str) -> tuple | None:
    import tomllib  # here, not at import time: pathlib and tomllib cost milliseconds
    from pathlib import Path

    here = Path(cwd).resolve()
    for folder in (here, *here.parents):
        for name, table_path in (("unigraph.toml", ()), ("pyproject.toml", ("tool", "unigraph"))):
            path = folder / name
            if not path.is_file():
                continue
            try:
                table = tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError as error:
                raise ConfigError(f"{path}: not valid TOML ({error})") from None
            for key in table_path:
                table = table.get(key)
                if not isinstance(table, dict):
                    break
            if isinstance(table, dict):
                _warn_unknown_keys(path, table, "[tool.unigraph] " if table_path else "")
                return path, table
    return None


def _warn_unknown_keys(path, table: dict, section: str) -> None:
    import difflib
    import warnings

    for key in table:
        if key in KNOWN_KEYS:
            continue
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        warnings.warn(
            f"{path}: unknown unigraph config key {section}{key!r}{hint}, ignored; the known "
            f"keys are {', '.join(KNOWN_KEYS)}",
            ConfigWarning, stacklevel=2,
        )


def _file_value(key: str):
    """(value, path) of `key` in the config file, or (None, None)."""
    found = _config_file()
    if found is None or key not in found[1]:
        return None, None
    path, table = found
    return table[key], path


def _text_setting(key: str, env: str) -> tuple:
    """(value, where it came from) of a text setting: the environment, else the config
    file, else (None, None)."""
    if env in os.environ:
        return os.environ[env], f"the environment variable {env}"
    value, path = _file_value(key)
    if value is None:
        return None, None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: {key} = {value!r} must be a non-empty string, e.g. "
                          f"{key} = 'torch' or 'torch:static'")
    return value, f"{path}: {key}"


def current_target(explicit: Target | str | None = None) -> Target:
    """The target that runs now, by the precedence in this module's docstring.

    >>> with ug.use_backend("torch:static"):
    ...     ug.current_target()          # torch:static
    """
    if explicit is not None:
        return Target.parse(explicit) if isinstance(explicit, str) else explicit
    for target in (_context_target.get(), _global_target):
        if target is not None:
            return target
    return _default or _resolve_default()


_default: Target | None = None  # from the environment or a file, read once (see reload)


def _resolve_default() -> Target:
    """Each key by precedence: the backend from the environment, else the config file, else
    numpy; the mode likewise. A backend written as "torch:static" also gives the mode, at
    its own level (UNIGRAPH_BACKEND=torch:static is static unless UNIGRAPH_MODE says
    otherwise, which is then an error: the same source gave two modes)."""
    global _default
    backend, backend_origin = _text_setting("backend", "UNIGRAPH_BACKEND")
    mode, mode_origin = _text_setting("mode", "UNIGRAPH_MODE")
    backend, backend_origin = (backend, backend_origin) if backend is not None else \
        (DEFAULT_BACKEND, "the default backend")
    embedded = Target.parse(backend).mode if ":" in backend else None
    if embedded is not None:
        same_level = mode_origin is not None and (
            mode_origin.startswith("the environment") == backend_origin.startswith("the env"))
        if mode is None or (not same_level and _outranks(backend_origin, mode_origin)):
            mode, mode_origin = embedded, backend_origin
        elif same_level and mode != embedded:
            raise ConfigError(f"{backend_origin} = {backend!r} names mode {embedded!r} but "
                              f"{mode_origin} = {mode!r}: give the mode once")
        backend = Target.parse(backend).backend
    target = Target(backend, mode or default_mode_of(backend))
    _check_exists(target, f"{backend_origin} = {backend!r}",
                  f"{mode_origin or 'the default mode'} = {target.mode!r}")
    _default = target
    return _default


def _outranks(origin: str, other: str) -> bool:
    """True when a setting from `origin` outranks one from `other` (environment > file)."""
    return origin.startswith("the environment") and not other.startswith("the environment")


_max_loop_iterations: int | None = None


def max_loop_iterations() -> int:
    """How many iterations any loop (`ug.while_loop`, a converted `while`) may run before
    every target raises instead of hanging: `UNIGRAPH_MAX_LOOP_ITERATIONS` in the
    environment, else `max_loop_iterations` in the config file, else 10_000_000. Read once
    (`reload()` rereads); a value that is not a positive integer raises, naming where it
    came from.

    >>> # pyproject.toml:  [tool.unigraph]
    >>> #                  max_loop_iterations = 100_000
    >>> ug.config.max_loop_iterations()
    100000
    """
    global _max_loop_iterations
    if _max_loop_iterations is None:
        _max_loop_iterations = _read_max_loop_iterations()
    return _max_loop_iterations


def _read_max_loop_iterations() -> int:
    value = _positive_int("max_loop_iterations", "UNIGRAPH_MAX_LOOP_ITERATIONS", 1000000,
                          f"unset it for the default {DEFAULT_MAX_LOOP_ITERATIONS}")
    return DEFAULT_MAX_LOOP_ITERATIONS if value is None else value


def threads() -> int | None:
    """The thread count for every framework's pools: `UNIGRAPH_THREADS` in the environment,
    else `threads` in the config file, else None (each framework keeps its default). Applied
    by `unigraph.threads` when the first target is chosen; `ug.set_threads(n)` overrides it.

    >>> # unigraph.toml:  threads = 1
    >>> ug.config.threads()
    1
    """
    return _positive_int("threads", "UNIGRAPH_THREADS", 1,
                         "unset it to keep each framework's default")


def flush_denormal() -> bool | None:
    """`UNIGRAPH_FLUSH_DENORMAL` ("1"/"0"), else `flush_denormal` in the config file, else
    None; applied by `unigraph.tuning` when the first target is chosen."""
    return _flag("flush_denormal", "UNIGRAPH_FLUSH_DENORMAL")


def tuned() -> bool | None:
    """`UNIGRAPH_TUNED` ("1"/"0"), else `tuned` in the config file, else None; applied by
    `unigraph.tuning` when the first target is chosen."""
    return _flag("tuned", "UNIGRAPH_TUNED")


def _flag(key: str, env: str) -> bool | None:
    """A true/false setting: `env` in the environment ("1"/"0", "true"/"false"; an empty
    value counts as unset), else `key` in the config file, else None."""
    raw = os.environ.get(env, "").strip().lower()
    if raw:
        if raw not in ("1", "0", "true", "false"):
            raise ConfigError(f"the environment variable {env}={raw!r} is not 1 or 0; set "
                              f"{env}=1 to turn it on, or unset it")
        return raw in ("1", "true")
    value, path = _file_value(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: {key} = {value!r} is not true or false; write "
                          f"{key} = true")
    return value


def _positive_int(key: str, env: str, example: int, unset: str) -> int | None:
    """A positive integer setting: `env` in the environment (an empty value counts as unset),
    else `key` in the config file, else None. Bad values name where they came from."""
    raw = os.environ.get(env, "").strip()
    if raw:
        try:
            number = int(raw)
        except ValueError:
            number = 0
        if number < 1:
            raise ConfigError(f"the environment variable {env}={raw!r} is not a positive "
                              f"integer; set e.g. {env}={example}, or {unset}")
        return number
    value, path = _file_value(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{path}: {key} = {value!r} is not a positive integer; write "
                          f"e.g. {key} = {example:_}")
    return value


def reload() -> None:
    """Read `UNIGRAPH_BACKEND`/`UNIGRAPH_MODE`/`UNIGRAPH_MAX_LOOP_ITERATIONS` and the config
    files again. They are read once, on first use, because every eager op asks for the
    current target."""
    global _default, _file_config, _max_loop_iterations
    _default = None
    _file_config = _UNREAD
    _max_loop_iterations = None
