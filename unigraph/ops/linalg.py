"""Linear algebra: matmul."""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import (
    ACCUMULATING_TOLERANCE,
    broadcast_shapes,
    dims_conflict,
    fmt,
    grad_for,
    normal,
    require_float,
    require_same_dtype,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _infer(a, b):
    for what, spec in (("a", a), ("b", b)):
        require_float("matmul", what, spec)
        if len(spec.shape) < 2:
            raise ShapeError(
                f"matmul: {what} is {fmt(spec)}, but matmul needs rank >= 2 "
                f"(use expand_dims to make a vector a [1, n] or [n, 1] matrix)"
            )
    dtype = require_same_dtype("matmul", {"a": a, "b": b})
    if dims_conflict(a.shape[-1], b.shape[-2]):
        raise ShapeError(
            f"matmul: inner dimensions differ: a is {fmt(a)}, b is {fmt(b)} "
            "(a.shape[-1] must equal b.shape[-2])"
        )
    batch = broadcast_shapes(
        "matmul (batch dims)",
        {"a": TensorSpec(a.shape[:-2], dtype), "b": TensorSpec(b.shape[:-2], dtype)},
    )
    return TensorSpec(batch + (a.shape[-2], b.shape[-1]), dtype)


def _vjp(g, inputs, out, needs=(True, True)):
    a, b = inputs
    # grad_for sums over the batch dims that broadcasting stretched.
    return [grad_for(g @ np.swapaxes(b, -1, -2), a) if needs[0] else None,
            grad_for(np.swapaxes(a, -1, -2) @ g, b) if needs[1] else None]


def _samples(rng):
    return [
        Sample((normal(rng, (3, 4)), normal(rng, (4, 5)))),
        Sample((normal(rng, (2, 3, 4)), normal(rng, (4, 2)))),
        Sample((normal(rng, (2, 1, 3, 4)), normal(rng, (3, 4, 2)))),
    ]


register(OpDef(
    name="matmul",
    infer=_infer,
    reference=lambda a, b: np.matmul(a, b).astype(a.dtype, copy=False),
    vjp=_vjp,
    partial_vjp=True,
    doc="Matrix product over the last two dims, a[..., m, k] @ b[..., k, n] -> [..., m, n]; "
        "the batch dims broadcast. Both operands must have rank >= 2 (unlike NumPy, no "
        "implicit vector promotion) and one floating dtype.",
    example="ug.matmul([[1.0, 2.0]], [[3.0], [4.0]])  # [[11.0]]",
    samples=_samples,
    tolerance=ACCUMULATING_TOLERANCE,  # each output sums k products
))
