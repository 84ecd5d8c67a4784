"""Whether an op being lowered may be differentiated: the custom gradients some lowerings
need (`tf.custom_gradient`, about ten times the cost of an eager op) are built only then.

In a graph (a v1 Graph or a tf.function trace) any op may be differentiated later. Eagerly,
only ops run under unigraph's own GradientTape (`TensorFlowBackend.eager_grad`) are.

    with differentiating():
        ...                       # eager ops here build their custom gradients

A graph's `grad` nodes lower their function inside `differentiating()` too, so a lowering can
tell the ops a gradient goes through from forward-only ones (`inside_gradient`).
"""

from __future__ import annotations

import contextlib
import threading

import tensorflow as tf

_state = threading.local()  # GradientTape is per thread too


@contextlib.contextmanager
def differentiating():
    """Mark the eager ops run inside as recorded by a GradientTape (nesting allowed)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def inside_gradient() -> bool:
    """True while lowering ops that a gradient is taken of: under unigraph's eager tape, or in
    the function of a graph's `grad` node (`control_flow.py` marks both)."""
    return getattr(_state, "depth", 0) > 0


def may_be_differentiated() -> bool:
    """True in a graph, and eagerly inside `differentiating()`."""
    return getattr(_state, "depth", 0) > 0 or not tf.executing_eagerly()
