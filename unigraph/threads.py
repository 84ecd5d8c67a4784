"""One setting for the thread pools of every framework: `ug.set_threads(n)`.

Each framework sizes its CPU thread pools on its own, usually to the number of cores; on a
busy or shared machine that oversubscribes the cores (issue 19 measured a small CNN step on
torch at 21 ms with torch's default threads and 2.5 ms with one thread). `set_threads(n)`
sets, for every framework already imported, and through the environment variables that
frameworks imported later read when they load:

- torch: `torch.set_num_threads(n)` (intra-op) and, while torch still allows it,
  `torch.set_num_interop_threads(n)`;
- TensorFlow: `tf.config.threading` intra- and inter-op parallelism, which also sizes the
  `tf.compat.v1.Session`s of tensorflow:static. TensorFlow fixes its pools when it runs its
  first op: after that a different `n` raises ThreadsError (call `set_threads` first);
- Paddle: `paddle.base.core.set_num_threads(n)` (its OpenMP/MKL pool);
- NumPy's BLAS (and any other OpenMP/BLAS library loaded): through `threadpoolctl` when it
  is installed, else only through the environment variables (`OMP_NUM_THREADS`,
  `OPENBLAS_NUM_THREADS`, `MKL_NUM_THREADS`), which a BLAS already loaded does not reread.

The same from configuration: `UNIGRAPH_THREADS=n` in the environment, or `threads = n` in
`[tool.unigraph]` (see `unigraph.config`), applied when the first target is chosen. Without
either, every framework keeps its own default. `get_threads()` reads the settings back.

>>> ug.set_threads(1)
>>> ug.get_threads()
{'torch': 1, 'tensorflow': 1, 'paddle': 1, 'numpy': 1}
"""

from __future__ import annotations

import os
import sys

from unigraph.errors import ConfigError

__all__ = ["ThreadsError", "get_threads", "set_threads"]

# Read by OpenMP, OpenBLAS, MKL and TensorFlow when they load.
ENVIRONMENT = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

_requested: int | None = None  # the last set_threads(n) (or the configured value)
_configured_applied = False


class ThreadsError(ConfigError):
    """A thread count that cannot be applied (a framework fixed its pools already)."""


def _checked_count(n, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{where}: the number of threads must be a positive integer, got "
                         f"{n!r}; e.g. ug.set_threads(1) on a shared or busy machine, or "
                         f"ug.set_threads(os.cpu_count())")
    return n


def set_threads(n: int) -> None:
    """Use `n` threads in every framework's CPU pools (intra-op, and inter-op where the
    framework still allows it), now and for frameworks imported later. See the module
    docstring for what each framework gets; TensorFlow refuses a change after its first op.

    >>> ug.set_threads(1)          # one thread everywhere: best on a busy 2-core machine
    """
    n = _checked_count(n, "ug.set_threads")
    global _requested
    for variable in ENVIRONMENT:
        os.environ[variable] = str(n)
    _set_tensorflow(n)  # first: the one that can refuse, before anything else changed
    _set_torch(n)
    _set_paddle(n)
    _set_blas(n)
    _requested = n


def _set_torch(n: int) -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() != n:
        try:
            torch.set_num_interop_threads(n)
        except RuntimeError:  # torch allows it once, before inter-op work; unigraph uses none
            pass


def _set_tensorflow(n: int) -> None:
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "config"):
        return
    threading = tf.config.threading
    if (threading.get_intra_op_parallelism_threads(),
            threading.get_inter_op_parallelism_threads()) == (n, n):
        return
    try:
        threading.set_intra_op_parallelism_threads(n)
        threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:
        intra = threading.get_intra_op_parallelism_threads() or "its default"
        inter = threading.get_inter_op_parallelism_threads() or "its default"
        raise ThreadsError(
            f"ug.set_threads({n}): TensorFlow has already run an op, and it fixes its thread "
            f"pools then (now intra-op {intra}, inter-op {inter}). "
            "Call ug.set_threads before the first TensorFlow op, or set UNIGRAPH_THREADS "
            "(or `threads` in [tool.unigraph]) before starting Python"
        ) from None


def _set_paddle(n: int) -> None:
    if "paddle" in sys.modules:
        from paddle.base import core

        core.set_num_threads(n)


def _set_blas(n: int) -> None:
    try:
        import threadpoolctl
    except ImportError:  # only the environment variables, for libraries loaded later
        return
    threadpoolctl.threadpool_limits(limits=n)


def get_threads() -> dict:
    """The threads each imported framework uses now, read back from it: {"torch": intra-op
    threads, "tensorflow": intra-op threads (0: TF's default), "paddle": its OpenMP pool,
    "numpy": its BLAS pool}; a framework not imported yet (or, for Paddle and NumPy, without
    threadpoolctl) is missing.

    >>> ug.set_threads(2); ug.get_threads()["torch"]
    2
    """
    found = {}
    if "torch" in sys.modules:
        found["torch"] = sys.modules["torch"].get_num_threads()
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "config"):
        # 0: TF's runtime falls back to TF_NUM_INTRAOP_THREADS, then to all cores.
        found["tensorflow"] = (tf.config.threading.get_intra_op_parallelism_threads()
                               or int(os.environ.get("TF_NUM_INTRAOP_THREADS") or 0))
    try:
        import threadpoolctl
    except ImportError:
        return found
    for library in threadpoolctl.threadpool_info():
        path = library.get("filepath", "")
        if "paddle" in path and "paddle" in sys.modules:
            found.setdefault("paddle", library["num_threads"])
        elif "numpy" in path and library.get("user_api") == "blas":
            found.setdefault("numpy", library["num_threads"])
    return found


def framework_loaded(module: str) -> None:
    """Apply the requested count to framework `module` just imported (a backend's `load`
    calls this): TensorFlow's getters do not read its environment variables, and torch's
    inter-op pool is sized only through its API."""
    from unigraph import tuning

    tuning.framework_loaded(module)  # flush_denormal / tuned, set next to the threads
    if _requested is None:
        return
    setter = {"torch": _set_torch, "tensorflow": _set_tensorflow,
              "paddle": _set_paddle}.get(module)
    if setter is not None:
        setter(_requested)


def requested() -> int | None:
    """The count last given to `set_threads` (or configured), None if never set."""
    return _requested


def apply_configured() -> None:
    """Apply `UNIGRAPH_THREADS` or the config file's `threads`, once (a no-op without
    either). Called when the first target is chosen, before any framework is imported."""
    global _configured_applied
    if _configured_applied:
        return
    _configured_applied = True
    from unigraph import config, tuning

    tuning.apply_configured()  # flush_denormal and tuned: also before any framework loads
    n = config.threads()
    if n is not None and _requested is None:
        set_threads(n)
