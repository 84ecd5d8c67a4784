"""Checkable scripts: importing a script by path, and its `CHECKS` entries.

A checkable script defines `CHECKS` at module level: a dict from a check name to what to
check, or a function with no arguments returning that dict (so that building models and
example inputs happens only when a check runs):

    CHECKS = {
        # name: (function or ug.nn.Module, (example inputs, ...))
        "counter": (counter, (0, 10)),
        # an optional third item holds ug.check options for this entry
        "mlp": (model, (x,), {"rtol": 1e-4, "grads": True}),
        # a dict with `model`, `loss_fn`, `optimizer`, `batches` (and `steps`, options)
        # runs ug.check_training instead
        "mlp_training": {"model": model, "loss_fn": F.cross_entropy,
                         "optimizer": lambda m: ug.optim.SGD(m, lr=0.1),
                         "batches": [(x, y)], "steps": 3},
    }

The script is imported, not run: its `if __name__ == "__main__":` block does not execute,
and its folder is put on `sys.path` as `python script.py` would. The library uses this to
find a function again in an isolated worker (`isolate`); `unigraph check` (the CLI,
`unigraph.cli_check`) is built on it.

>>> entries = load_checks("examples/mlp.py")
>>> report = run_entry(entries["mlp"], "examples/mlp.py", targets="numpy")
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib.util
import multiprocessing
import os
import sys
import types
from dataclasses import dataclass, field

TRAINING_KEYS = ("model", "loss_fn", "optimizer", "batches")
SCRIPT_PREFIX = "__unigraph_script_"


_LOADING: contextvars.ContextVar = contextvars.ContextVar("unigraph_loading", default="")


def loading_script() -> str:
    """The path of the script unigraph is importing to find a function or CHECKS in it (in
    an isolated worker, a suite worker, `unigraph check`), or "" when none is. A check the
    script calls at module level is not run then (`ug.check` returns a "not run" report):
    without an `if __name__ == "__main__":` guard, it would run again in every worker.
    A worker started by multiprocessing's spawn imports the parent's script the same way."""
    path = _LOADING.get()
    if path:
        return path
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
        return getattr(main, "__file__", None) or "the parent's __main__ module"
    return ""


def not_run_report(kind: str, name: str, dtype: str = "float32"):
    """The Report of a check called while its script is being loaded by unigraph (see
    `loading_script`): no targets, a note saying why, and `ok` (nothing failed: the process
    that runs the script runs the check)."""
    from unigraph.checking.report import Report

    return Report(name, dtype, [], kind=kind, not_run=True, notes=[
        f"not run here: called while unigraph imported {loading_script()} to find a function "
        "in it (a worker process); the process running the script runs it"])


class ScriptError(Exception):
    """The script cannot be checked: no CHECKS, a malformed entry, an unknown name."""


@dataclass
class CheckEntry:
    """One entry of a script's `CHECKS`."""

    name: str
    target: object  # the function or model (for training: the model)
    inputs: tuple = ()
    options: dict = field(default_factory=dict)
    training: dict | None = None  # check_training arguments, for a training entry


def load_script(path: str) -> types.ModuleType:
    """Import a script by path, once per process, without running its `__main__` block."""
    path = os.path.abspath(path)
    main = sys.modules.get("__mp_main__")  # a spawned worker already imported the parent
    if main is not None and os.path.abspath(getattr(main, "__file__", "") or "") == path:
        return main
    name = SCRIPT_PREFIX + hashlib.sha1(path.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    module.__unigraph_path__ = path
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # like `python script.py`: sibling imports work
    sys.modules[name] = module
    token = _LOADING.set(path)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        _LOADING.reset(token)
    return module


def load_checks(path: str, onnx: dict | None = None) -> dict:
    """{name: CheckEntry} from the script at `path` (imported once per process); for an
    `.onnx` file, its one entry, with `onnx` = {"dims", "inputs", "seed"} saying how its
    inputs are made (see `unigraph.checking.onnx_case`)."""
    if path.lower().endswith(".onnx"):
        from unigraph.checking.onnx_case import load_onnx_checks

        return load_onnx_checks(path, **(onnx or {}))
    if not os.path.isfile(path):
        raise ScriptError(f"no such file: {path}")
    module = load_script(path)
    checks = getattr(module, "CHECKS", None)
    if checks is None:
        raise ScriptError(
            f"{path} defines no CHECKS: add `CHECKS = {{'name': (function_or_model, "
            "(example inputs...))}` (see `unigraph check --help`)"
        )
    if callable(checks):
        checks = checks()
    if not isinstance(checks, dict) or not checks:
        raise ScriptError(f"{path}: CHECKS must be a non-empty dict, got {type(checks).__name__}")
    return {str(name): _entry(path, str(name), value) for name, value in checks.items()}


def _entry(path: str, name: str, value) -> CheckEntry:
    where = f"{path}: CHECKS[{name!r}]"
    if isinstance(value, dict):
        if all(key in value for key in TRAINING_KEYS):
            training = dict(value)
            return CheckEntry(name, training["model"], training=training)
        if "fn" in value and "inputs" in value:
            options = {k: v for k, v in value.items() if k not in ("fn", "inputs")}
            return CheckEntry(name, value["fn"], tuple(value["inputs"]), options)
        raise ScriptError(f"{where}: a dict entry needs either fn and inputs, or "
                          f"{', '.join(TRAINING_KEYS)}")
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        inputs = value[1] if isinstance(value[1], tuple | list) else (value[1],)
        options = dict(value[2]) if len(value) == 3 else {}
        return CheckEntry(name, value[0], tuple(inputs), options)
    raise ScriptError(f"{where}: expected (function_or_model, (inputs...)) or "
                      "(function_or_model, (inputs...), {options})")


def run_entry(entry: CheckEntry, path: str, targets="all", isolate=False, timeout=600.0,
              **overrides):
    """Check one entry; returns its Report. `overrides` (dtype, grads) win over the entry's
    own options. With `isolate`, each worker imports the script again and takes the entry by
    name; training entries run in this process."""
    from unigraph.checking.checker import check, check_source
    from unigraph.checking.training import check_training

    options = {**entry.options, **overrides}
    options.setdefault("name", entry.name)
    if entry.training is not None:
        arguments = {k: v for k, v in entry.training.items() if k != "grads"}
        arguments.setdefault("name", entry.name)
        if "dtype" in overrides:
            arguments["dtype"] = overrides["dtype"]
        report = check_training(targets=targets, **arguments)
        if isolate:
            report.notes.append("training checks run in this process (--isolate applies to "
                                "function checks)")
        return report
    if not isolate:
        return check(entry.target, *entry.inputs, targets=targets, **options)
    source = {"kind": "checks", "path": os.path.abspath(path), "name": entry.name}
    return check_source(source, entry.target, entry.inputs, targets=targets, timeout=timeout,
                        **options)
