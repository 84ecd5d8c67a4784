"""Loading backends: a `pluggy.PluginManager` named `unigraph` over the entry-point group
`unigraph`. `UNIGRAPH_PLUGINS=numpy,torch` restricts which entry points load.

A broken plugin never takes the others down: a plugin module that fails to import, a hook
that raises, or a hook that returns something other than a list of backends is recorded in
`load_errors` (shown by `unigraph backends`, and in the error when you ask for that backend
by name) and skipped.
"""

from __future__ import annotations

import os
import threading

import pluggy

from unigraph import hookspecs
from unigraph.errors import BackendError

_lock = threading.Lock()
# Held while the hooks make the backend objects (reentrant: a hook may ask for the registry).
_backends_lock = threading.RLock()
_manager: pluggy.PluginManager | None = None
_backends: dict | None = None
_checked: dict = {}  # (name, mode) -> backend, for lookups that already passed
# Bumped whenever the registry changes (a plugin registered or unregistered): a lookup cached
# elsewhere (`dispatch`'s last resolved target) is valid only for the generation it was made in.
generation = 0
load_errors: dict = {}  # plugin name -> why it could not provide its backends


def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created and loaded on first call."""
    global _manager
    with _lock:
        if _manager is None:
            manager = pluggy.PluginManager("unigraph")
            manager.add_hookspecs(hookspecs)
            entry_points = list(entry_point_list())
            names = allowed_plugins(entry_points)
            for entry_point in entry_points:
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


def entry_point_list():
    """The installed entry points of the group `unigraph` (one per backend plugin)."""
    from importlib.metadata import entry_points

    return entry_points(group="unigraph")


def allowed_plugins(entry_points) -> set | None:
    """The plugin names `UNIGRAPH_PLUGINS` allows (None: all), checked against what is
    installed, so a misspelt name is an error instead of an empty registry."""
    allowed = os.environ.get("UNIGRAPH_PLUGINS")
    if not allowed:
        return None
    names = {n.strip() for n in allowed.split(",") if n.strip()}
    known = {entry_point.name for entry_point in entry_points}
    unknown = sorted(names - known)
    if unknown:
        raise BackendError(
            f"UNIGRAPH_PLUGINS names {', '.join(map(repr, unknown))}, which no installed "
            f"plugin provides; installed plugins: {', '.join(sorted(known)) or 'none'} "
            "(fix or unset the environment variable)"
        )
    return names


def register_plugin(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time (tests, notebooks)."""
    global _backends, generation
    with _backends_lock:  # not while another thread makes the backend objects
        plugin_manager().register(plugin, name=name)
        _backends = None
        _checked.clear()
        generation += 1


def unregister_plugin(plugin) -> None:
    global _backends, generation
    name = plugin_manager().get_name(plugin)
    with _backends_lock:  # not while another thread makes the backend objects
        plugin_manager().unregister(plugin)
        load_errors.pop(name, None)
        _backends = None
        _checked.clear()
        generation += 1


def backends() -> dict:
    """name -> Backend for every registered backend (frameworks not imported)."""
    made = _backends
    if made is not None:
        return made
    # Under a lock: two threads that each ran the hooks would each get their own backend
    # objects, and a tensor made on one is a stranger to the other (converted through NumPy,
    # it leaves the gradient's graph: the first ug.grad of a second thread gave zeros).
    with _backends_lock:
        if _backends is None:
            _make_backends()
        return _backends


def _make_backends() -> None:
    global _backends
    from unigraph.backend import Backend

    found = {}
    for hook in plugin_manager().hook.unigraph_backends.get_hookimpls():
        try:
            result = hook.function()
            if not isinstance(result, list | tuple) or not all(
                    isinstance(backend, Backend) for backend in result):
                raise TypeError(
                    f"unigraph_backends() must return a list of unigraph.backend.Backend "
                    f"objects, got {result!r}")
        except Exception as error:  # one broken plugin must not take the others down
            load_errors[hook.plugin_name] = f"{type(error).__name__}: {error}"
            continue
        for backend in result:
            found.setdefault(backend.name, backend)
    _backends = found


def get_backend(name: str, mode: str | None = None):
    """The backend called `name`, checked to offer `mode` and to be installed."""
    backend = _checked.get((name, mode))
    if backend is not None:
        return backend
    known = backends()
    if name not in known:
        if name in load_errors:
            raise BackendError(
                f"backend {name!r} could not be loaded: {load_errors[name]}")
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
