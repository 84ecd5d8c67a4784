"""TensorFlow kernels that refuse high ranks, and the lowerings' routes around them.

Every other target runs these; TF 2.21's CPU kernels refuse them, eagerly and in graphs, with
TF's own error (quirks in `quirks.py`):

* Softmax (oneDNN's, every float dtype but float64) takes ranks 1 to 5: "Input dims must
  be <= 5 and >=1".
* A broadcasting binary op (AddV2, Mul, Maximum, Equal, Less ...) and BroadcastTo take at
  most 5 dims once adjacent dims that broadcast alike are merged (`merged_dims`):
  [2, 1, 2, 1, 2, 1] + [1, 3, 1, 3, 1, 3] is "not supported yet". So does TF's own gradient
  of the reductions, which broadcasts the result back: Max's, Min's and Prod's, and eagerly
  Sum's and Mean's (a BroadcastTo; a graph of static shapes tiles, which takes any rank).
* ArgMax takes at most 7 dims.

The routes compute the same values: they only reshape and copy. A softmax or an argmax runs
on a 2-D or 3-D view of its operand (the reduced axis kept, the others merged); operands
that TF would refuse to broadcast are broadcast first, one axis at a time, each step a 3-D
BroadcastTo (`broadcast_in_steps`); a reduction keeps its op and gets a gradient with the
same formula as TF's that broadcasts in steps. Each route is taken only where TF's kernel
would refuse, so every program TF ran before runs the same graph.

This module imports tensorflow: `lowerings.py` imports it, after paddle.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from unigraph_tensorflow.int_operands import int_operand
from unigraph_tensorflow.taping import may_be_differentiated

raw = tf.raw_ops

MAX_SOFTMAX_RANK = 5  # oneDNN's Softmax
MAX_BROADCAST_DIMS = 5  # BinaryOp and BroadcastTo kernels, after merging (BCast)
MAX_ARGMAX_RANK = 7


def merged_dims(*shapes) -> int:
    """How many dims TF's BCast leaves when broadcasting operands of `shapes` (static): dims
    of size 1 in every operand drop out, and adjacent dims where the same operands are of
    size 1 merge into one.

    >>> merged_dims((2, 1, 2, 1, 2, 1), (1, 3, 1, 3, 1, 3))
    6
    >>> merged_dims((2, 3, 4, 5, 6, 7), (1, 1, 1, 5, 6, 7))
    2
    """
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    count, previous = 0, None
    for dims in zip(*padded):
        ones = tuple(d == 1 for d in dims)
        if all(ones):
            continue
        if ones != previous:
            count += 1
            previous = ones
    return count


def _static(shape) -> tuple | None:
    """A TensorShape as a tuple of ints; None when its rank or a dim is unknown."""
    if shape.rank is None or not shape.is_fully_defined():
        return None
    return tuple(shape.as_list())


def broadcast_in_steps(x, shape):
    """`x` broadcast to the static `shape`, one axis at a time: each step views `x` as
    [before, 1, after] and broadcasts that to [before, n, after], which TF takes at any
    rank. The values are those of a single broadcast (copies)."""
    shape = tuple(shape)
    current = [1] * (len(shape) - x.shape.rank) + list(_static(x.shape))
    for axis, size in enumerate(shape):
        if current[axis] == size:
            continue
        before, after = math.prod(current[:axis]), math.prod(current[axis + 1:])
        x = raw.BroadcastTo(input=raw.Reshape(tensor=x, shape=int_operand((before, 1, after))),
                            shape=int_operand((before, size, after)))
        current[axis] = size
    return raw.Reshape(tensor=x, shape=int_operand(shape))


def too_wide(operands) -> bool:
    """Whether TF would refuse to broadcast `operands` (all of static shape)."""
    shapes = [_static(x.shape) for x in operands]
    if any(s is None for s in shapes) or max(len(s) for s in shapes) <= MAX_BROADCAST_DIMS:
        return False
    return merged_dims(*shapes) > MAX_BROADCAST_DIMS


def broadcast_operands(operands) -> list:
    """`operands` broadcast to their common shape, each in steps (those of that shape as
    they are)."""
    shape = np.broadcast_shapes(*(_static(x.shape) for x in operands))
    return [x if _static(x.shape) == shape else broadcast_in_steps(x, shape) for x in operands]


def graph_broadcasting(lowering):
    """An elementwise lowering, for graphs: operands TF would refuse to broadcast (known at
    build time from their static shapes) are broadcast in steps first."""

    def wide(*operands):
        if too_wide(operands):
            operands = broadcast_operands(operands)
        return lowering(*operands)

    return wide


def eager_broadcasting(lowering):
    """An elementwise lowering, eagerly: TF's kernel is tried first (no shape is looked at on
    the hot path); when it refuses the broadcast, the operands are broadcast in steps."""

    def wide(*operands):
        try:
            return lowering(*operands)
        except tf.errors.UnimplementedError:
            if not too_wide(operands):
                raise
        return lowering(*broadcast_operands(operands))

    return wide


def broadcast_to(x, shape):
    """tf.broadcast_to, in steps where TF's BroadcastTo would refuse `shape`."""
    if len(shape) > MAX_BROADCAST_DIMS:
        source = _static(x.shape)
        if source is not None and merged_dims(source, shape) > MAX_BROADCAST_DIMS:
            return broadcast_in_steps(x, shape)
    return tf.broadcast_to(x, shape)


def on_a_view(fn, x, axis: int):
    """fn(view, 1) on `x` viewed as [before, n] (`axis` last) or [before, n, after], its
    result reshaped back: to `x`'s shape (softmax), or to it without `axis` (argmax). `x`
    of unknown shape goes to fn(x, axis) as it is."""
    dims = _static(x.shape)
    if dims is None:
        return fn(x, axis)
    before, after = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
    view = (before, dims[axis]) if axis == len(dims) - 1 else (before, dims[axis], after)
    out = fn(raw.Reshape(tensor=x, shape=int_operand(view)), 1)
    shape = dims if out.shape.rank == len(view) else dims[:axis] + dims[axis + 1:]
    return raw.Reshape(tensor=out, shape=int_operand(shape))


def reduction(native, x, axis: tuple, keepdims: bool):
    """native(input=x, axis=axis, keep_dims=keepdims), with TF's gradient of Max, Min and
    Prod (and, eagerly, of Sum and Mean) rebuilt to broadcast in steps where TF's own would be
    refused: an operand that may be differentiated, of rank > 5, with more than 5 merged
    dims between the result and `x`. Elsewhere, and always for the values, the op itself."""
    source = _static(x.shape)
    routed = _GRADIENTS if tf.executing_eagerly() else _GRAPH_GRADIENTS
    if source is None or native not in routed or not may_be_differentiated():
        return native(input=x, axis=int_operand(axis), keep_dims=keepdims)
    axes = {a % len(source) for a in axis}
    kept = tuple(1 if i in axes else d for i, d in enumerate(source))
    if merged_dims(kept, source) <= MAX_BROADCAST_DIMS:
        return native(input=x, axis=int_operand(axis), keep_dims=keepdims)
    gradient = _GRADIENTS[native]

    @tf.custom_gradient
    def reduce(x):
        # The gradient reads a copy made here: inside a tf.cond branch `x` may be a tensor of
        # the enclosing graph, which the branch's gradient cannot take in (as in tie_split).
        x = raw.Identity(input=x)
        y = native(input=x, axis=int_operand(axis), keep_dims=keepdims)
        return y, lambda g: gradient(x, raw.Reshape(tensor=y, shape=int_operand(kept)),
                                     raw.Reshape(tensor=g, shape=int_operand(kept)), axis)

    return reduce(x)


def _sum_gradient(x, y, g, axis):
    return broadcast_in_steps(g, _static(x.shape))


def _mean_gradient(x, y, g, axis):
    # TF's _MeanGrad: Sum's gradient divided by the number of elements each result averages.
    factor = max(x.shape.num_elements(), 0) // max(y.shape.num_elements(), 1)
    return broadcast_in_steps(g, _static(x.shape)) / tf.constant(factor, g.dtype)


def _min_or_max_gradient(x, y, g, axis):
    # TF's _MinOrMaxGrad: the gradient split evenly between the elements equal to the result.
    shape = _static(x.shape)
    indicators = tf.cast(tf.equal(broadcast_in_steps(y, shape), x), g.dtype)
    selected = raw.Reshape(tensor=tf.reduce_sum(indicators, axis), shape=_static(y.shape))
    return (indicators / broadcast_in_steps(selected, shape)) * broadcast_in_steps(g, shape)


def _prod_gradient(x, y, g, axis):
    # TF's _ProdGrad: the product of the others as two exclusive cumprods over the reduced
    # axes moved first and merged.
    shape = _static(x.shape)
    rank = len(shape)
    reduced = [(a + rank) % rank for a in axis]
    perm = reduced + [a for a in range(rank) if a not in reduced]
    permuted = tf.transpose(x, perm)
    reduced_num = math.prod(shape[a] for a in reduced)
    flat = tf.reshape(permuted, (reduced_num, math.prod(shape) // max(reduced_num, 1)))
    left = tf.math.cumprod(flat, axis=0, exclusive=True)
    right = tf.math.cumprod(flat, axis=0, exclusive=True, reverse=True)
    others = tf.reshape(left * right, permuted.shape)
    out = broadcast_in_steps(g, shape) * tf.transpose(others, np.argsort(perm))
    return tf.reshape(out, shape)


_GRAPH_GRADIENTS = {raw.Max: _min_or_max_gradient, raw.Min: _min_or_max_gradient,
                    raw.Prod: _prod_gradient}
_GRADIENTS = {**_GRAPH_GRADIENTS, raw.Sum: _sum_gradient, raw.Mean: _mean_gradient}
