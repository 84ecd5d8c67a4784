"""Indexing ops: they pick elements by position (a slice, a gather along an axis) or make
one-hot rows from indices, and never change a value.

Attrs arrive normalised by the frontend: a non-negative axis, resolved and clamped `slice`
bounds with positive strides (on a dim of unknown size, bounds resolved when the program
runs).
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.index_checks import check_indices
from unigraph.ops._util import (
    accumulator,
    check_axis,
    fmt,
    grad_for,
    is_float,
    normal,
    require_dtype_name,
    require_int,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register

# A slice's `end` on a dim of unknown size sliced to its end (ONNX's INT64_MAX). On such a
# dim the bounds are clamped to the size when the program runs, as every framework's
# slicing does.
TO_END = 2**63 - 1


def _slice_infer(x, *, begin, end, stride):
    rank = len(x.shape)
    if not rank:  # x[()] of a 0-d tensor is x itself: the frontend makes no node
        raise ShapeError(f"slice: {fmt(x)} has no dims to slice; the node is x itself")
    if not len(begin) == len(end) == len(stride) == rank:
        raise ShapeError(
            f"slice: begin {tuple(begin)}, end {tuple(end)} and stride {tuple(stride)} need "
            f"one entry per dim of {fmt(x)}"
        )
    shape = []
    for i, (b, e, s, d) in enumerate(zip(begin, end, stride, x.shape, strict=True)):
        if d is None and s > 0 and -TO_END <= min(b, e) and max(b, e) <= TO_END:
            # Resolved when run, as Python: a negative bound counts from the end, then both
            # are clamped to 0..size. Empty for sure only where both count from one side.
            shape.append(0 if e <= b and (b < 0) == (e < 0) else None)
            continue
        if s <= 0 or b < 0 or e < 0 or (d is not None and (b > d or e > d)):
            raise ShapeError(
                f"slice: dim {i} of {fmt(x)} cannot take begin={b}, end={e}, stride={s} "
                "(bounds must be clamped to 0..size and strides positive; the frontend "
                "normally does this)"
            )
        shape.append(max(0, -(-(e - b) // s)))
    return TensorSpec(tuple(shape), x.dtype)


def _slice_index(begin, end, stride):
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, stride, strict=True))


def _slice_vjp(g, inputs, out, *, begin, end, stride):
    (x,) = inputs
    dx = np.zeros_like(x)
    dx[_slice_index(begin, end, stride)] = g
    return [grad_for(dx, x)]


register(OpDef(
    name="slice",
    infer=_slice_infer,
    reference=lambda x, *, begin, end, stride: x[_slice_index(begin, end, stride)].copy(),
    vjp=_slice_vjp,
    doc="x[begin[0]:end[0]:stride[0], ...], one (begin, end, stride) per dim; strides are "
        "positive. On a dim of known size the frontend resolves negative bounds and clamps "
        "them to 0..size. On a dim of unknown size (left open by input_spec) the bounds are "
        "resolved when the program runs, as Python's: a negative one counts from the end, "
        "then both are clamped to 0..size (end TO_END = 2**63 - 1: to the end; bounds lie "
        "in [-TO_END, TO_END]).",
    example="ug.slice([0, 1, 2, 3, 4], [1], [5], [2])  # [1, 3]",
    samples=lambda rng: [
        Sample((normal(rng, (5, 6)),), {"begin": (1, 0), "end": (4, 6), "stride": (1, 2)}),
        Sample((normal(rng, (3, 4, 5)),), {"begin": (0, 1, 4), "end": (3, 3, 5),
                                            "stride": (2, 1, 1)}),
        Sample((normal(rng, (4,)),), {"begin": (3,), "end": (1,), "stride": (1,)}),
    ],
))


def _take_infer(x, indices, *, axis):
    require_int("take", "indices", indices)
    check_axis("take", x, axis)
    return TensorSpec(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype)


def _take_reference(x, indices, *, axis):
    # NumPy would wrap a negative index; the op refuses it (see unigraph.index_checks).
    check_indices("take", indices, x.shape[axis], axis)
    return np.take(x, indices, axis=axis)


def _take_vjp(g, inputs, out, *, axis):
    x, indices = inputs
    if not is_float(x.dtype):
        return [None, None]
    # float16 sums in float32, rounded once, as `sum` (4,096 repeats of one index summed
    # in float16: 515 ulps off)
    dx = np.zeros(x.shape, accumulator(x.dtype))
    # Put the indices' dims of g first, to line up with axis `axis` of dx moved first;
    # add.at sums over repeated indices.
    index_dims = range(axis, axis + indices.ndim)
    g_moved = np.moveaxis(g, list(index_dims), list(range(indices.ndim)))
    np.add.at(np.moveaxis(dx, axis, 0), indices, g_moved)
    return [dx.astype(x.dtype, copy=False), None]


register(OpDef(
    name="take",
    infer=_take_infer,
    reference=_take_reference,
    vjp=_take_vjp,
    doc="Gather along `axis`: out[..., i, ...] = x[..., indices[i], ...], with indices' shape "
        "in place of the axis. The op takes indices (int32/int64) in [0, n); ug.take and x[i] "
        "first map a negative index to n + i, as NumPy. Any other index is an "
        "IndexOutOfRangeError on every target, eager or static, naming the index as written. "
        "Repeated indices sum their gradients.",
    example="ug.take([10, 20, 30], [2, 0, 2])  # [30, 10, 30]",
    samples=lambda rng: [
        Sample((normal(rng, (5, 3)), np.array([4, 0, 2, 0])), {"axis": 0}),
        Sample((normal(rng, (2, 4, 3)), np.array([[1, 3], [3, 3]], dtype=np.int32)), {"axis": 1}),
        Sample((normal(rng, (2, 3)), np.array(2)), {"axis": 1}),
    ],
    differentiable_inputs=(0,),
))


def _one_hot_infer(indices, *, depth, dtype):
    require_int("one_hot", "indices", indices)
    if depth < 0:
        raise ShapeError(f"one_hot: depth is {depth}; it must be >= 0")
    return TensorSpec(indices.shape + (depth,), require_dtype_name("one_hot", dtype))


register(OpDef(
    name="one_hot",
    infer=_one_hot_infer,
    reference=lambda indices, *, depth, dtype: (
        indices[..., None] == np.arange(depth)
    ).astype(dtype),
    vjp=None,
    doc="out[..., j] = 1 where indices[...] == j else 0, in `dtype`, with a new last axis of "
        "size `depth`. An index outside [0, depth) gives a row of zeros (as TensorFlow and "
        "JAX; PyTorch raises).",
    example="ug.one_hot([1, 3], 3)  # [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]",
    samples=lambda rng: [
        Sample((np.array([0, 2, 1, 2]),), {"depth": 3, "dtype": "float32"}),
        Sample((np.array([[1, 0], [3, 5]], dtype=np.int32),), {"depth": 4, "dtype": "int64"}),
    ],
))
