"""Paddle kernels that fail at high ranks, and the lowerings' routes around them.

Every other target runs these; paddlepaddle 3.3.1 refuses or miscomputes them, eagerly and
in a Program (quirks in `quirks.py`):

* The backward of max and min (`max_grad`, `min_grad`; amax and amin too) over more than
  one axis but not all of them is wrong on a tensor of rank 5 or 6: it reads garbage
  (`paddle.max(x, axis=[0, 2, 4]).backward()` on a [2, 3, 2, 3, 2] x; adjacent axes too,
  keepdim or not). The forward is right, and so are ranks 1-4 and 7-8, one axis, all axes,
  and the gradients of sum, mean and prod.
* argmax takes at most 6 dims ("argmax operator doesn't supports tensors whose ranks are
  greater than 6").
* strided_slice takes a tensor of at most 6 dims ("The dimension of StridedSlice
  operator's input should be less than 7").

The routes compute the same values: they only transpose, reshape and copy. A max or min in
the faulty case reduces a 2-D view, [kept, reduced] (the reduced axes moved last); an argmax
runs on a 3-D (or 2-D) view of its operand, the reduced axis kept, the others merged; a
strided slice is taken one axis at a time, each step a slice of the middle axis of a 3-D
view. Each route is taken only where Paddle would fail or be wrong, so every program Paddle
ran right before runs the same ops. Shapes not all known when a Program is built (a -1 dim)
go to Paddle as they are, except a max or min, which then reduces a [kept..., reduced] view
(the kept dims as they come, the reduced ones merged), and an argmax, whose view reads the
open dims at run time (paddle.shape), as does a strided slice's.

This module imports paddle: `lowerings.py` imports it.
"""

from __future__ import annotations

import math

import paddle

from unigraph.backend import dims_product
from unigraph.ops.indexing import TO_END

WRONG_MAX_GRAD_RANKS = (5, 6)  # max_grad/min_grad over some (not all) of several axes
MAX_ARGMAX_RANK = 6
MAX_STRIDED_SLICE_RANK = 6


def _known(x) -> tuple | None:
    """x's shape as a tuple of ints; None when a dim is unknown (-1 in a Program)."""
    dims = tuple(x.shape)
    return None if any(d < 0 for d in dims) else dims


def max_or_min(native, x, axis, keepdims: bool):
    """native(x, axis=axis, keepdim=keepdims) (paddle.max or paddle.min), on a 2-D view
    [kept, reduced] where Paddle's backward is wrong: rank 5 or 6, several axes, not all.

    >>> max_or_min(paddle.max, x, [0, 2, 4], False)  # x of shape [2, 3, 2, 3, 2]: shape [3, 3]
    """
    if axis is None or len(axis) < 2:  # (no shape read on the common path)
        return native(x, axis=axis, keepdim=keepdims)
    rank = len(x.shape)
    if rank not in WRONG_MAX_GRAD_RANKS or len(axis) == rank:
        return native(x, axis=axis, keepdim=keepdims)
    dims = _known(x)
    reduced = sorted(a % rank for a in axis)
    kept = [a for a in range(rank) if a not in reduced]
    if dims is None:  # a dim unknown until the run (input_spec None): [kept..., reduced]
        # (reshape's 0 copies the input's dim there, -1 merges the reduced axes)
        view = paddle.reshape(paddle.transpose(x, kept + reduced), [0] * len(kept) + [-1])
        out = native(view, axis=-1, keepdim=False)
        return paddle.unsqueeze(out, reduced) if keepdims else out
    view = paddle.reshape(paddle.transpose(x, kept + reduced),
                          [math.prod(dims[a] for a in kept), math.prod(dims[a] for a in reduced)])
    out = native(view, axis=1, keepdim=False)
    shape = [1 if a in reduced else d for a, d in enumerate(dims)] if keepdims else [
        dims[a] for a in kept]
    return paddle.reshape(out, shape)


def on_a_view(fn, x, axis: int, keepdims: bool):
    """fn(view, 1) where `x` has more dims than Paddle's argmax takes: `x` viewed as
    [before, n] (`axis` last) or [before, n, after], the result reshaped back to `x`'s shape
    without `axis` (with a 1 there when `keepdims`). Elsewhere fn(x, axis).

    >>> on_a_view(argmax_of, x, 3, False)  # x of rank 7: argmax_of on a [12, 3, 12] view
    """
    if len(x.shape) <= MAX_ARGMAX_RANK:
        return fn(x, axis)
    dims = dims_of(x)
    before, after = dims_product(dims[:axis]), dims_product(dims[axis + 1:])
    view = [before, dims[axis]] if axis == len(dims) - 1 else [before, dims[axis], after]
    out = fn(paddle.reshape(x, view), 1)
    shape = list(dims[:axis]) + ([1] if keepdims else []) + list(dims[axis + 1:])
    return paddle.reshape(out, shape)


def dims_of(x) -> list:
    """x's dims: ints, and for a dim unknown until the run (-1 in a Program) that element of
    paddle.shape(x)."""
    dims = tuple(x.shape)
    if all(d >= 0 for d in dims):
        return list(dims)
    shape = paddle.shape(x)
    return [d if d >= 0 else shape[i] for i, d in enumerate(dims)]


def strided_slice(x, begin, end, stride):
    """paddle.strided_slice of every axis of `x` (begin, end, stride: one per dim, resolved
    and clamped, positive strides; on a dim input_spec leaves open, as Python's when the
    program runs), one axis at a time on 3-D views where `x` has more dims than Paddle's
    StridedSlice takes; axes taken whole are skipped. An open dim is read when the program
    runs (paddle.shape), and so is its sliced size.

    >>> strided_slice(x, (1,) * 7, (2,) * 7, (1,) * 7)  # x of rank 7: 7 slices of 3-D views
    """
    if len(begin) <= MAX_STRIDED_SLICE_RANK:
        axes = list(range(len(begin)))
        return paddle.strided_slice(x, axes, list(begin), list(end), list(stride))
    current = dims_of(x)
    for axis, (b, e, s) in enumerate(zip(begin, end, stride, strict=True)):
        size = current[axis]
        if b == 0 and e >= (size if isinstance(size, int) else TO_END) and s == 1:
            continue  # the whole axis
        before, after = dims_product(current[:axis]), dims_product(current[axis + 1:])
        x = paddle.strided_slice(paddle.reshape(x, [before, size, after]), [1], [b], [e], [s])
        current[axis] = len(range(b, e, s)) if isinstance(size, int) else paddle.shape(x)[1]
    return paddle.reshape(x, current)
