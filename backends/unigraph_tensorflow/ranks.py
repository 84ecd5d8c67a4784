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

A graph may hold a dim known only at run time (`input_spec` with None: a tf.shape element
here). The routes then read that dim from the run-time shape, and are taken where TF's kernel
would refuse for some size of it (`most_merged_dims`): a size of 1 can merge dims or drop one.

This module imports tensorflow: `lowerings.py` imports it, after paddle.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

from unigraph.backend import dims_product
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


_MOST_OPEN = 10  # open dims (None) whose sizes most_merged_dims tries, 2 ** 10 cases


def most_merged_dims(*shapes) -> int:
    """`merged_dims` of `shapes` (of known ranks) at its most over every size their open
    dims (None) may take at run time: each 1 or not.

    >>> most_merged_dims((None, 1, 2, 1, 2, 1), (None, 3, 2, 3, 2, 3))
    6
    >>> most_merged_dims((None, 1, 1, 3, 2, 3), (None, 3, 2, 3, 2, 3))
    3
    """
    open_dims = [(k, i) for k, s in enumerate(shapes) for i, d in enumerate(s) if d is None]
    if not open_dims:
        return merged_dims(*shapes)
    if len(open_dims) > _MOST_OPEN:
        return max(len(s) for s in shapes)  # every dim its own
    most = 0
    for sizes in itertools.product((1, 2), repeat=len(open_dims)):
        filled = [list(s) for s in shapes]
        for (k, i), size in zip(open_dims, sizes):
            filled[k][i] = size
        most = max(most, merged_dims(*filled))
    return most


def _known(shape) -> tuple | None:
    """A TensorShape as a tuple of ints and None (open dims); None when its rank is unknown."""
    return None if shape.rank is None else tuple(shape.as_list())


def dims_of(x) -> list:
    """`x`'s dims: ints where its static shape knows them, else scalar tensors read at run
    time (tf.shape)."""
    known = _known(x.shape)
    if None not in known:
        return list(known)
    shape = raw.Shape(input=x, out_type=tf.int32)
    return [d if d is not None else shape[i] for i, d in enumerate(known)]


def _shape_operand(dims):
    """`dims` (ints and scalar int32 tensors) as a raw op's shape input."""
    if all(isinstance(d, int) for d in dims):
        return int_operand(tuple(dims))
    return tf.stack([d if not isinstance(d, int) else tf.constant(d, tf.int32) for d in dims])


def broadcast_in_steps(x, shape):
    """`x` broadcast to `shape` (ints, and scalar tensors for dims known only at run time),
    one axis at a time: each step views `x` as [before, m, after] and broadcasts that to
    [before, n, after], which TF takes at any rank. The values are those of a single
    broadcast (copies)."""
    shape = [int(d) if isinstance(d, int | np.integer) else d for d in shape]
    current = [1] * (len(shape) - x.shape.rank) + dims_of(x)
    for axis, size in enumerate(shape):
        known = current[axis] if isinstance(current[axis], int) else None
        if current[axis] is size or known not in (None, 1) or (
                isinstance(size, int) and known == size):
            continue  # the size already (a dim of x other than 1 is the result's)
        before, after = dims_product(current[:axis]), dims_product(current[axis + 1:])
        view = raw.Reshape(tensor=x, shape=_shape_operand((before, current[axis], after)))
        x = raw.BroadcastTo(input=view, shape=_shape_operand((before, size, after)))
        current[axis] = size
    return raw.Reshape(tensor=x, shape=_shape_operand(shape))


def too_wide(operands) -> bool:
    """Whether TF would (or, for some size of an open dim, may) refuse to broadcast
    `operands` (of known ranks)."""
    shapes = [_known(x.shape) for x in operands]
    if any(s is None for s in shapes) or max(len(s) for s in shapes) <= MAX_BROADCAST_DIMS:
        return False
    return most_merged_dims(*shapes) > MAX_BROADCAST_DIMS


def broadcast_operands(operands) -> list:
    """`operands` broadcast to their common shape, each in steps (those of that shape as
    they are)."""
    shapes = [_known(x.shape) for x in operands]
    if all(None not in s for s in shapes):
        shape = np.broadcast_shapes(*shapes)
        return [x if s == shape else broadcast_in_steps(x, shape)
                for x, s in zip(operands, shapes)]
    shape = _common_shape(operands, shapes)
    ints = tuple(d if isinstance(d, int) else None for d in shape)
    return [x if None not in s and s == ints else broadcast_in_steps(x, shape)
            for x, s in zip(operands, shapes)]


def _common_shape(operands, shapes) -> list:
    """The broadcast shape of `operands` with open dims: an int where a static dim other than 1
    (or 1 everywhere) decides it, else the dim of TF's BroadcastArgs of their run-time
    shapes."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    common, dynamic = [], None
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if None not in sizes:
            common.append(max(sizes, default=1))
            continue
        if dynamic is None:
            dynamic = raw.Shape(input=operands[0], out_type=tf.int32)
            for x in operands[1:]:
                dynamic = raw.BroadcastArgs(s0=dynamic, s1=raw.Shape(input=x, out_type=tf.int32))
        common.append(dynamic[len(common)])
    return common


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
        source = _known(x.shape)
        if source is not None and most_merged_dims(source, shape) > MAX_BROADCAST_DIMS:
            return broadcast_in_steps(x, shape)
    return tf.broadcast_to(x, shape)


def on_a_view(fn, x, axis: int):
    """fn(view, 1) on `x` viewed as [before, n] (`axis` last) or [before, n, after], its
    result reshaped back: to `x`'s shape (softmax), or to it without `axis` (argmax). Dims
    known only at run time are read then (`x`'s rank is known: unigraph's tensors have one)."""
    dims = dims_of(x)
    before, after = dims_product(dims[:axis]), dims_product(dims[axis + 1:])
    view = (before, dims[axis]) if axis == len(dims) - 1 else (before, dims[axis], after)
    out = fn(raw.Reshape(tensor=x, shape=_shape_operand(view)), 1)
    shape = dims if out.shape.rank == len(view) else dims[:axis] + dims[axis + 1:]
    return raw.Reshape(tensor=out, shape=_shape_operand(shape))


def reduction(native, x, axis: tuple, keepdims: bool):
    """native(input=x, axis=axis, keep_dims=keepdims), with TF's gradient of Max, Min and
    Prod (and, eagerly or with a dim known only at run time, of Sum and Mean) rebuilt to
    broadcast in steps where TF's own would be refused: an operand that may be differentiated,
    of rank > 5, with more than 5 merged dims between the result and `x` (for some size of an
    open dim). Elsewhere, and always for the values, the op itself."""
    source = _known(x.shape)
    if source is None:
        return native(input=x, axis=int_operand(axis), keep_dims=keepdims)
    routed = _GRADIENTS if tf.executing_eagerly() or None in source else _GRAPH_GRADIENTS
    if native not in routed or not may_be_differentiated():
        return native(input=x, axis=int_operand(axis), keep_dims=keepdims)
    axes = {a % len(source) for a in axis}
    kept = tuple(1 if i in axes else d for i, d in enumerate(source))
    if most_merged_dims(kept, source) <= MAX_BROADCAST_DIMS:
        return native(input=x, axis=int_operand(axis), keep_dims=keepdims)
    gradient = _GRADIENTS[native]

    @tf.custom_gradient
    def reduce(x):
        # The gradient reads a copy made here: inside a tf.cond branch `x` may be a tensor of
        # the enclosing graph, which the branch's gradient cannot take in (as in tie_split).
        x = raw.Identity(input=x)
        y = native(input=x, axis=int_operand(axis), keep_dims=keepdims)

        def grad(g):
            kept = _shape_operand([1 if i in axes else d for i, d in enumerate(dims_of(x))])
            return gradient(x, raw.Reshape(tensor=y, shape=kept),
                            raw.Reshape(tensor=g, shape=kept), axis)

        return y, grad

    return reduce(x)


def _sum_gradient(x, y, g, axis):
    return broadcast_in_steps(g, dims_of(x))


def _mean_gradient(x, y, g, axis):
    # TF's _MeanGrad: Sum's gradient divided by the number of elements each result averages.
    if x.shape.is_fully_defined():
        factor = tf.constant(max(x.shape.num_elements(), 0) // max(y.shape.num_elements(), 1),
                             g.dtype)
    else:
        factor = tf.cast(raw.FloorDiv(x=raw.Size(input=x, out_type=tf.int64),
                                      y=raw.Maximum(x=raw.Size(input=y, out_type=tf.int64),
                                                    y=tf.constant(1, tf.int64))), g.dtype)
    return broadcast_in_steps(g, dims_of(x)) / factor


def _min_or_max_gradient(x, y, g, axis):
    # TF's _MinOrMaxGrad: the gradient split evenly between the elements equal to the result.
    shape = dims_of(x)
    indicators = tf.cast(tf.equal(broadcast_in_steps(y, shape), x), g.dtype)
    selected = raw.Reshape(tensor=tf.reduce_sum(indicators, axis),
                           shape=_shape_operand(dims_of(y)))
    return (indicators / broadcast_in_steps(selected, shape)) * broadcast_in_steps(g, shape)


def _prod_gradient(x, y, g, axis):
    # TF's _ProdGrad: the product of the others as two exclusive cumprods over the reduced
    # axes moved first and merged.
    shape = dims_of(x)
    rank = len(shape)
    reduced = [(a + rank) % rank for a in axis]
    perm = reduced + [a for a in range(rank) if a not in reduced]
    permuted = tf.transpose(x, perm)
    reduced_num = dims_product([shape[a] for a in reduced])
    others_num = dims_product([shape[a] for a in range(rank) if a not in reduced])
    flat = tf.reshape(permuted, _shape_operand((reduced_num, others_num)))
    left = tf.math.cumprod(flat, axis=0, exclusive=True)
    right = tf.math.cumprod(flat, axis=0, exclusive=True, reverse=True)
    others = tf.reshape(left * right, _shape_operand([shape[a] for a in perm]))
    out = broadcast_in_steps(g, shape) * tf.transpose(others, np.argsort(perm))
    return tf.reshape(out, _shape_operand(shape))


_GRAPH_GRADIENTS = {raw.Max: _min_or_max_gradient, raw.Min: _min_or_max_gradient,
                    raw.Prod: _prod_gradient}
_GRADIENTS = {**_GRAPH_GRADIENTS, raw.Sum: _sum_gradient, raw.Mean: _mean_gradient}
