"""Worker processes, one per backend: a framework that crashes (a segfault inside Paddle's
graph builder) or hangs on a random program is that target's failure, not the tester's.

The parent process never imports a framework: it generates programs, runs the numpy:eager
reference and sends `(target, source, inputs, grads)` to the worker of the target's
backend, which runs the rendered source there and sends back arrays or the error. A worker
that dies is restarted for the next request; its stderr goes to a log file whose tail
is quoted in the crash report.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import tempfile
import time
from multiprocessing.connection import wait

import numpy as np

from unigraph.config import Target


def execute(target: str, source: str, inputs: list, grads: bool) -> dict:
    """Run a rendered program on `target` in this process: {"outputs", "grads"}, or
    {"error": "unigraph" | "raw", "type", "message", "named"} (named: the message names
    the program's file)."""
    from unigraph.config import use_backend
    from unigraph.errors import UnigraphError
    from unigraph.testing.random_programs.model import call_seeded, forget, load, results

    t = Target.parse(target)
    namespace = load(source)
    seeded = namespace.get("SEEDED")
    try:
        with use_backend(t.backend, t.mode):
            outputs = [np.array(o.numpy(), copy=True)
                       for o in results(call_seeded(namespace["program"], inputs, seeded))]
            gradients = None
            if grads and "grad_program" in namespace:
                gradients = [np.array(g.numpy(), copy=True)
                             for g in call_seeded(namespace["grad_program"], inputs, seeded)]
        return {"outputs": outputs, "grads": gradients}
    except Exception as error:  # noqa: BLE001 (the error is the result)
        return {"error": "unigraph" if isinstance(error, UnigraphError) else "raw",
                "type": type(error).__name__, "message": str(error)[:1000],
                "named": namespace["__file__"] in str(error)}
    finally:
        forget(namespace)


def _serve(conn, log_path: str) -> None:
    import gc

    from unigraph.threads import set_threads

    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)  # framework noise (and a crash's C++ trace, which Paddle prints on
    os.dup2(fd, 2)  # stdout) goes to the log
    # One thread per framework: thousands of programs, each compiled, must not each keep a
    # thread pool (an ONNX Runtime session makes one) while it waits for the collector.
    set_threads(1)
    for served in itertools.count(1):
        request = conn.recv()
        if request is None:
            return
        conn.send(execute(*request))
        if served % 25 == 0:  # programs die in reference cycles (errors, traces): free them
            gc.collect()


class Workers:
    """One worker process per backend, started on first use.

    >>> with Workers() as workers:
    ...     results = workers.run_all(["torch:eager", "paddle:static"], source, inputs, True)
    """

    def __init__(self, timeout: float = 300.0, jobs: int = 2):
        self.timeout = timeout
        self.jobs = max(1, jobs)
        self.context = multiprocessing.get_context("spawn")
        self.log_dir = tempfile.mkdtemp(prefix="unigraph-random-programs-")
        self.processes: dict = {}  # backend -> (process, connection)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _log(self, backend: str) -> str:
        return os.path.join(self.log_dir, f"{backend}.log")

    def _connection(self, backend: str):
        if backend not in self.processes:
            parent, child = self.context.Pipe()
            process = self.context.Process(target=_serve, args=(child, self._log(backend)),
                                           daemon=True, name=f"unigraph-{backend}")
            process.start()
            child.close()
            self.processes[backend] = (process, parent)
        return self.processes[backend][1]

    def _lost(self, backend: str, why: str) -> dict:
        process, conn = self.processes.pop(backend)
        if process.is_alive():
            process.kill()
        process.join()
        conn.close()
        code = process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        try:
            with open(self._log(backend), errors="replace") as log:
                tail = " | ".join(line.strip() for line in log.read()[-600:].splitlines()
                                  if line.strip())
        except OSError:
            tail = ""
        if why == "timeout":
            how = f"no answer in {self.timeout:g} s"
        return {"error": why, "type": how, "message": f"the worker's log ends: {tail}",
                "named": False}

    def run_all(self, targets, source: str, inputs: list, grads: bool) -> dict:
        """{target: result of `execute`} for each target, backends in parallel (at most
        `jobs` at a time), each backend's targets one after another."""
        queues: dict = {}
        for target in targets:
            queues.setdefault(Target.parse(target).backend, []).append(target)
        results, running = {}, {}  # running: connection -> (backend, target, started)
        while queues or running:
            busy = {backend for backend, _, _ in running.values()}
            idle = [backend for backend in queues if backend not in busy]
            while idle and len(running) < self.jobs:
                backend = idle.pop(0)
                target = queues[backend].pop(0)
                if not queues[backend]:
                    del queues[backend]
                conn = self._connection(backend)
                conn.send((target, source, inputs, grads))
                running[conn] = (backend, target, time.monotonic())
            ready = wait(list(running), timeout=1.0)
            for conn in ready:
                backend, target, _ = running.pop(conn)
                try:
                    results[target] = conn.recv()
                except (EOFError, OSError):
                    results[target] = self._lost(backend, "crash")
            for conn, (backend, target, started) in list(running.items()):
                if time.monotonic() - started > self.timeout:
                    del running[conn]
                    results[target] = self._lost(backend, "timeout")
        return results

    def close(self) -> None:
        for process, conn in self.processes.values():
            try:
                conn.send(None)
            except OSError:
                pass
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        self.processes.clear()
