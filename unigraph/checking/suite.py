"""Check suites: many scripts x targets x seeds x dtypes, as independent tasks, one report.

A suite is planned here as a list of tasks, each one (script entry, target, seed, dtype)
described by plain data: the script's path, the entry's name in its `CHECKS`, the target,
the seed and dtype, the options (`grads`, training `steps`), the plugins registered at run
time, the import path and the `UNIGRAPH_*` environment. An executor runs the tasks (worker
processes on this machine, or Ray: `unigraph.checking.executors`), each in a worker that
imports the script and checks one entry on one target (`unigraph.checking.worker`). Results
come back as plain data and merge into a `SuiteReport` (`unigraph.checking.suite_report`):
one `Report` per (model, seed, dtype) with a row per target, as `ug.check` gives.

With a cache folder, each task's result is stored under a hash of what decides it: the
script's source, the entry, target, seed, dtype and options, unigraph's version and the
source of unigraph and of the target's backend package, and the framework's version. A task
whose hash is stored is not run again (crashes and timeouts are always run again).

    report = ug.check_suite(["examples/"], targets="numpy,torch", seeds=[0, 1, 2])
    print(report); report.assert_ok()
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import sys
import threading
import time

from unigraph.checking.onnx_case import ORT_FILE_TARGET, is_onnx_path, parse_dims
from unigraph.checking.suite_report import SuiteReport, TaskResult
from unigraph.cli_check import split_file_name

CACHEABLE = ("ok", "disagree", "error", "unsupported")  # what a rerun would give again
_DEFINES_CHECKS = re.compile(r"^CHECKS\s*(:[^=\n]*)?=", re.MULTILINE)


class SuiteError(ValueError):
    """The suite cannot run as asked (a usage error): no such file, a script that cannot be
    imported or defines no CHECKS, an unknown entry or target."""


# -- which scripts and entries -----------------------------------------------------------
def defines_checks(path: str) -> bool:
    """True when the Python file at `path` assigns `CHECKS` at module level (read, not run)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return bool(_DEFINES_CHECKS.search(handle.read()))
    except (OSError, UnicodeDecodeError):
        return False


def is_case_file(path: str) -> bool:
    """A script that defines CHECKS, or an ONNX model (`unigraph.checking.onnx_case`)."""
    return is_onnx_path(path) or (path.endswith(".py") and defines_checks(path))


def _scripts_under(folder: str) -> list:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        found += [os.path.join(root, f) for f in sorted(files)]
    return [path for path in found if is_case_file(path)]


def expand_paths(paths) -> list:
    """[(script path, entry name or None)] for files, `FILE:NAME`, folders (every script in
    them that defines CHECKS, every .onnx file) and globs; in order, each file once."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    found: list = []
    for text in map(os.fspath, paths):
        path, name = split_file_name(text)
        if os.path.isdir(path):
            scripts = _scripts_under(path)
            if not scripts:
                raise SuiteError(f"no script under {path} defines CHECKS (and no .onnx file)")
            found += [(script, None) for script in scripts]
        elif os.path.isfile(path):
            found.append((path, name))
        elif glob.has_magic(path):
            matches = sorted(glob.glob(path, recursive=True))
            scripts = [s for m in matches for s in (_scripts_under(m) if os.path.isdir(m)
                                                    else [m] if is_case_file(m) else [])]
            if not scripts:
                raise SuiteError(f"{path} matches no script that defines CHECKS "
                                 "(and no .onnx file)")
            found += [(script, name) for script in scripts]
        else:
            raise SuiteError(f"no such file or directory: {path}")
    return list(dict.fromkeys(found))


def list_entries(path: str, onnx: dict | None = None) -> dict:
    """{name: CheckEntry} of the script (or .onnx file, its inputs made as `onnx` says) at
    `path`; a script that cannot be imported or has no usable CHECKS is a `SuiteError`."""
    from unigraph.checking.run import error_text
    from unigraph.checking.scripts import ScriptError, load_checks

    try:
        return load_checks(path, onnx)
    except ScriptError as error:
        raise SuiteError(str(error)) from None
    except Exception as error:  # the script itself raised: nothing of it can be checked
        raise SuiteError(f"{path}: importing it (or building its CHECKS) raised "
                         f"{error_text(error)}") from error


# -- targets -----------------------------------------------------------------------------
def plan_targets(targets) -> tuple[list, dict]:
    """(targets to run, {name: why not}) with unknown names refused (`SuiteError`) and
    backends that are not installed here moved to the second."""
    from unigraph import plugins
    from unigraph.checking.checker import UnknownTargetError, resolve_targets, validate_targets

    chosen, skipped = resolve_targets(targets)
    try:
        validate_targets(chosen)
    except UnknownTargetError as error:
        raise SuiteError(str(error)) from None
    runnable = []
    for target in chosen:
        available, reason = plugins.backends()[target.backend].status()
        if available:
            runnable.append(target)
        else:
            skipped[str(target)] = reason
    return runnable, skipped


def _matrix(values, kind, name: str) -> list:
    """`"0,1,2"` / [0, 1, 2] / None -> a list (None: the entry's own or the default)."""
    if values is None:
        return [None]
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    elif not isinstance(values, list | tuple):
        values = [values]
    try:
        parsed = [kind(str(v).strip()) for v in values]
    except SuiteError:
        raise
    except ValueError:
        raise SuiteError(f"{name}: expected a comma-separated list, got {values!r}") from None
    return list(dict.fromkeys(parsed)) or [None]


def _dtype(text: str) -> str:
    from unigraph.ir import FLOAT_DTYPES

    if text not in FLOAT_DTYPES:
        raise SuiteError(f"unknown dtype {text!r}: use {', '.join(FLOAT_DTYPES)}")
    return text


# -- the cache ---------------------------------------------------------------------------
def _digest(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def _package_digest(module_name: str) -> str:
    """A digest of the .py sources of the top-level package holding `module_name` (of the
    module's own file when it is a plain module, not a package)."""
    top = sys.modules.get(module_name.partition(".")[0])
    path = getattr(top, "__file__", "") or ""
    if not path:
        return ""
    if not hasattr(top, "__path__"):
        with open(path, "rb") as handle:
            return _digest(handle.read())
    sources = hashlib.sha256()
    for root, dirs, files in os.walk(os.path.dirname(path)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(root, name), "rb") as handle:
                sources.update(name.encode() + handle.read())
    return sources.hexdigest()


class ResultCache:
    """Task results stored as JSON files under `folder`, by the task's content hash.

    >>> cache = ResultCache(".unigraph-cache")
    >>> cache.get(task["key"])   # None, or the stored result
    """

    def __init__(self, folder: str):
        self.folder = os.fspath(folder)
        os.makedirs(self.folder, exist_ok=True)

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key + ".json")

    def get(self, key: str) -> dict | None:
        try:
            with open(self._path(key), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def put(self, key: str, result: dict) -> None:
        if result.get("status") not in CACHEABLE:
            return
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        os.replace(partial, path)  # readers never see half a file


class _Keys:
    """Content hashes of tasks; each script and package is read once."""

    def __init__(self):
        import unigraph

        self.version = unigraph.__version__
        self.unigraph = _package_digest("unigraph")
        self.sources: dict = {}
        self.backends: dict = {}

    def _backend(self, name: str) -> str:
        if name not in self.backends:
            from unigraph import plugins

            backend = plugins.backends()[name]
            self.backends[name] = _digest(json.dumps(
                [type(backend).__module__, _package_digest(type(backend).__module__),
                 backend.version()]))
        return self.backends[name]

    def _onnx(self, options: dict | None):
        """An ONNX case's input options, the .npz file by its content."""
        if not options:
            return None
        inputs = options.get("inputs")
        if inputs and inputs not in self.sources:
            with open(inputs, "rb") as handle:
                self.sources[inputs] = _digest(handle.read())
        return [options.get("dims"), self.sources.get(inputs)]

    def key(self, task: dict) -> str:
        path = task["abspath"]
        if path not in self.sources:
            with open(path, "rb") as handle:
                self.sources[path] = _digest(handle.read())
        return _digest(json.dumps({
            "script": self.sources[path], "entry": task["entry"], "target": task["target"],
            "seed": task["seed"], "dtype": task["dtype"], "grads": task["grads"],
            "steps": task["steps"], "unigraph": [self.version, self.unigraph],
            "onnx": self._onnx(task.get("onnx")),
            "backend": self._backend(task["target"].partition(":")[0])}, sort_keys=True))


# -- planning ----------------------------------------------------------------------------
def plan(paths, targets="all", seeds=None, dtypes=None, grads=None, training_steps=None,
         working_dir=None, dims=None, inputs=None) -> tuple[list, dict]:
    """(tasks, {target: why it is not run}) for a suite; raises `SuiteError` on misuse.
    `dims` ({name: size} or ["batch=4"]) and `inputs` (an .npz path) make the inputs of
    .onnx files; each .onnx entry also gets an `onnxruntime:file` task (ORT running the
    file itself against the same reference)."""
    from unigraph.checking.isolate import runtime_plugins

    if training_steps is not None and training_steps < 0:
        raise SuiteError(f"--training: steps must be >= 0, got {training_steps}")
    chosen, skipped = plan_targets(targets)
    seed_list = _matrix(seeds, int, "seeds")
    dtype_list = _matrix(dtypes, _dtype, "dtypes")
    environment = {k: v for k, v in os.environ.items() if k.startswith("UNIGRAPH_")}
    common = {"grads": grads, "steps": training_steps or None, "html": True,
              "plugins": runtime_plugins(), "sys_path": [p for p in sys.path if p],
              "env": environment}
    from unigraph.checking.scripts import ScriptError

    try:
        onnx = {"dims": dims if isinstance(dims, dict) else parse_dims(dims),
                "inputs": os.path.abspath(inputs) if inputs else None}
    except ScriptError as error:
        raise SuiteError(str(error)) from None
    if inputs and not os.path.isfile(inputs):
        raise SuiteError(f"--inputs: no such file: {inputs}")
    models = []
    for path, name in expand_paths(paths):
        entries = list_entries(path, onnx if is_onnx_path(path) else None)
        if name is not None and name not in entries:
            raise SuiteError(f"{path} has no check {name!r}; its CHECKS are: "
                             f"{', '.join(entries)}")
        for entry_name, entry in entries.items():
            if name not in (None, entry_name):
                continue
            if entry.training is not None and training_steps == 0:
                continue  # --training 0: function entries only
            models.append((path, entry_name, _own(entry)))
    tasks = []
    onnx_models = [model for model in models if is_onnx_path(model[0])]
    grouped = [(str(t), models) for t in chosen] + [(ORT_FILE_TARGET, onnx_models)]
    for target, cases in grouped:  # grouped by target: a worker keeps its framework imported
        for path, entry_name, own in cases:
            for seed in (s if s is not None else own["seed"] for s in seed_list):
                for dtype in (d if d is not None else own["dtype"] for d in dtype_list):
                    absolute = os.path.abspath(path)
                    shipped = (os.path.relpath(absolute, os.path.abspath(working_dir))
                               if working_dir else absolute)
                    extra = {"onnx": onnx} if is_onnx_path(path) else {}
                    tasks.append({**common, **extra, "id": len(tasks), "file": path,
                                  "abspath": absolute, "path": shipped, "entry": entry_name,
                                  "target": target, "seed": seed, "dtype": dtype})
    return tasks, skipped


def _own(entry) -> dict:
    """The seed and dtype an entry asks for itself (else the defaults: 0, float32)."""
    options = entry.training if entry.training is not None else entry.options
    return {"seed": int(options.get("seed", 0)), "dtype": options.get("dtype", "float32")}


def check_suite(paths, targets="all", seeds=None, dtypes=None, grads=None,
                training_steps=None, executor="local", jobs=None, timeout=600.0, cache=None,
                address=None, num_cpus=1, memory=None, max_retries=2, working_dir=None,
                threads=1, progress=False, dims=None, inputs=None) -> SuiteReport:
    """Check every `CHECKS` entry of the scripts in `paths` (files, `FILE:NAME`, folders,
    globs) on every target, for each seed and dtype; one task per (entry, target, seed,
    dtype), each in a worker process; returns the merged `SuiteReport`.

    seeds, dtypes: lists (or "0,1,2"); None: each entry's own (else seed 0, float32).
    grads: True/False override the entries' own; training_steps: the steps of training
        entries (0: leave them out).
    executor: "local" (`jobs` worker processes here), "ray" (one Ray task per task: the Ray
        already initialized, else `address` / RAY_ADDRESS, else a local Ray started and
        stopped here; `num_cpus`, `memory` (bytes) and `max_retries` per task; with
        `working_dir`, that folder is shipped to the nodes and scripts are found in it) or
        "inline" (this process, no isolation).
    timeout: seconds one task may take (its worker is then killed: "timeout").
    cache: a folder; a task whose content hash is stored there is not run again.
    threads: the thread count of each worker's frameworks (OMP_NUM_THREADS and friends).
    dims, inputs: for .onnx files: sizes of symbolic dimensions ({"batch": 4}) and an .npz
        of inputs by graph input name (default: seeded random inputs of the declared shapes);
        see `unigraph.checking.onnx_case`.

    >>> report = ug.check_suite(["examples/"], targets="numpy,torch", seeds=[0, 1])
    >>> print(report); report.assert_ok()
    """
    from unigraph.checking import executors

    if executor not in executors.EXECUTORS:
        raise SuiteError(f"unknown executor {executor!r}: use "
                         f"{', '.join(executors.EXECUTORS)}")
    started = time.perf_counter()
    tasks, skipped = plan(paths, targets, seeds, dtypes, grads, training_steps, working_dir,
                          dims, inputs)
    store = ResultCache(cache) if cache else None
    keys = _Keys() if store else None
    results: dict = {}
    to_run = []
    for task in tasks:
        task["key"] = keys.key(task) if keys else None
        stored = store.get(task["key"]) if store else None
        if stored is not None:
            results[task["id"]] = TaskResult.from_task(task, stored, cached=True)
        else:
            to_run.append(task)
    bar = _Progress(len(tasks), progress, results.values())
    lock = threading.Lock()

    def on_result(task, result):
        with lock:
            if store is not None:
                store.put(task["key"], result)
            results[task["id"]] = TaskResult.from_task(task, result)
            bar.update(results[task["id"]])

    try:
        executors.run(executor, to_run, on_result, jobs=jobs, timeout=timeout,
                      address=address, num_cpus=num_cpus, memory=memory,
                      max_retries=max_retries, working_dir=working_dir, threads=threads)
    finally:
        bar.close()
    ordered = sorted(results.values(), key=lambda r: r.id)
    return SuiteReport(ordered, skipped=skipped, executor=executor,
                       seconds=time.perf_counter() - started, ran=len(to_run))


class _Progress:
    """A tqdm bar counting ok / failed / crashed tasks (nothing when `enabled` is False)."""

    def __init__(self, total: int, enabled: bool, done):
        self.counts = {"ok": 0, "failed": 0, "crashed": 0, "cached": 0}
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="task", desc="unigraph check", file=sys.stderr,
                            dynamic_ncols=True)
        for result in done:
            self.update(result)

    def update(self, result: TaskResult) -> None:
        self.counts[result.outcome] = self.counts.get(result.outcome, 0) + 1
        self.counts["cached"] += result.cached
        if self.bar is not None:
            self.bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in self.counts.items()),
                                     refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
