"""Executors: who runs a suite's tasks. Each takes the task list and calls `on_result(task,
result)` as results come in; none decides anything about checking.

- `local` (the default): `jobs` worker processes on this machine, each a `Runner` driven by
  a thread here. A free runner takes the next task of the backend it already imported, else
  of a backend no other runner holds (each framework is imported by as few workers as can
  be), else helps with the backend that has the most tasks left, when they are many.
- `ray`: each task is one Ray task; Ray schedules them over the cluster (or a local Ray
  started here), with `num_cpus` and `memory` per task and `max_retries` when the Ray worker
  process dies (a node lost, the memory monitor). Inside, the task goes to a `Runner` held
  by the Ray worker process, so a framework that segfaults or hangs gives a "crashed" or
  "timeout" result like the local executor, and never kills the Ray worker.
- `inline`: every task in this process, one after another: no isolation, for a debugger.
"""

from __future__ import annotations

import os
import threading

EXECUTORS = ("local", "ray", "inline")
# A runner joins another on a backend only with this many tasks left: a framework import
# costs seconds (TensorFlow 5-30 s on a busy machine), a task usually well under one.
HELP_AFTER = 16


def run_inline(tasks: list, on_result, **_) -> None:
    """Every task in this process (a crash here is a crash of the caller)."""
    from unigraph.checking.worker import run_task

    for task in tasks:
        on_result(task, run_task(task))


def run_local(tasks: list, on_result, jobs: int | None = None, timeout: float | None = 600.0,
              threads: int = 1, **_) -> None:
    """`jobs` worker processes (default: the number of cores, at most the task count)."""
    from unigraph.checking.worker import Runner

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks) or 1))
    pending = list(tasks)
    lock = threading.Lock()
    failures: list = []
    bound: dict = {}  # thread name -> the backend its worker has imported

    def take(me):
        """The next task for the runner of thread `me`: one of the backend it has imported,
        else of a backend no other runner holds, else of the one with most tasks left if
        that is enough to pay for importing its framework again (else this runner stops:
        the runners holding those backends finish them)."""
        with lock:
            if not pending:
                return None
            backends = [task["target"].partition(":")[0] for task in pending]
            others = {b for name, b in bound.items() if name != me}
            choice = bound.get(me) if bound.get(me) in backends else next(
                (b for b in backends if b not in others), None)
            if choice is None:
                choice = max(set(backends), key=backends.count)
                if backends.count(choice) < HELP_AFTER:
                    bound.pop(me, None)
                    return None
            bound[me] = choice
            return pending.pop(backends.index(choice))

    def work():
        runner = Runner(threads)
        me = threading.current_thread().name
        try:
            while (task := take(me)) is not None:
                on_result(task, runner.run(task, timeout))
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(error)
            with lock:
                pending.clear()
        finally:
            runner.close()

    workers = [threading.Thread(target=work, name=f"unigraph-check-{i}", daemon=True)
               for i in range(jobs)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]


# -- Ray ---------------------------------------------------------------------------------
_RUNNER = None  # in a Ray worker process: the Runner its tasks share


def ray_task(task: dict, timeout: float | None, threads: int) -> dict:
    """The body of one Ray task (runs in a Ray worker process)."""
    global _RUNNER
    from unigraph.checking.worker import Runner

    if _RUNNER is None or _RUNNER.threads != threads:
        _RUNNER = Runner(threads)
    result = _RUNNER.run(task, timeout)
    result["node"] = os.uname().nodename
    return result


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run_ray(tasks: list, on_result, address: str | None = None, timeout: float | None = 600.0,
            num_cpus: float = 1, memory: int | None = None, max_retries: int = 2,
            working_dir: str | None = None, threads: int = 1, **_) -> None:
    """Each task one Ray task. Joins the running Ray (`ray.init` already called), the
    cluster at `address` or `RAY_ADDRESS`, or starts a local Ray and stops it after."""
    try:
        import ray
    except ImportError:
        from unigraph.checking.suite import SuiteError

        raise SuiteError("the ray executor needs Ray: pip install 'unigraph[ray]'") from None
    started_here = False
    if not ray.is_initialized():
        options = {"address": address or os.environ.get("RAY_ADDRESS") or None}
        if options["address"] is None:
            options["include_dashboard"] = False
        if working_dir:  # shipped to every node; task paths are relative to it
            options["runtime_env"] = {"working_dir": working_dir}
        ray.init(**options, log_to_driver=False)
        started_here = True
    try:
        remote = ray.remote(ray_task).options(
            num_cpus=num_cpus, max_retries=max_retries, retry_exceptions=False,
            **({"memory": int(memory)} if memory else {}))
        refs = {remote.remote(task, timeout, threads): task for task in tasks}
        waiting = list(refs)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as error:  # retries exhausted: still a result
                    first = (str(error).strip().splitlines() or [""])[0]
                    result = {"status": "crashed", "report": None, "seconds": 0.0,
                              "error": f"the Ray task failed after {max_retries} retries: "
                                       f"{type(error).__name__}: {first}",
                              "log": str(error)[-3000:]}
                on_result(refs[ref], result)
    finally:
        if started_here:
            ray.shutdown()


def run(executor: str, tasks: list, on_result, **options) -> None:
    """Run `tasks` with the executor named `executor`."""
    runners = {"local": run_local, "ray": run_ray, "inline": run_inline}
    if executor not in runners:
        raise ValueError(f"unknown executor {executor!r}: use {', '.join(EXECUTORS)}")
    if tasks:
        runners[executor](tasks, on_result, **options)
