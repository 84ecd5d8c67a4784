"""`scatter_add`: the adjoint of `take`, and the one record behind `ug.scatter` and
`x.at[i].set/add` with a traced index.

The frontend hands the record a 1-D index already checked and mapped into [0, n) (it goes
through `take`, which raises the out-of-range error on every target), and `updates` of
the shape `take(x, indices, axis)` has. "replace" (the last write wins) is composed in the
frontend from this record and `where`, so no backend has to order repeated writes.
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.index_checks import check_indices
from unigraph.ops._util import (
    NUMERIC_DTYPES,
    accumulator,
    check_axis,
    dims_conflict,
    fmt,
    grad_for,
    normal,
    require_dtype,
    require_int,
    require_same_dtype,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _scatter_add_infer(x, indices, updates, *, axis):
    require_int("scatter_add", "indices", indices)
    require_dtype("scatter_add", "x", x, NUMERIC_DTYPES, "use cast(x, 'int32') first")
    dtype = require_same_dtype("scatter_add", {"x": x, "updates": updates})
    check_axis("scatter_add", x, axis)
    if len(indices.shape) != 1:
        raise ShapeError(f"scatter_add: indices {fmt(indices)} must be 1-D (ug.scatter "
                         "flattens them)")
    want = x.shape[:axis] + indices.shape + x.shape[axis + 1:]
    if len(updates.shape) != len(want) or any(
            dims_conflict(a, b) for a, b in zip(updates.shape, want)):
        raise ShapeError(f"scatter_add: updates {fmt(updates)} must have the shape of "
                         f"take(x, indices, axis={axis}), {list(want)}")
    return TensorSpec(x.shape, dtype)


def _scatter_add_reference(x, indices, updates, *, axis):
    check_indices("scatter_add", indices, x.shape[axis], axis)
    # A copy (the op never writes into its input); float16 sums in float32, rounded once,
    # as `sum` (4,096 updates into one row summed in float16: 515 ulps off)
    out = np.array(x, dtype=accumulator(x.dtype))
    np.add.at(np.moveaxis(out, axis, 0), indices, np.moveaxis(updates, axis, 0))
    return out.astype(x.dtype, copy=False)


def _scatter_add_vjp(g, inputs, out, *, axis):
    x, indices, updates = inputs
    return [grad_for(g, x), None, grad_for(np.take(g, indices, axis=axis), updates)]


def _samples(rng):
    return [
        Sample((normal(rng, (5, 3)), np.array([4, 0, 2, 0]), normal(rng, (4, 3))), {"axis": 0}),
        Sample((normal(rng, (2, 4, 3)), np.array([3, 3, 1], dtype=np.int32),
                normal(rng, (2, 3, 3))), {"axis": 1}),
        Sample((normal(rng, (4,)), np.array([], dtype=np.int64), np.zeros((0,))), {"axis": 0}),
        Sample((rng.integers(-5, 5, (3, 2)), np.array([1, 1]), rng.integers(-5, 5, (3, 2))),
               {"axis": 1}),
    ]


register(OpDef(
    name="scatter_add",
    infer=_scatter_add_infer,
    reference=_scatter_add_reference,
    vjp=_scatter_add_vjp,
    doc="A copy of x with updates[..., j, ...] added at x[..., indices[j], ...] along "
        "`axis` (the adjoint of take: updates has take(x, indices, axis)'s shape); a "
        "repeated index sums every update. The op takes 1-D indices in [0, n); ug.scatter "
        "and x.at[i] flatten them, map a negative one to n + i and refuse any other with "
        "take's IndexOutOfRangeError. Gradient: g to x, take(g, indices) to updates.",
    example="ug.scatter_add([0.0, 0.0, 0.0], [2, 0, 2], [1.0, 2.0, 3.0])  # [2.0, 0.0, 4.0]",
    samples=_samples,
    differentiable_inputs=(0, 2),
    promote="none",
))
