"""Speed settings beyond the frameworks' defaults (issue 19 items 2 and 8), both off by
default: flushing subnormal floats to zero, and a tuned mode.

**`ug.set_flush_denormal(True)`** (or `UNIGRAPH_FLUSH_DENORMAL=1`, or `flush_denormal = true`
in `[tool.unigraph]`): arithmetic on subnormal floats (below 1.2e-38 in float32) runs
4-50x slower on x86 CPUs; a saturated softmax makes many of them. Flushing treats them as
zero, which moves a result by less than the smallest normal float. (Measured, one thread:
unigraph's saturated softmax-regression step on torch:eager 4.6 -> 1.1 ms, torch:static
5.0 -> 0.8 ms; the same step with normal floats and an MLP step unchanged.) Per framework:

- torch: `torch.set_flush_denormal(True)`, which sets the FTZ/DAZ bits of the calling
  thread's CPU (threads torch starts later inherit them). Those bits belong to the thread,
  not to torch: NumPy and Paddle ops run in that thread flush too while it is on;
- TensorFlow: flushes subnormals in its own kernels always (eager, `tf.function` and
  Session runs; it has no switch to keep them), so the option changes nothing there;
- Paddle (3.3.1): no switch of its own (only Paddle Inference flushes); its dygraph ops
  and unigraph's static Programs run on the calling thread, so torch's bits apply;
- NumPy: no switch (NumPy keeps IEEE subnormals).

**`ug.set_tuned(True)`** (or `UNIGRAPH_TUNED=1`, or `tuned = true`): what a framework leaves
off on some CPUs and that keeps results within the reference tolerance:

- TensorFlow: oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`), which TensorFlow enables by itself only on
  CPUs with AVX-512. TensorFlow reads it once, when it is imported: asking after that, with
  oneDNN off, raises TuningError (set it before the first TensorFlow target, or use the
  environment variable or the config key);
- torch: nothing: its oneDNN (`torch.backends.mkldnn`) is on by default;
- Paddle, NumPy: nothing. Paddle 3.3.1's oneDNN flag (`FLAGS_use_mkldnn`) makes a static
  Program's run fail (a bare `std::exception`) and showed no steady gain in dygraph.

`get_flush_denormal()` and `get_tuned()` read the settings back from each imported framework.

>>> ug.set_flush_denormal(True)
>>> ug.get_flush_denormal()["torch"]         # with torch imported
True
"""

from __future__ import annotations

import os
import sys

from unigraph.errors import ConfigError

__all__ = ["TuningError", "get_flush_denormal", "get_tuned", "set_flush_denormal",
           "set_tuned"]

_flush: bool | None = None  # the last set_flush_denormal (or configured value); None: never
_tuned: bool | None = None
TF_ONEDNN = "TF_ENABLE_ONEDNN_OPTS"


class TuningError(ConfigError):
    """A tuning setting that cannot be applied any more (a framework read it already)."""


def _checked_flag(on, where: str) -> bool:
    if not isinstance(on, bool):
        raise ValueError(f"{where}: expected True or False, got {on!r}; e.g. {where}(True)")
    return on


# -- flushing subnormals ----------------------------------------------------------------------
def set_flush_denormal(on: bool) -> None:
    """Flush subnormal floats to zero (True) or keep them (False, every framework's default)
    in every framework that has the switch, now and for frameworks imported later. See the
    module docstring for what each framework does; results stay within the reference
    tolerance (a flushed value is below 1.2e-38).

    >>> ug.set_flush_denormal(True)     # a saturated softmax: 4-6x faster steps on torch
    """
    global _flush
    _flush = _checked_flag(on, "ug.set_flush_denormal")
    _flush_torch(_flush)


def _flush_torch(on: bool) -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_flush_denormal(on)


def get_flush_denormal() -> dict:
    """Whether each imported framework flushes subnormals in this thread, read back by
    computing 1e-40 * 1 in it: {"torch": ..., "tensorflow": ...}; Paddle and NumPy have no
    switch of their own and are missing. (That TensorFlow op fixes TensorFlow's thread
    pools, as any first op does: call `ug.set_threads` before.)

    >>> ug.get_flush_denormal()
    {'torch': False, 'tensorflow': True}
    """
    found = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        tiny = torch.tensor(1e-40, dtype=torch.float32)
        found["torch"] = bool((tiny * 1.0).item() == 0.0)
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "constant"):
        tiny = tf.constant(1e-40, dtype=tf.float32)
        found["tensorflow"] = bool(float(tiny * 1.0) == 0.0)
    return found


# -- tuned mode -------------------------------------------------------------------------------
def set_tuned(on: bool) -> None:
    """Turn on (True) or off (False, the default) the speed settings a framework leaves off
    on some CPUs (module docstring): TensorFlow's oneDNN, which must be decided before
    TensorFlow is imported.

    >>> ug.set_tuned(True)              # before the first TensorFlow target
    """
    on = _checked_flag(on, "ug.set_tuned")
    global _tuned
    _tune_tensorflow(on)
    _tuned = on


def _tensorflow_onednn() -> bool | None:
    """Whether the imported TensorFlow runs oneDNN (None: TensorFlow not imported)."""
    if not hasattr(sys.modules.get("tensorflow"), "constant"):
        return None
    try:  # TensorFlow's own check (its tests use it); private, so guarded
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def _tune_tensorflow(on: bool) -> None:
    running = _tensorflow_onednn()
    if running is None:
        if on:
            os.environ[TF_ONEDNN] = "1"
        elif os.environ.get(TF_ONEDNN) == "1" and _tuned:
            del os.environ[TF_ONEDNN]  # ours: back to TensorFlow's own choice
        return
    if on and not running:
        raise TuningError(
            "ug.set_tuned(True): TensorFlow is already imported with oneDNN off, and it reads "
            f"{TF_ONEDNN} only when it is imported. Call ug.set_tuned(True) before the first "
            "TensorFlow target, or set UNIGRAPH_TUNED=1 (or `tuned = true` in "
            "[tool.unigraph]) before starting Python"
        )


def get_tuned() -> dict:
    """The tuned settings of each imported framework, read back from it:
    {"tensorflow": oneDNN on, "torch": torch.backends.mkldnn}.

    >>> ug.get_tuned()
    {'tensorflow': True, 'torch': True}
    """
    found = {}
    running = _tensorflow_onednn()
    if running is not None:
        found["tensorflow"] = running
    torch = sys.modules.get("torch")
    if torch is not None:
        found["torch"] = bool(torch.backends.mkldnn.enabled)
    return found


# -- configuration and framework loading ------------------------------------------------------
def framework_loaded(module: str) -> None:
    """Apply the requested settings to framework `module` just imported (called with the
    thread settings when a backend imports its framework)."""
    if module == "torch" and _flush is not None:
        _flush_torch(_flush)


def apply_configured() -> None:
    """Apply `UNIGRAPH_FLUSH_DENORMAL` / `UNIGRAPH_TUNED` or the config file's
    `flush_denormal` / `tuned` (a no-op without them). Called when the first target
    is chosen (by `threads.apply_configured`, once), before any framework is imported."""
    from unigraph import config

    flush = config.flush_denormal()
    if flush is not None and _flush is None:
        set_flush_denormal(flush)
    tuned = config.tuned()
    if tuned is not None and _tuned is None:
        set_tuned(tuned)
