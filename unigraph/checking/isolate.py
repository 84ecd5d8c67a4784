"""`isolate=True`: each target runs in its own worker process.

A framework that segfaults, aborts or hangs takes only its own worker down: the parent
reports that target as "crashed" (with the signal) or "timeout" and the other targets
complete. Workers come from `concurrent.futures.ProcessPoolExecutor` with the "spawn" start
method (a fresh interpreter: no framework state inherited, and TensorFlow and Paddle never
meet in one process).

Nothing but plain data crosses the boundary: the function is named, not pickled, by a
*source* (a dict of strings): `{"kind": "import", "module": "pkg.models", "name": "net"}`,
`{"kind": "script", "path": "/abs/model.py", "name": "forward"}`, or
`{"kind": "checks", "path": "/abs/model.py", "name": "mlp"}` for an entry of a script's
`CHECKS` (see `unigraph.checking.scripts`). Arrays cross as `np.save` bytes (loaded with
`allow_pickle=False`), and results come back as JSON-able dicts. Parameter values are sent
from the parent, so a worker that builds the model again still runs the same weights.

Plugins registered at run time (`unigraph.plugins.register_plugin`) are registered again in
each worker when they can be named: a module, a module-level object, or a class that takes
no arguments. Entry-point plugins load as usual (`UNIGRAPH_PLUGINS` is inherited).

A script needs no `if __name__ == "__main__":` guard: multiprocessing's own re-import of the
parent's `__main__` is turned off while a worker starts (`_main_hidden`), the worker imports
the script by path (`load_script`, its prints silenced) to find the function, and a check
the script calls at module level is "not run" there (`scripts.loading_script`), so workers
never start workers. A local function or lambda cannot be found by name in another process:
it is refused up front, naming it and where it is defined.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import faulthandler
import importlib
import inspect
import io
import multiprocessing
import os
import sys
import time
import types
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from unigraph import pytree
from unigraph.checking.report import TargetReport
from unigraph.checking.run import TargetRun
from unigraph.checking.scripts import load_checks, load_script
from unigraph.checking.worker import exit_text
from unigraph.config import Target
from unigraph.function import Function, is_array_leaf

MAX_WORKERS = 4  # targets run at once: each worker may hold a whole framework in memory


# -- arrays and trees as plain data ------------------------------------------------------
def encode_array(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def decode_array(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def encode_tree(treedef):
    kind = treedef[0]
    if kind == "*":
        return ["*"]
    if kind in ("tuple", "list"):
        return [kind, [encode_tree(x) for x in treedef[1]]]
    if kind == "dict":
        return ["dict", list(treedef[1]), [encode_tree(x) for x in treedef[2]]]
    obj = treedef[1].obj
    if obj is not None and not isinstance(obj, bool | int | float | str):
        raise ValueError(
            f"isolate=True: the argument {obj!r} ({type(obj).__name__}) cannot be sent to a "
            "worker process; pass tensors, arrays, numbers, strings or None"
        )
    return ["static", obj]


def decode_tree(data):
    kind = data[0]
    if kind == "*":
        return ("*",)
    if kind in ("tuple", "list"):
        return (kind, tuple(decode_tree(x) for x in data[1]))
    if kind == "dict":
        return ("dict", tuple(data[1]), tuple(decode_tree(x) for x in data[2]))
    return ("static", pytree.Static(data[1]))


# -- naming the function -----------------------------------------------------------------
def _lookup(module, qualname: str):
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def load_source(source: dict):
    """(the function or model, inputs or None, check options) named by `source`."""
    with contextlib.redirect_stdout(io.StringIO()):  # the script's prints: once, by the parent
        return _load_source(source)


def _load_source(source: dict):
    kind = source["kind"]
    if kind == "import":
        return _lookup(importlib.import_module(source["module"]), source["name"]), None, {}
    if kind == "script":
        return _lookup(load_script(source["path"]), source["name"]), None, {}
    if kind == "checks":
        entry = load_checks(source["path"])[source["name"]]
        return entry.target, entry.inputs, entry.options
    raise ValueError(f"unknown source kind {kind!r}")


def parse_reference(text: str) -> dict:
    """`"pkg.mod:name"` or `"path/to/file.py:name"` -> a source."""
    where, _, name = text.rpartition(":")
    if not where or not name:
        raise ValueError(f"expected 'module:name' or 'file.py:name', got {text!r}")
    if where.endswith(".py") or os.sep in where:
        return {"kind": "script", "path": os.path.abspath(where), "name": name}
    return {"kind": "import", "module": where, "name": name}


def _global_name(obj, module) -> str | None:
    for name, value in vars(module).items():
        if value is obj:
            return name
    return None


def resolve_source(obj) -> tuple[dict, object]:
    """(source, object): how a worker process finds `obj` again, and `obj` itself."""
    if isinstance(obj, str):
        source = parse_reference(obj)
        return source, load_source(source)[0]
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    is_routine = isinstance(obj, Function | types.FunctionType)
    if not is_routine:  # a model instance: find the module-level name bound to it
        module_name, qualname = None, None
        candidates = [sys.modules.get(type(obj).__module__), sys.modules.get("__main__")]
        for module in candidates:
            name = _global_name(obj, module) if module is not None else None
            if name:
                module_name, qualname = module.__name__, name
                break
    if qualname and "<" in qualname:  # "<lambda>", "outer.<locals>.inner"
        raise ValueError(
            f"isolate=True cannot check {qualname}{_defined_at(obj)}: a worker process finds "
            "the function by its module and name, and a local function or lambda has none. "
            "Define it at module level (a model: bind it to a module-level name), or check it "
            "with isolate=False")
    if not module_name or not qualname:
        raise ValueError(
            f"isolate=True needs {obj!r} to be importable: define it at module level, or "
            "pass it as a 'module:name' or 'path/to/file.py:name' string"
        )
    module = sys.modules.get(module_name)
    path = getattr(module, "__unigraph_path__", None) or (
        getattr(module, "__file__", None) if module_name in ("__main__", "__mp_main__")
        else None)
    if path:
        source = {"kind": "script", "path": os.path.abspath(path), "name": qualname}
    else:
        source = {"kind": "import", "module": module_name, "name": qualname}
    return source, obj


def _defined_at(obj) -> str:
    """` (defined at file.py:12)`, or "" when Python does not know."""
    try:
        fn = getattr(obj, "fn", obj)
        return f" (defined at {inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]})"
    except (TypeError, OSError):
        return ""


@contextlib.contextmanager
def _main_hidden():
    """While a worker starts: hide the parent's `__main__` script from multiprocessing's
    spawn, which would import it again in the worker (re-running a script without a main
    guard, and its `ug.check(isolate=True)` during the worker's start-up, which
    multiprocessing refuses). The worker loads what it needs by path (`load_source`)."""
    main = sys.modules.get("__main__")
    saved = {name: vars(main)[name] for name in ("__file__", "__spec__")
             if main is not None and name in vars(main)}
    if "__file__" in saved:
        del main.__file__
        main.__spec__ = None
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


# -- plugins -----------------------------------------------------------------------------
def runtime_plugins() -> list:
    """Descriptions of the plugins registered at run time that a worker can register too."""
    from unigraph import plugins

    entry_names = {entry.name for entry in plugins.entry_point_list()}
    found = []
    for name, plugin in plugins.plugin_manager().list_name_plugin():
        if name in entry_names or plugin is None:
            continue
        if isinstance(plugin, types.ModuleType):
            found.append({"name": name, "module": plugin.__name__, "attr": ""})
            continue
        module = sys.modules.get(type(plugin).__module__)
        attr = _global_name(plugin, module) if module is not None else None
        path = getattr(module, "__unigraph_path__", None) or (
            getattr(module, "__file__", None) if type(plugin).__module__ == "__main__"
            else None)
        if attr and path:  # defined in a script: the worker imports it by path
            found.append({"name": name, "module": "", "path": os.path.abspath(path),
                          "attr": attr})
        elif attr:
            found.append({"name": name, "module": module.__name__, "attr": attr})
        else:
            found.append({"name": name, "module": type(plugin).__module__,
                          "attr": type(plugin).__qualname__, "call": True})
    return found


def _register_plugins(described: list) -> None:
    from unigraph import plugins

    manager = plugins.plugin_manager()
    for item in described:
        if manager.get_plugin(item["name"]) is not None:
            continue
        try:
            if item.get("path"):
                with contextlib.redirect_stdout(io.StringIO()):
                    obj = load_script(item["path"])
            else:
                obj = importlib.import_module(item["module"])
            if item["attr"]:
                obj = _lookup(obj, item["attr"])
            if item.get("call"):
                obj = obj()
        except Exception:  # not nameable here: a target that needs it reports "unknown"
            continue
        plugins.register_plugin(obj, name=item["name"])


# -- the worker --------------------------------------------------------------------------
def worker(payload: dict) -> dict:
    """Run one target in this (spawned) process. Returns plain data only."""
    faulthandler.enable()  # a segfault prints the Python stack to the worker's stderr
    try:
        from unigraph.checking.checker import run_and_evaluate
        from unigraph.checking.run import prepare

        _register_plugins(payload["plugins"])
        obj = load_source(payload["source"])[0]
        leaves = [decode_array(x) for x in payload["leaves"]]
        inputs = pytree.unflatten(decode_tree(payload["tree"]), leaves)
        options = payload["options"]
        case = prepare(obj, inputs, options["dtype"], options["grads"], options["rtol"],
                       options["atol"], options["seed"], options["name"])
        case.load_params([decode_array(x) for x in payload["params"]])
        report, run = run_and_evaluate(case, Target.parse(payload["target"]),
                                       options["localize"])
        return {
            "report": report.to_dict(),
            "outputs": [encode_array(x) for x in run.outputs] if run.outputs else None,
            "grads": [encode_array(x) for x in run.grads] if run.grads else None,
            "notes": case.notes,
            "unreferenced": case.unreferenced,
        }
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}


# -- the parent --------------------------------------------------------------------------
def _exit_text(processes: list) -> str:
    for process in processes:
        # A loaded machine may take a while to reap the dead worker: wait for its status.
        deadline = time.monotonic() + 15
        while process.exitcode is None and time.monotonic() < deadline:
            process.join(timeout=0.5)
        if process.exitcode:
            return exit_text(process.exitcode)
    return exit_text(None)


def _kill(processes: list) -> None:
    for process in processes:
        if process.is_alive():
            process.kill()


def check_isolated(case, source: dict, targets: list, skipped: dict, options: dict,
                   timeout: float | None):
    """Run `case` on every target, each in its own worker; build the Report here."""
    from unigraph.checking.checker import finish

    leaves, treedef = pytree.flatten(tuple(case.inputs), is_array_leaf)
    base = {
        "source": source,
        "plugins": runtime_plugins(),
        "leaves": [encode_array(x) for x in leaves],
        "tree": encode_tree(treedef),
        "params": [encode_array(case.snapshot[id(p)]) for p in case.params],
        "options": options,
    }
    context = multiprocessing.get_context("spawn")
    waiting = list(targets)
    running: dict = {}  # future -> (target, executor, processes, started)
    results: dict = {}
    limit = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    while waiting or running:
        while waiting and len(running) < limit:
            target = waiting.pop(0)
            executor = concurrent.futures.ProcessPoolExecutor(1, mp_context=context)
            with _main_hidden():  # the process starts in submit
                future = executor.submit(worker, {**base, "target": str(target)})
            processes = list(getattr(executor, "_processes", {}).values())
            running[future] = (target, executor, processes, time.monotonic())
        remaining = None
        if timeout is not None:
            oldest = min(started for _, _, _, started in running.values())
            remaining = max(0.0, timeout - (time.monotonic() - oldest))
        done, _ = concurrent.futures.wait(list(running), timeout=remaining,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        now = time.monotonic()
        for future in list(running):
            target, executor, processes, started = running[future]
            if future in done:
                results[str(target)] = _collect(future, target, processes, now - started)
            elif timeout is not None and now - started >= timeout:
                _kill(processes)
                results[str(target)] = (TargetReport(
                    str(target), "timeout", error=f"no result after {timeout:g} s: the "
                    "worker was killed", seconds=now - started), TargetRun(), [], {})
            else:
                continue
            del running[future]
            executor.shutdown(wait=False, cancel_futures=True)
    reports, runs = [], {}
    for target in targets:
        report, run, notes, unreferenced = results[str(target)]
        reports.append(report)
        runs[str(target)] = run
        case.notes.extend(note for note in notes if note not in case.notes)
        case.unreferenced.update(unreferenced)
    return finish(case, reports, runs, skipped)


def _collect(future, target: Target, processes: list, seconds: float):
    name = str(target)
    try:
        data = future.result()
    except BrokenProcessPool:
        how = _exit_text(processes)
        return TargetReport(name, "crashed", error=f"the worker process {how}",
                            seconds=seconds), TargetRun(), [], {}
    except Exception as error:
        return TargetReport(name, "error", error=f"{type(error).__name__}: {error}",
                            seconds=seconds), TargetRun(), [], {}
    if "error" in data:
        return TargetReport(name, "error", error=data["error"], seconds=seconds), \
            TargetRun(), [], {}
    report = TargetReport.from_dict(data["report"])
    report.seconds = seconds
    run = TargetRun(
        outputs=[decode_array(x) for x in data["outputs"]] if data["outputs"] else None,
        grads=[decode_array(x) for x in data["grads"]] if data["grads"] else None,
    )
    return report, run, data["notes"], data["unreferenced"]
