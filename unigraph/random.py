"""unigraph's one random generator, so every backend sees the same numbers.

Initial weights and dropout masks are drawn here, in NumPy, never by a framework. In a
static graph a random tensor is a graph input that each run feeds with fresh draws, so a
compiled graph does not freeze one mask.
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import check_dtype

_seed = 0
_generator = None  # made on first use: numpy.random costs import time


def manual_seed(seed: int) -> None:
    """Reseed the generator: the same seed gives the same weights and masks everywhere."""
    global _generator, _seed
    _seed, _generator = seed, None


def generator() -> np.random.Generator:
    global _generator
    if _generator is None:
        _generator = np.random.default_rng(_seed)
    return _generator


def uniform(shape, dtype="float32"):
    """A tensor of uniform [0, 1) draws from unigraph's generator (fresh on every run)."""
    from unigraph.dispatch import symbolic
    from unigraph.tensor import tensor
    from unigraph.tracing import current_builder

    shape = tuple(int(d) for d in shape)
    dtype = check_dtype(dtype)
    builder = current_builder()
    if builder is None:
        return tensor(generator().random(shape).astype(dtype))
    top = builder
    while top.parent is not None:
        top = top.parent
    value = top.add_random_input(shape, dtype)
    tensor_in_top = symbolic(top, value)
    if builder is top:
        return tensor_in_top
    return symbolic(builder, builder.value_of_symbolic(tensor_in_top))
