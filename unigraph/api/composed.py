"""Functions composed exactly of op records (each docstring names the records): clip, sign,
var, std, logsumexp, norm.
"""

from __future__ import annotations

import builtins

import numpy as np

from unigraph.api.creation import ones_like
from unigraph.api.elementwise import (
    abs,
    cast,
    equal,
    exp,
    less,
    log,
    maximum,
    minimum,
    sqrt,
    stop_gradient,
    where,
)
from unigraph.api.operands import (
    _axes,
    _promote,
    _tensor_or_array,
)
from unigraph.api.reductions import max, mean, sum
from unigraph.api.shapes import squeeze
from unigraph.dispatch import apply
from unigraph.tracing import user_source


def clip(x, min=None, max=None):
    """x limited to [min, max] (either may be None): `ug.minimum(ug.maximum(x, min), max)`,
    so NaN stays NaN and at a bound the gradient is split as those ops split it.

    Example::

        >>> ug.clip([-2.0, 0.5, 3.0], 0.0, 1.0)
        [0.0, 0.5, 1.0]
    """
    out = x
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return _tensor_or_array(out)


def sign(x):
    """-1, 0 or 1 by the sign of x (NaN stays NaN), in x's dtype; gradient 0. Composed of
    `greater`, `less`, `stop_gradient` and `where`.

    Example::

        >>> ug.sign([-2.0, 0.0, 3.0])
        [-1.0, 0.0, 1.0]
    """
    (a,) = _promote(x)
    if a.dtype == "bool":
        raise TypeError(f"ug.sign at {user_source()} takes numbers, not bools")
    # Neither positive nor negative: x itself (a zero, or NaN), its gradient stopped. (Not
    # x * 0, which the NumPy targets would warn about at an infinity no branch keeps.)
    rest = stop_gradient(a)
    if a.dtype == "uint8":  # never negative (and -1 does not fit in uint8)
        return where(a > 0, 1, rest)
    return where(a > 0, 1, where(a < 0, -1, rest))


def _count(x, axes, keepdims, ddof):
    """n - ddof, n the number of elements var reduces over `axes`: a Python float where
    those dims are known; where one is left open by input_spec, counted when the program
    runs, a float64 sum of ones cast once to x's dtype (the float eager divides by)."""
    dims = [x.shape[a] for a in (range(x.ndim) if axes is None else axes)]
    # n - ddof at or below 0 counts as 0, as NumPy's (var of 1 element with ddof=2, or of
    # none with ddof=1, is NaN: 0 / 0, not 0 / -1).
    if None not in dims:
        return float(builtins.max(int(np.prod(dims, dtype=np.int64)) - ddof, 0))
    return cast(maximum(sum(ones_like(x, "float64"), axes, keepdims) - ddof, 0.0), x.dtype)


def var(x, axis=None, keepdims=False, ddof=0):
    """Variance over `axis` (None: all): mean((x - mean(x))^2) * n / (n - ddof), NumPy's
    default ddof=0 (torch's is 1). Composed of `mean`, `sub`, `mul` and `sum` (over an axis
    left open by input_spec, n is counted when the program runs: `full_like`, `sum`, `cast`).

    Example::

        >>> ug.var([1.0, 2.0, 3.0, 4.0])
        1.25
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "var")
    centred = a - mean(a, axes, keepdims=True)
    return sum(centred * centred, axes, keepdims) / _count(a, axes, keepdims, ddof)


def std(x, axis=None, keepdims=False, ddof=0):
    """Standard deviation, sqrt(var(x, axis, keepdims, ddof)) (NumPy's default ddof=0).

    Example::

        >>> ug.std([1.0, 3.0])
        1.0
    """
    _axes(axis, np.ndim(x) if not hasattr(x, "ndim") else x.ndim, "std")  # (errors name std)
    return sqrt(var(x, axis, keepdims, ddof))


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis`, without overflow: m + log(sum(exp(x - m))) with m the
    max (its gradient cancels: the result's is softmax(x)). A slice holding +inf gives inf,
    one of only -inf gives -inf, as NumPy's `np.logaddexp.reduce`.

    Example::

        >>> ug.logsumexp([1000.0, 1000.0])
        1000.6931
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "logsumexp")
    if any(a.shape[i] == 0 for i in (range(a.ndim) if axes is None else axes)):
        # Over nothing: log(0) = -inf, as NumPy and ONNX's ReduceLogSumExp (max has no
        # identity, so the shift is left out: there is nothing to overflow), written as the
        # sum of nothing (0) - inf: log(0) and its gradient's 1 / 0 would make the NumPy
        # targets warn (divide by zero) about no value of the user's, where no other does.
        return sum(a, axes, keepdims=keepdims) - np.inf
    # The shift marks its max with `initial` -inf: where a run leaves an open axis empty it
    # gives -inf (the result then -inf, as above), not a max's error over nothing.
    peak = a if axes == () else apply("max", [a], {"axis": axes, "keepdims": True,
                                                   "initial": -np.inf})
    # The shift is the peak where it is finite, else 0: a slice of only -inf (or one a run
    # leaves empty) then sums exp(-inf) = 0 terms and one holding +inf sums an inf, so the
    # result is -inf or inf, as NumPy's logaddexp.reduce; shifting by the peak itself would
    # make -inf - -inf or inf - inf, NaN. Where the peak is -inf the total gets 1, so that
    # log(1) + -inf is taken there, not log(0), whose divide by zero NumPy would print (no
    # other target does).
    lowest = equal(peak, -np.inf)
    shift = where(less(abs(peak), np.inf), peak, 0.0)
    total = sum(exp(a - shift), axes, keepdims=True) + cast(lowest, a.dtype)
    out = log(total) + where(lowest, peak, shift)
    if keepdims:
        return out
    return squeeze(out, tuple(range(a.ndim)) if axes is None else axes)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norm of x over `axis` (None: all elements): ord None or 2, sqrt(sum(x^2)) (the
    Frobenius norm of a matrix); 1, sum(|x|); inf, max(|x|). Gradient NaN at 0 for ord 2.

    Example::

        >>> ug.norm([3.0, 4.0])
        5.0
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "norm")
    if ord in (None, 2):
        return sqrt(sum(a * a, axes, keepdims))
    if ord == 1:
        return sum(abs(a), axes, keepdims)
    if ord == np.inf:
        return max(abs(a), axes, keepdims)
    raise ValueError(f"norm: ord={ord!r} at {user_source()}; use None, 1, 2 or inf")
