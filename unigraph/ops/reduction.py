"""Reductions: sum mean max min over a tuple of axes (None: all), and argmax over one axis."""

from __future__ import annotations

import math

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import (
    ACCUMULATING_TOLERANCE,
    NUMERIC_DTYPES,
    accumulator,
    check_axis,
    distinct,
    expand_reduced,
    fmt,
    grad_for,
    normal,
    reduced_axes,
    require_bool,
    require_dtype,
    require_float,
    require_numeric,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _reduced_shape(op, x, axis, keepdims, need_nonempty=False):
    if axis is not None:
        if not isinstance(axis, tuple):
            raise ShapeError(f"{op}: axis is {axis!r}; pass a tuple of ints or None")
        if not axis:
            # One rule, in the frontend: ug.sum(x, axis=()) is x itself, no node. So no
            # backend reads an empty axis list (torch and Paddle would reduce every axis).
            raise ShapeError(f"{op}: axis () reduces nothing; the node is x itself (the "
                             f"public ug.{op} returns x for axis=())")
        for a in axis:
            check_axis(op, x, a)
        if len(set(axis)) != len(axis):
            raise ShapeError(f"{op}: axis {axis} repeats an axis of {fmt(x)}")
    axes = reduced_axes(axis, len(x.shape))
    if need_nonempty and any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"{op}: reducing {fmt(x)} over axis {axis} has no elements to compare")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _tie_split(g, x, out, axes):
    """The max/min gradient rule, shared by the reductions and by maximum/minimum.

    g, x and out broadcast to one shape (out and g with size 1 along `axes`, the slices a
    result was taken over). Each element equal to its slice's result gets an equal share of
    g; a slice whose result is NaN (so nothing equals it) gets NaN in every element.
    """
    hit = x == out
    count = np.sum(hit, axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hit, g / count, np.where(count == 0, np.nan, 0.0))


def _reduction_samples(make):
    def samples(rng):
        return [
            Sample((make(rng, (3, 4)),), {"axis": None, "keepdims": False}),
            Sample((make(rng, (2, 3, 4)),), {"axis": (0, 2), "keepdims": True}),
            Sample((make(rng, (2, 3, 4)),), {"axis": (1,), "keepdims": False}),
        ]

    return samples


def _extreme_samples(np_fn):
    """Distinct values, then a two-way tie at each row's extreme (where the split gives 1/2
    each, as finite differences do) and a row holding a NaN (a convention: no limit)."""

    def samples(rng):
        ties = distinct(rng, (3, 4))
        rows = np.arange(3)
        at = np.argmax(ties == np_fn(ties, axis=1, keepdims=True), axis=1)
        ties[rows, (at + 1) % 4] = ties[rows, at]  # the extreme's right neighbour equals it
        with_nan = distinct(rng, (2, 3))
        with_nan[1, 1] = np.nan
        return _reduction_samples(distinct)(rng)[:2] + [
            Sample((ties,), {"axis": (1,), "keepdims": False}),
            Sample((with_nan,), {"axis": (1,), "keepdims": True}, at_kink=True),
        ]

    return samples


def _sum_infer(x, *, axis, keepdims):
    require_numeric("sum", "x", x)
    return TensorSpec(_reduced_shape("sum", x, axis, keepdims), x.dtype)


def _sum_vjp(g, inputs, out, *, axis, keepdims):
    (x,) = inputs
    return [grad_for(np.broadcast_to(expand_reduced(g, axis, x.ndim, keepdims), x.shape), x)]


def _sum_samples(rng):
    # One long reduction, so the accumulating tolerance gets exercised. Positive values of
    # about 1e-3 keep the sum (~55) well inside float16's range.
    long = rng.uniform(0.1, 1.0, 100_000) * 1e-3
    ints = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    int_sample = Sample((ints,), {"axis": (1,), "keepdims": False})
    long_sample = Sample((long,), {"axis": None, "keepdims": False})
    # The long sample already covers axis=None.
    return _reduction_samples(normal)(rng)[1:] + [long_sample, int_sample]


register(OpDef(
    name="sum",
    infer=_sum_infer,
    reference=lambda x, *, axis, keepdims: np.asarray(
        np.sum(x, axis=axis, keepdims=keepdims, dtype=accumulator(x.dtype))
    ).astype(x.dtype, copy=False),
    vjp=_sum_vjp,
    doc="Sum of x over `axis` (a tuple; None: all). Unlike NumPy the result keeps x's dtype: "
        "int32 stays int32 (and wraps on overflow) where NumPy widens it to int64, and bools "
        "are refused (cast them first). float16 is summed in float32 and rounded once.",
    example="ug.sum([[1, 2], [3, 4]], axis=0)  # [4, 6]",
    samples=_sum_samples,
    tolerance=ACCUMULATING_TOLERANCE,
))


def _mean_infer(x, *, axis, keepdims):
    require_float("mean", "x", x)
    return TensorSpec(_reduced_shape("mean", x, axis, keepdims), x.dtype)


def _mean_reference(x, *, axis, keepdims):
    # NumPy accumulates a float16 mean in float32; the result is cast back to x's dtype.
    return np.asarray(np.mean(x, axis=axis, keepdims=keepdims)).astype(x.dtype, copy=False)


def _mean_vjp(g, inputs, out, *, axis, keepdims):
    (x,) = inputs
    count = int(np.prod([x.shape[a] for a in reduced_axes(axis, x.ndim)], dtype=np.int64))
    spread = np.broadcast_to(expand_reduced(g, axis, x.ndim, keepdims), x.shape)
    return [grad_for(spread / count, x)]


register(OpDef(
    name="mean",
    promote="float",
    infer=_mean_infer,
    reference=_mean_reference,
    vjp=_mean_vjp,
    doc="Mean of a floating x over `axis` (a tuple; None: all): sum / count. NaN over an "
        "empty axis. Cast ints first (NumPy would return float64).",
    example="ug.mean([[1.0, 2.0], [3.0, 5.0]], axis=1)  # [1.5, 4.0]",
    samples=_reduction_samples(normal),
    tolerance=ACCUMULATING_TOLERANCE,
))


def _initial_samples(np_fn):
    """The extremes' samples (the reduction over several axes with `initial` -inf, as
    ug.logsumexp's shift marks its max, in place of the one over every axis), and a marked
    max over an empty axis (-inf): four, as every record."""

    def samples(rng):
        several, ties, with_nan = _extreme_samples(np_fn)(rng)[1:]
        marked = {"axis": (1,), "keepdims": True, "initial": -np.inf}
        return [Sample(several.inputs, {**several.attrs, "initial": -np.inf}), ties, with_nan,
                Sample((np.zeros((3, 0)),), marked)]

    return samples


def _extreme(name, np_fn, word, example):
    def infer(x, *, axis, keepdims, initial=None):
        require_numeric(name, "x", x)
        if initial is not None and (name != "max" or initial != -np.inf
                                    or x.dtype not in ("float16", "float32", "float64")):
            raise ShapeError(f"{name}: initial={initial!r} of {fmt(x)}; only a floating max "
                             "takes one, -inf (an empty axis is then -inf, not an error)")
        return TensorSpec(_reduced_shape(name, x, axis, keepdims,
                                         need_nonempty=initial is None), x.dtype)

    def reference(x, *, axis, keepdims, initial=None):
        extra = {} if initial is None else {"initial": initial}
        return np.asarray(np_fn(x, axis=axis, keepdims=keepdims, **extra)).astype(
            x.dtype, copy=False)

    def vjp(g, inputs, out, *, axis, keepdims, initial=None):
        (x,) = inputs
        kept_g = expand_reduced(g, axis, x.ndim, keepdims)
        kept_out = expand_reduced(out, axis, x.ndim, keepdims)
        return [grad_for(_tie_split(kept_g, x, kept_out, reduced_axes(axis, x.ndim)), x)]

    # (`initial`: a max marked by ug.logsumexp, whose shift over nothing is -inf eagerly.)
    empty = ("; with `initial` -inf (NumPy's initial; a floating x) it is -inf"
             if name == "max" else "")
    register(OpDef(
        name=name,
        infer=infer,
        reference=reference,
        vjp=vjp,
        doc=f"{word.capitalize()} of x over `axis` (a tuple; None: all). NaN propagates: a "
            f"slice holding a NaN gives NaN. An empty axis is a `ShapeError` (nothing to "
            f"compare){empty}. Gradient: shared equally by the elements equal to the result "
            f"(two tied {word} elements get half each); a slice whose result is NaN gets NaN "
            f"in every element.",
        samples=_initial_samples(np_fn) if name == "max" else _extreme_samples(np_fn),
        example=example,
    ))


_extreme("max", np.max, "maximal", "ug.max([[1.0, 3.0], [2.0, nan]], axis=1)  # [3.0, nan]")
_extreme("min", np.min, "minimal", "ug.min([[1.0, 3.0], [2.0, 0.5]], axis=1)  # [1.0, 0.5]")


def _logical_samples(rng):
    """bools at the reductions' shapes and axes, and an empty axis (any: False, all: True)."""
    def bools(rng, shape):
        return rng.random(shape) < 0.5

    return _reduction_samples(bools)(rng) + [
        Sample((np.zeros((0, 3), bool),), {"axis": (0,), "keepdims": True})]


def _logical(name, np_fn, word, empty, example):
    def infer(x, *, axis, keepdims):
        require_bool(name, "x", x)
        return TensorSpec(_reduced_shape(name, x, axis, keepdims), "bool")

    register(OpDef(
        name=name,
        infer=infer,
        reference=lambda x, *, axis, keepdims: np.asarray(
            np_fn(x, axis=axis, keepdims=keepdims)),
        vjp=None,
        doc=f"Whether {word} element of a bool x over `axis` (a tuple; None: all) is True, "
            f"as NumPy's np.{name}; {empty} over an empty axis. Not differentiable.",
        samples=_logical_samples,
        example=example,
    ))


_logical("any", np.any, "any", "False",
         "ug.any([[True, False], [False, False]], axis=1)  # [True, False]")
_logical("all", np.all, "every", "True",
         "ug.all([[True, False], [True, True]], axis=1)  # [False, True]")


def _argmax_infer(x, *, axis, keepdims):
    require_dtype("argmax", "x", x, NUMERIC_DTYPES, "use cast(x, 'int32') first")
    check_axis("argmax", x, axis)
    if x.shape[axis] == 0:
        raise ShapeError(f"argmax: axis {axis} of {fmt(x)} is empty; there is no maximum")
    return TensorSpec(_reduced_shape("argmax", x, (axis,), keepdims), "int64")


def _argmax_samples(rng):
    ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])  # first maximum wins: [1, 0]
    return [
        Sample((distinct(rng, (3, 4)),), {"axis": 1, "keepdims": False}),
        Sample((distinct(rng, (2, 3, 4)),), {"axis": 0, "keepdims": True}),
        Sample((ties,), {"axis": 1, "keepdims": False}),
    ]


register(OpDef(
    name="argmax",
    infer=_argmax_infer,
    reference=lambda x, *, axis, keepdims: np.asarray(
        np.argmax(x, axis=axis, keepdims=keepdims), dtype=np.int64
    ),
    vjp=None,
    doc="Index (int64) of the maximum of x along one `axis`; among ties the first wins, and "
        "a NaN counts as the maximum.",
    example="ug.argmax([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], axis=1)  # [1, 0]",
    samples=_argmax_samples,
))


def _argsort_infer(x, *, axis):
    require_numeric("argsort", "x", x)
    check_axis("argsort", x, axis)
    return TensorSpec(x.shape, "int64")


def _argsort_samples(rng):
    ties = np.array([[3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0, -0.0, np.inf]])
    return [
        Sample((distinct(rng, (3, 4)),), {"axis": 1}),
        Sample((distinct(rng, (2, 3, 4)),), {"axis": 0}),
        Sample((ties,), {"axis": 1}),  # ties keep their order; 0.0 ties -0.0; NaN last
        Sample((rng.integers(-3, 3, (3, 6)),), {"axis": 1}),
    ]


register(OpDef(
    name="argsort",
    infer=_argsort_infer,
    reference=lambda x, *, axis: np.argsort(x, axis=axis, kind="stable").astype(np.int64),
    vjp=None,
    doc="Indices (int64) that sort x ascending along one `axis`, stable as NumPy's "
        "kind='stable': equal values (0.0 and -0.0 too) keep their order, NaN sorts last. "
        "Not differentiable.",
    example="ug.argsort([3.0, 1.0, nan, 1.0], axis=0)  # [1, 3, 0, 2]",
    samples=_argsort_samples,
))


def _topk_infer(x, *, k, axis, largest):
    require_numeric("topk", "x", x)
    check_axis("topk", x, axis)
    size = x.shape[axis]
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 0:
        raise ShapeError(f"topk: k={k!r} must be an int >= 0")
    if size is not None and k > size:
        raise ShapeError(f"topk: k={k} is larger than axis {axis} of {fmt(x)} (use k <= {size})")
    return TensorSpec(x.shape[:axis] + (k,) + x.shape[axis + 1:], "int64")


def topk_order(x, *, k, axis, largest):
    """The record's order: NumPy's stable ascending order, or for `largest` the stable
    ascending order of x reversed along `axis`, reversed back (descending, ties still in
    index order, NaN first); its first k."""
    if largest:
        order = x.shape[axis] - 1 - np.flip(
            np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis).astype(np.int64)


def _topk_samples(rng):
    ties = np.array([[3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0, -0.0, np.inf]])
    return [
        Sample((distinct(rng, (2, 3, 4)),), {"k": 2, "axis": 0, "largest": False}),
        Sample((ties,), {"k": 7, "axis": 1, "largest": True}),  # NaN first; ties in order
        Sample((ties,), {"k": 9, "axis": 1, "largest": False}),  # 0.0 ties -0.0; NaN last
        Sample((rng.integers(-3, 3, (3, 6)),), {"k": 4, "axis": 1, "largest": True}),
    ]


register(OpDef(
    name="topk",
    infer=_topk_infer,
    reference=topk_order,
    vjp=None,
    doc="Indices (int64) of the k largest (`largest=False`: smallest) elements of x along "
        "one `axis`, in order, as NumPy's stable order: equal values (0.0 and -0.0 too) keep "
        "their order, NaN is the largest (first when largest, last when not). Not "
        "differentiable (ug.topk takes the values at them).",
    example="ug.topk([3.0, 1.0, nan, 3.0], 2)  # ([nan, 3.0], [2, 0])",
    samples=_topk_samples,
))


def _prod_infer(x, *, axis, keepdims):
    require_numeric("prod", "x", x)
    return TensorSpec(_reduced_shape("prod", x, axis, keepdims), x.dtype)


def _prod_vjp(g, inputs, out, *, axis, keepdims):
    """Each element's gradient is the product of the others in its slice (exclusive
    products from both sides: no division, so a zero in the slice is handled exactly)."""
    (x,) = inputs
    if not np.issubdtype(x.dtype, np.floating):
        return [None]
    axes = reduced_axes(axis, x.ndim)
    rest = [i for i in range(x.ndim) if i not in axes]
    perm = rest + list(axes)
    # float16 multiplies in float32, rounded once (by grad_for), as the forward does
    moved = np.transpose(x.astype(accumulator(x.dtype), copy=False), perm)
    # the row length named, not -1: NumPy cannot infer it when a kept dim is 0
    rows = moved.reshape(moved.shape[:len(rest)] + (math.prod(moved.shape[len(rest):]),))
    ones = np.ones(rows.shape[:-1] + (1,), rows.dtype)
    left = np.cumprod(np.concatenate([ones, rows[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, rows[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    if rows.shape[-1] == 0:
        left = right = rows
    kept_g = np.transpose(np.broadcast_to(expand_reduced(g, axis, x.ndim, keepdims), x.shape),
                          perm).reshape(rows.shape)
    dx = (left * right * kept_g).reshape(moved.shape)
    return [grad_for(np.transpose(dx, np.argsort(perm)), x)]


def _prod_samples(rng):
    def factors(rng, shape):  # |v| in [0.5, 1.5]: the products stay near 1
        return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.5, shape)

    ints = Sample((rng.integers(-3, 4, (3, 4)).astype(np.int32),), {"axis": (1,),
                                                                     "keepdims": False})
    return _reduction_samples(factors)(rng) + [ints]


register(OpDef(
    name="prod",
    infer=_prod_infer,
    reference=lambda x, *, axis, keepdims: np.asarray(
        np.prod(x, axis=axis, keepdims=keepdims, dtype=accumulator(x.dtype))
    ).astype(x.dtype, copy=False),
    vjp=_prod_vjp,
    doc="Product of x over `axis` (a tuple; None: all), in x's dtype (int32 stays int32, "
        "wrapping on overflow); 1 over an empty axis; float16 multiplies in float32, rounded "
        "once. Gradient: the product of the other "
        "elements of the slice (exact where the slice holds a zero).",
    example="ug.prod([[1, 2], [3, 4]], axis=1)  # [2, 12]",
    samples=_prod_samples,
    tolerance=ACCUMULATING_TOLERANCE,
))


def _cumsum_infer(x, *, axis):
    require_numeric("cumsum", "x", x)
    check_axis("cumsum", x, axis)
    return x


def _cumsum_vjp(g, inputs, out, *, axis):
    # Input i feeds outputs i, i+1, ...: the gradient is the reversed running sum of g.
    flipped = np.flip(g, axis)
    return [grad_for(np.flip(_running_sum(flipped, axis), axis), inputs[0])]


def _running_sum(x, axis):
    return np.cumsum(x, axis=axis, dtype=accumulator(x.dtype)).astype(x.dtype, copy=False)


register(OpDef(
    name="cumsum",
    infer=_cumsum_infer,
    reference=lambda x, *, axis: _running_sum(x, axis),
    vjp=_cumsum_vjp,
    doc="Running sum of x along `axis` (out[i] = x[0] + ... + x[i]), in x's dtype; float16 "
        "runs in float32, each output rounded once. Gradient: the running sum of the "
        "cotangent from the end.",
    example="ug.cumsum([[1, 2, 3], [4, 5, 6]], axis=1)  # [[1, 3, 6], [4, 9, 15]]",
    samples=lambda rng: [
        Sample((normal(rng, (3, 4)),), {"axis": 1}),
        Sample((normal(rng, (2, 3, 4)),), {"axis": 0}),
        Sample((rng.integers(-5, 5, (5,)).astype(np.int32),), {"axis": 0}),
    ],
    tolerance=ACCUMULATING_TOLERANCE,
))
