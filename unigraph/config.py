"""Which target runs: `Target(backend, mode)` and the rules that pick it.

Precedence, highest first: an explicit argument, `use_backend(...)` (a context variable, so
threads and async tasks do not leak into each other), `set_backend(...)`, the environment
variables `UNIGRAPH_BACKEND` / `UNIGRAPH_MODE`, `[tool.unigraph]` in the nearest
`pyproject.toml` or a `unigraph.toml` (searched from the working directory upwards), and
finally `numpy:eager`. The environment and the files are read once, on first use;
`reload()` reads them again.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass

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
        """`"torch:static"` -> Target("torch", "static"); `"torch"` -> its eager mode."""
        backend, _, mode = text.partition(":")
        return Target(backend.strip(), mode.strip() or DEFAULT_MODE)


_context_target: contextvars.ContextVar = contextvars.ContextVar("unigraph_target", default=None)
_global_target: Target | None = None


def _validated(backend: str, mode: str | None) -> Target:
    from unigraph.plugins import get_backend

    target = Target(backend, mode or DEFAULT_MODE)
    get_backend(target.backend, target.mode)  # raises listing what is installed
    return target


def set_backend(backend: str, mode: str | None = None) -> None:
    """Make `backend:mode` the target for the whole process (below `use_backend`)."""
    global _global_target
    _global_target = _validated(backend, mode)


@contextlib.contextmanager
def use_backend(backend: str, mode: str | None = None):
    """Run the block on `backend:mode`; restores the previous choice on exit.

    >>> with ug.use_backend("tensorflow", mode="static"):
    ...     counter(0, 10)
    """
    token = _context_target.set(_validated(backend, mode))
    try:
        yield
    finally:
        _context_target.reset(token)


def _from_file(cwd: str) -> Target | None:
    import tomllib  # here, not at import time: pathlib and tomllib cost milliseconds
    from pathlib import Path

    here = Path(cwd).resolve()
    for folder in (here, *here.parents):
        for name, table_path in (("unigraph.toml", ()), ("pyproject.toml", ("tool", "unigraph"))):
            path = folder / name
            if not path.is_file():
                continue
            table = tomllib.loads(path.read_text())
            for key in table_path:
                table = table.get(key, {})
            if "backend" in table:
                return Target(table["backend"], table.get("mode", DEFAULT_MODE))
    return None


def current_target(explicit: Target | str | None = None) -> Target:
    """The target that runs now, by the precedence in this module's docstring."""
    if explicit is not None:
        return Target.parse(explicit) if isinstance(explicit, str) else explicit
    for target in (_context_target.get(), _global_target):
        if target is not None:
            return target
    return _default or _resolve_default()


_default: Target | None = None  # from the environment or a file, read once (see reload)


def _resolve_default() -> Target:
    global _default
    mode = os.environ.get("UNIGRAPH_MODE", DEFAULT_MODE)
    if "UNIGRAPH_BACKEND" in os.environ:
        _default = Target(os.environ["UNIGRAPH_BACKEND"], mode)
    else:
        _default = _from_file(os.getcwd()) or Target(DEFAULT_BACKEND, mode)
    return _default


def reload() -> None:
    """Read `UNIGRAPH_BACKEND`/`UNIGRAPH_MODE` and the config files again. They are read once,
    on first use, because every eager op asks for the current target."""
    global _default
    _default = None
