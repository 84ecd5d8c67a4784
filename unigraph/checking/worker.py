"""Suite workers: one task, (script entry, target, seed, dtype), run in a worker process.

A `Runner` owns one worker process (`python -m unigraph.checking.worker`) and hands it tasks
one at a time, as JSON lines on its stdin; the worker answers each with one JSON line. The
worker keeps its imports between tasks (a framework import costs seconds, a task often less),
so a runner is bound to one backend: a task for another backend starts a fresh worker, which
also keeps TensorFlow and Paddle out of one process and one framework's memory per worker.

What cannot be a JSON line is a result too: a worker that dies (a segfault in a framework)
gives "crashed" with the signal and the end of its stderr (faulthandler prints the Python
stack there); one that does not answer within the timeout is killed and gives "timeout".
The next task starts a fresh worker. Both executors use runners: the local one runs `-j` of
them in threads of this process, and each Ray task hands its task to a runner held by the
Ray worker process (`unigraph.checking.executors`).

Tasks and results are plain data (see `unigraph.checking.suite`): the worker imports the
script by path, builds its CHECKS and runs one entry on one target with `check` (or
`check_training`) in-process; the result is the single-target Report as a dict, and for a
target that diverged at a node, the graph drawn by `unigraph.graph_view.to_html` with that node
highlighted.
"""

from __future__ import annotations

import faulthandler
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from unigraph.checking.onnx_case import ORT_FILE_TARGET

# The thread count every worker runs with: the same in both executors (reductions can round
# differently with more threads), and -j workers do not oversubscribe the cores.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
LOG_TAIL = 3000  # characters of a dead worker's stderr kept in its result


# -- inside the worker -------------------------------------------------------------------
_ENTRIES: dict = {}  # (path, onnx) -> (mtime, {name: CheckEntry}): built once per process


def _entries(path: str, onnx: dict | None = None) -> dict:
    """The entries of the script at `path`; for an .onnx file, with its inputs made as
    `onnx` ({"dims", "inputs", "seed"}) says."""
    from unigraph.checking.scripts import load_checks

    mtime = os.path.getmtime(path)
    key = (path, json.dumps(onnx, sort_keys=True))
    cached = _ENTRIES.get(key)
    if cached is None or cached[0] != mtime:
        _ENTRIES[key] = (mtime, load_checks(path, onnx))
    return _ENTRIES[key][1]


def run_task(task: dict) -> dict:
    """Run one task in this process; returns its result (never raises)."""
    from unigraph.checking.isolate import _register_plugins
    from unigraph.checking.run import error_text

    started = time.perf_counter()
    try:
        _register_plugins(task.get("plugins") or [])
        path = os.path.abspath(task["path"])  # relative: to a Ray working_dir
        onnx = task.get("onnx")
        if onnx is not None:  # the inputs of an .onnx case are drawn with the task's seed
            onnx = {**onnx, "seed": task["seed"] if task.get("seed") is not None else 0}
        entries = _entries(path, onnx)
        if task["entry"] not in entries:
            raise KeyError(f"{task['path']} has no check {task['entry']!r}")
        if task["target"] == ORT_FILE_TARGET:
            result = _run_file_on_onnxruntime(entries[task["entry"]], path, task)
        else:
            result = _run_entry(entries[task["entry"]], task)
    except Exception as error:  # the entry itself raised: a result named by the entry
        result = {"status": "error", "report": None,
                  "error": f"CHECKS[{task['entry']!r}] raised {error_text(error)}",
                  "log": traceback.format_exc(limit=-6)[-LOG_TAIL:]}
    result["seconds"] = time.perf_counter() - started
    return result


def _run_entry(entry, task: dict) -> dict:
    from unigraph.checking.checker import check_in_process
    from unigraph.checking.training import check_training
    from unigraph.config import Target

    target = Target.parse(task["target"])
    options = dict(entry.options)
    for key in ("seed", "dtype", "grads"):
        if task.get(key) is not None:
            options[key] = task[key]
    case = None
    if entry.training is not None:
        arguments = {k: v for k, v in entry.training.items() if k != "grads"}
        arguments.setdefault("name", entry.name)
        for key in ("seed", "dtype"):
            if task.get(key) is not None:
                arguments[key] = task[key]
        if task.get("steps"):
            arguments["steps"] = task["steps"]
        report = check_training(targets=[target], **arguments)
    else:
        known = ("grads", "dtype", "rtol", "atol", "seed", "name", "localize_divergence")
        unknown = sorted(set(options) - set(known) - {"isolate", "timeout", "targets"})
        if unknown:
            raise TypeError(f"unknown check option(s) {', '.join(unknown)}; an entry's "
                            f"options are {', '.join(known)}")
        options = {k: v for k, v in options.items() if k in known}
        options.setdefault("name", entry.name)
        report, case = check_in_process(entry.target, entry.inputs, [target], {}, **options)
    status = report.targets[0].status if report.targets else "unsupported"
    return {"status": status, "report": report.to_dict(), "error": "",
            "graph_html": _graph_html(report, case) if task.get("html") else None}


def _run_file_on_onnxruntime(entry, path: str, task: dict) -> dict:
    from unigraph.checking.onnx_case import run_file_on_onnxruntime

    report = run_file_on_onnxruntime(entry, path, task.get("dtype") or "float32",
                                     task.get("seed") or 0)
    status = report.targets[0].status if report.targets else "unsupported"
    why_not = "" if report.targets else report.skipped.get(ORT_FILE_TARGET, "")
    return {"status": status, "report": report.to_dict(), "error": why_not,
            "graph_html": None}


def _graph_html(report, case) -> str | None:
    """The traced graph with the diverging node highlighted, for the suite's HTML page."""
    if case is None or not report.targets or report.targets[0].divergence is None:
        return None
    divergence = report.targets[0].divergence
    graph = case.grad_graph if divergence.graph == "gradient" else case.graph
    if graph is None or not divergence.values:
        return None
    from unigraph.graph_view import to_html

    note = str(divergence).splitlines()[0]
    highlight = {value: (note, True) for value in divergence.values}
    return to_html(graph, highlight, title=f"{report.name} on {divergence.target}")


def main() -> None:
    """The worker's loop: a task per line on stdin, a result per line on the original
    stdout. The user's prints go to stderr, so that they cannot break the protocol."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    faulthandler.enable()  # a segfault prints the Python stack to stderr (the runner's log)
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        print(f"-- task {task.get('id')}: {task.get('entry')} on {task.get('target')}",
              file=sys.stderr, flush=True)
        answers.write(json.dumps(run_task(task)) + "\n")
        answers.flush()


# -- the parent's side -------------------------------------------------------------------
def exit_text(code: int | None) -> str:
    """`killed by SIGSEGV`, `exited with status 3`."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code:
        return f"exited with status {code}"
    return "exited unexpectedly"


class Runner:
    """One worker process, started on first use, that runs tasks one at a time.

    >>> runner = Runner()
    >>> result = runner.run(task, timeout=600)   # {"status": "ok", "report": {...}, ...}
    >>> runner.close()
    """

    def __init__(self, threads: int = 1):
        self.threads = threads
        self.process: subprocess.Popen | None = None
        self.backend = None
        self.environment: dict | None = None
        self.log_path: str | None = None
        self._buffer = b""

    def _environment(self, task: dict) -> dict:
        env = dict(os.environ)
        env.update(task.get("env") or {})
        for name in THREAD_VARIABLES:
            env[name] = str(self.threads)
        paths = [p for p in task.get("sys_path") or [] if p and os.path.isdir(p)]
        if paths:  # the caller's import path: plugins and models defined in its modules
            env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
        return env

    def _start(self, task: dict, env: dict) -> None:
        self.close()
        handle, self.log_path = tempfile.mkstemp(prefix="unigraph-worker-", suffix=".log")
        os.close(handle)
        # Appending: the worker's writes never land where this process last read.
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "unigraph.checking.worker"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, env=env)
        self.backend = task["target"].partition(":")[0]
        self.environment = env
        self._buffer = b""

    def run(self, task: dict, timeout: float | None) -> dict:
        """The task's result: the worker's answer, or "crashed" / "timeout"."""
        env = self._environment(task)
        backend = task["target"].partition(":")[0]
        if (self.process is None or self.process.poll() is not None or backend != self.backend
                or env != self.environment):
            self._start(task, env)
        log_start = os.path.getsize(self.log_path)
        started = time.perf_counter()
        try:
            self.process.stdin.write((json.dumps(task) + "\n").encode())
            self.process.stdin.flush()
        except OSError:
            pass  # it died already: reading says how
        line = self._read_line(timeout)
        seconds = time.perf_counter() - started
        if line:
            return json.loads(line)
        if line is None:  # no answer in time: the worker is stuck
            self.process.kill()
            self.process.wait()
            status, error = "timeout", f"no result after {timeout:g} s: the worker was killed"
        else:  # its stdout closed: it died (a core dump may still be being written)
            status = "crashed"
            error = f"the worker process {exit_text(self.process.wait())}"
        log = self._log_since(log_start)
        self.close()
        return {"status": status, "report": None, "error": error, "log": log,
                "seconds": seconds}

    def _read_line(self, timeout: float | None) -> bytes | None:
        """One line from the worker; b"" when it died first, None when `timeout` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.process.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if not selector.select(left):
                    continue
                chunk = os.read(stream.fileno(), 1 << 16)
                if not chunk:
                    return b""  # end of file: the worker is gone
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _log_since(self, start: int) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(start)
                return log.read().decode("utf-8", "replace")[-LOG_TAIL:]
        except OSError:
            return ""

    def close(self) -> None:
        """Stop the worker (it exits at the end of its stdin)."""
        if self.process is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process.stdout.close()
        if self.log_path is not None:
            try:
                os.remove(self.log_path)
            except OSError:
                pass
        self.process, self.log_path, self.backend = None, None, None


if __name__ == "__main__":
    main()
