"""Reductions (`ug.sum`, `ug.mean`, `ug.max`, `ug.argmax`, `ug.argmin`, `ug.cumsum`, ...):
`axis` normalised (an int, a tuple, or None for all axes), then the op record.
"""

from __future__ import annotations

import numpy as np

from unigraph.api.elementwise import cast
from unigraph.api.operands import (
    _axes,
    _axis,
    _docs_from_records,
    _exact_int,
    _promote,
    _record_doc,
    promote_for,
    ready_dtypes,
    unchanged,
    zero_d_axis,
)
from unigraph.api.shapes import (
    _run_time_size,
    merge_axes,
    reshape,
    reshape_as,
    run_time_positions,
    take,
    transpose,
)
from unigraph.dispatch import apply
from unigraph.dtypes import is_float
from unigraph.errors import ShapeError
from unigraph.tensor import Parameter, Tensor
from unigraph.tracing import user_source

_PLAIN = (Tensor, Parameter)  # never a WeakTensor: it promotes like a Python number
# A bool x reduces as NumPy's: sum, prod and cumsum count in int64 (NumPy's default int);
# max and min compare 0 and 1 (in int32, which every backend reduces) and give bools.
_BOOL_AS = {"sum": "int64", "prod": "int64", "cumsum": "int64", "max": "int32", "min": "int32"}


def _reduction(op: str):
    """`ug.<op>(x, axis=None, keepdims=False)`: x promoted as the record says, axes sorted
    and checked; `axis=()` reduces nothing and returns x itself (no node: a record never
    sees an empty axis tuple, so no backend has to read one)."""

    ready = ready_dtypes(op)

    def function(x, axis=None, keepdims=False):
        # `loss.mean()`: as is (a bool x is counted as ints below)
        if axis is None and type(x) in _PLAIN and x.dtype in ready and x.dtype != "bool":
            return apply(op, [x], {"axis": None, "keepdims": bool(keepdims)})
        (a,) = promote_for(op, x)
        ndim = len(np.shape(a)) if not isinstance(a, Tensor) else a.ndim
        # (NumPy's mean, as its var, refuses an axis of a 0-d x; its sum, max... take 0, -1)
        axes = None if op != "mean" and zero_d_axis(axis, ndim) else _axes(axis, ndim, op)
        if str(a.dtype) == "bool" and op in _BOOL_AS:  # NumPy's: True is 1
            a = cast(a, _BOOL_AS[op])
            if op in ("max", "min"):
                return cast(function(a, axes, keepdims), "bool")
        if axes == ():
            return unchanged(a)
        return apply(op, [a], {"axis": axes, "keepdims": bool(keepdims)})

    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op, "`axis`: an int, a tuple of ints or None (all axes).")
    return function


sum = _reduction("sum")
mean = _reduction("mean")
max = _reduction("max")
min = _reduction("min")
prod = _reduction("prod")


def _logical(op: str):
    """`ug.any` / `ug.all(x, axis=None, keepdims=False)`: a non-bool x is read as x != 0
    first (NumPy's truth: NaN is true), then the record over bools."""

    reduce = _reduction(op)

    def function(x, axis=None, keepdims=False):
        (a,) = _promote(x)
        if str(a.dtype) != "bool":
            a = cast(a, "bool")
        return reduce(a, axis, keepdims)

    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op, "`axis`: an int, a tuple of ints or None (all axes). "
                                       "A non-bool x counts its nonzero values as True.")
    return function


any = _logical("any")
all = _logical("all")


def argmax(x, axis=-1, keepdims=False):
    """Index (int64) of the first maximum along `axis`; `axis=None` counts over the flattened
    x, as NumPy (with keepdims, every dim kept as 1). A bool x is compared as 0 and 1."""
    (a,) = _promote(x)
    if str(a.dtype) == "bool":
        a = cast(a, "int32")
    if axis is None or a.ndim == 0:
        # NumPy's argmax of a 0-d x (axis None, 0 or -1) is 0: the flattened x's first.
        _axis(0 if axis is None else axis, a.ndim or 1, "argmax")
        flat = apply("argmax", [reshape(a, (-1,))], {"axis": 0, "keepdims": False})
        return reshape(flat, (1,) * a.ndim) if keepdims else flat
    return apply("argmax", [a], {"axis": _axis(axis, a.ndim, "argmax"),
                                 "keepdims": bool(keepdims)})


def argmin(x, axis=-1, keepdims=False):
    """Index (int64) of the first minimum along `axis` (`axis=None`: over the flattened x);
    a NaN counts as the minimum, as NumPy. `argmax` of the order-reversed x: -x for floats,
    -x - 1 for ints (no overflow).

    Example::

        >>> ug.argmin([[3.0, 1.0, 1.0], [0.0, 2.0, 5.0]], axis=1)
        [1, 0]
    """
    (a,) = _promote(x)
    if str(a.dtype) == "bool":
        a = cast(a, "int32")
    if axis is not None:  # (an empty axis is argmax's error, eagerly and when run)
        _axis(axis, a.ndim or 1, "argmin")
    return argmax(-a if is_float(str(a.dtype)) else -a - 1, axis, keepdims)


def argsort(x, axis=-1):
    """Indices that sort x along `axis` (int64), stable, NaN last, as NumPy's
    `np.argsort(x, axis, kind="stable")`."""
    (a,) = _promote(x)
    return apply("argsort", [a], {"axis": _axis(axis, a.ndim, "argsort")})


def sort(x, axis=-1):
    """x sorted ascending along `axis`, NaN last, as NumPy's `np.sort(x, axis,
    kind="stable")` (tied 0.0 and -0.0 keep their order in x): x taken at
    `ug.argsort`'s indices (the rows flattened, each index moved by its row's offset), so
    the gradient goes back to each element's place (a tie: by the stable order). Along or
    across dims that input_spec leaves open, the rows' offsets are counted when the program
    runs.

    Example::

        >>> ug.sort([[3.0, nan, 1.0], [2.0, -1.0, 2.0]])
        [[1.0, 3.0, nan], [-1.0, 2.0, 2.0]]
    """
    (a,) = _promote(x)
    axis = _axis(axis, a.ndim, "sort")
    return _taken_along(a, argsort(a, axis), axis)


def topk(x, k, axis=-1, largest=True, sorted=True):
    """The k largest (`largest=False`: smallest) elements of x along `axis` and their
    indices (int64), as `torch.topk` / `tf.math.top_k` / `paddle.topk` but in one order on
    every target: NumPy's stable order, so equal values (0.0 and -0.0 too) keep their order
    in x and NaN counts as the largest (first when largest, last when not). The values are
    x taken at the indices (as ug.sort's), so their gradient goes back to the chosen places.
    `sorted=False` is accepted and gives the same sorted result. k may be 0; a k larger
    than the dim is a ShapeError. While tracing, `axis`'s dim must be known; the others may
    be left open by input_spec.

    Example::

        >>> values, indices = ug.topk([3.0, 1.0, nan, 3.0], 2)
        [nan, 3.0], [2, 0]
    """
    (a,) = _promote(x)
    axis = _axis(axis, a.ndim, "topk")
    k = _exact_int(k, "ug.topk's k")
    if a.shape[axis] is None:
        raise ShapeError(f"ug.topk: axis {axis} of the shape {list(a.shape)} of the tensor at "
                         f"{user_source()} is known only at run time, so k={k} cannot be "
                         "checked against it: give that dim a size in input_spec, or state "
                         "the sizes first with ug.ensure_shape(x, shape)")
    order = apply("topk", [a], {"k": k, "axis": axis, "largest": bool(largest)})
    return _taken_along(a, order, axis), order


def _taken_along(a, order, axis):
    """x at `order`'s indices along `axis` (np.take_along_axis): the rows along `axis` are
    flattened, each index moved by its row's start, then one take (a composition of
    transpose, reshape and take: its gradient goes back to each element's place). Along or
    across dims that input_spec leaves open, the starts are counted when the program runs."""
    if a.ndim == 1:
        return take(a, order, axis=0)
    perm = [d for d in range(a.ndim) if d != axis] + [axis]
    rows, order = transpose(a, perm), transpose(order, perm)
    if None in a.shape or None in order.shape:
        taken = _taken_along_open_rows(rows, order, a, axis)
    else:
        size = a.shape[axis]
        count = int(np.prod(rows.shape[:-1], dtype=np.int64))
        offsets = np.arange(count, dtype=np.int64).reshape(rows.shape[:-1] + (1,)) * size
        flat = reshape(order + offsets, (-1,))
        taken = reshape(take(reshape(rows, (-1,)), flat, axis=0), order.shape)
    return transpose(taken, [perm.index(d) for d in range(a.ndim)])


def _taken_along_open_rows(rows, order, a, axis: int):
    """`_taken_along`'s rows (the axis last) taken at `order` where input_spec leaves a dim
    open: the rows flattened, each index moved by its row's start, counted from its flat
    position when the program runs (a row of `order` holds `picked` indices: all of the
    axis for sort, k for topk)."""
    size = a.shape[axis]
    if size is None:
        size = _run_time_size(a, axis)
    flat_order = merge_axes(order, 0, order.ndim)
    positions = run_time_positions(flat_order, 0)
    picked = order.shape[-1]
    if picked is None or picked == size:
        starts = positions - positions % size
    elif picked:
        starts = positions // picked * size
    else:  # k = 0: no index to move
        starts = positions
    taken = take(merge_axes(rows, 0, rows.ndim), flat_order + starts, axis=0)
    return reshape_as(taken, order)


def cumsum(x, axis=None):
    """Running sum along `axis` (None: over the flattened x, as NumPy).

    Example::

        >>> ug.cumsum([[1, 2], [3, 4]], axis=1)
        [[1, 3], [3, 7]]
    """
    (a,) = _promote(x)
    if str(a.dtype) == "bool":
        a = cast(a, _BOOL_AS["cumsum"])
    if axis is None or zero_d_axis(axis, a.ndim):  # (NumPy's cumsum of a 0-d x is [x])
        a, axis = reshape(a, (-1,)), 0
    return apply("cumsum", [a], {"axis": _axis(axis, a.ndim, "cumsum")})


cumsum.__doc__ = _record_doc("cumsum", "`axis` None: over the flattened x, as NumPy.")


_docs_from_records(argmax, argsort)
