"""Loading backends: a `pluggy.PluginManager` named `unigraph` over the entry-point group
`unigraph`. `UNIGRAPH_PLUGINS=numpy,torch` restricts which entry points load."""

from __future__ import annotations

import os
import threading

import pluggy

from unigraph import hookspecs
from unigraph.errors import BackendError

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_backends: dict | None = None
_checked: dict = {}  # (name, mode) -> backend, for lookups that already passed
load_errors: dict = {}  # entry-point name -> why its plugin module failed to import


def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created and loaded on first call."""
    global _manager
    with _lock:
        if _manager is None:
            manager = pluggy.PluginManager("unigraph")
            manager.add_hookspecs(hookspecs)
            allowed = os.environ.get("UNIGRAPH_PLUGINS")
            names = {n.strip() for n in allowed.split(",") if n.strip()} if allowed else None
            for entry_point in _entry_points():
                if names is not None and entry_point.name not in names:
                    continue
                try:
                    plugin = entry_point.load()
                except Exception as error:  # a broken plugin must not take the others down
                    load_errors[entry_point.name] = f"{type(error).__name__}: {error}"
                    continue
                if manager.get_plugin(entry_point.name) is None:
                    manager.register(plugin, name=entry_point.name)
            _manager = manager
        return _manager


def _entry_points():
    from importlib.metadata import entry_points

    return entry_points(group="unigraph")


def register_plugin(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time (tests, notebooks)."""
    global _backends
    plugin_manager().register(plugin, name=name)
    _backends = None
    _checked.clear()


def unregister_plugin(plugin) -> None:
    global _backends
    plugin_manager().unregister(plugin)
    _backends = None
    _checked.clear()


def backends() -> dict:
    """name -> Backend for every registered backend (frameworks not imported)."""
    global _backends
    if _backends is None:
        found = {}
        for result in plugin_manager().hook.unigraph_backends():
            for backend in result:
                found.setdefault(backend.name, backend)
        _backends = found
    return _backends


def get_backend(name: str, mode: str | None = None):
    """The backend called `name`, checked to offer `mode` and to be installed."""
    backend = _checked.get((name, mode))
    if backend is not None:
        return backend
    known = backends()
    if name not in known:
        listing = ", ".join(sorted(known)) or "none"
        raise BackendError(f"unknown backend {name!r}; registered backends: {listing}")
    backend = known[name]
    if mode is not None and mode not in backend.modes:
        raise BackendError(
            f"backend {name!r} has no mode {mode!r}; its modes are: {', '.join(backend.modes)}"
        )
    available, reason = backend.status()
    if not available:
        raise BackendError(f"backend {name!r} is {reason}")
    _checked[(name, mode)] = backend
    return backend


def all_targets() -> list:
    """Every target of every registered backend, installed or not."""
    from unigraph.config import Target

    return [Target(b.name, m) for b in backends().values() for m in b.modes]
