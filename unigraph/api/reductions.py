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
    _promote,
    _record_doc,
    promote_for,
    ready_dtypes,
    unchanged,
)
from unigraph.api.shapes import reshape
from unigraph.dispatch import apply
from unigraph.dtypes import is_float
from unigraph.tensor import Parameter, Tensor

_PLAIN = (Tensor, Parameter)  # never a WeakTensor: it promotes like a Python number


def _reduction(op: str):
    """`ug.<op>(x, axis=None, keepdims=False)`: x promoted as the record says, axes sorted
    and checked; `axis=()` reduces nothing and returns x itself (no node: a record never
    sees an empty axis tuple, so no backend has to read one)."""

    ready = ready_dtypes(op)

    def function(x, axis=None, keepdims=False):
        if axis is None and type(x) in _PLAIN and x.dtype in ready:  # `loss.mean()`: as is
            return apply(op, [x], {"axis": None, "keepdims": bool(keepdims)})
        (a,) = promote_for(op, x)
        ndim = len(np.shape(a)) if not isinstance(a, Tensor) else a.ndim
        axes = _axes(axis, ndim, op)
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


def argmax(x, axis=-1, keepdims=False):
    """Index of the first maximum along `axis` (int64)."""
    (a,) = _promote(x)
    return apply("argmax", [a], {"axis": _axis(axis, a.ndim, "argmax"),
                                 "keepdims": bool(keepdims)})


def argmin(x, axis=-1, keepdims=False):
    """Index (int64) of the first minimum along `axis`; a NaN counts as the minimum, as
    NumPy. `argmax` of the order-reversed x: -x for floats, -x - 1 for ints (no overflow).

    Example::

        >>> ug.argmin([[3.0, 1.0, 1.0], [0.0, 2.0, 5.0]], axis=1)
        [1, 0]
    """
    (a,) = _promote(x)
    if a.dtype == "bool":
        a = cast(a, "int32")
    return argmax(-a if is_float(a.dtype) else -a - 1, axis, keepdims)


def cumsum(x, axis=None):
    """Running sum along `axis` (None: over the flattened x, as NumPy).

    Example::

        >>> ug.cumsum([[1, 2], [3, 4]], axis=1)
        [[1, 3], [3, 7]]
    """
    (a,) = _promote(x)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    return apply("cumsum", [a], {"axis": _axis(axis, a.ndim, "cumsum")})


cumsum.__doc__ = _record_doc("cumsum", "`axis` None: over the flattened x, as NumPy.")


_docs_from_records(argmax)
