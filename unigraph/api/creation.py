"""Tensor creation: constant, full, zeros, ones, *_like, arange, linspace, eye.
"""

from __future__ import annotations

import numpy as np

from unigraph.api.operands import (
    _record_doc,
    _tensor_or_array,
)
from unigraph.dispatch import apply
from unigraph.dtypes import as_dtype, is_int
from unigraph.tensor import Tensor
from unigraph.tracing import _builder


def constant(value, dtype=None) -> Tensor:
    """A constant tensor (a `constant` node when tracing).

    >>> ug.constant([[1, 2], [3, 4]], "float32")
    """
    from unigraph.tensor import tensor

    return tensor(value, dtype)


def _default_dtype(value) -> str:
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int64"
    return "float32"


def full(shape, value, dtype=None):
    """A tensor of `shape` filled with `value`.

    Example::

        >>> ug.full((2, 2), 7)
        [[7, 7], [7, 7]]
    """
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(d) for d in shape)
    dtype = as_dtype(dtype) if dtype is not None else _default_dtype(value)
    # The value as the Python number of the dtype (`full(..., 1.5, "int32")` fills 1).
    value = np.asarray(value).astype(dtype).item()
    return apply("full", [], {"shape": shape, "value": value, "dtype": dtype})


full.__doc__ = _record_doc("full")


def zeros(shape, dtype="float32"):
    """A tensor of zeros (`ug.full(shape, 0, dtype)`).

    Example::

        >>> ug.zeros((2,))
        [0.0, 0.0]
    """
    return full(shape, 0, dtype)


def ones(shape, dtype="float32"):
    """A tensor of ones (`ug.full(shape, 1, dtype)`).

    Example::

        >>> ug.ones((2,), "int32")
        [1, 1]
    """
    return full(shape, 1, dtype)


def full_like(x, value, dtype=None):
    """A tensor of x's shape (a dim left open by input_spec too) and dtype (or `dtype`)
    filled with `value`.

    Example::

        >>> ug.full_like(ug.tensor([1.0, 2.0]), 3)
        [3.0, 3.0]
    """
    return _like(x, value, dtype)


def zeros_like(x, dtype=None):
    """Zeros of x's shape and dtype (or `dtype`): `ug.full_like(x, 0, dtype)`."""
    return _like(x, 0, dtype)


def ones_like(x, dtype=None):
    """Ones of x's shape and dtype (or `dtype`): `ug.full_like(x, 1, dtype)`."""
    return _like(x, 1, dtype)


def _like(x, value, dtype):
    x = _tensor_or_array(x)
    own = x.dtype if isinstance(x, Tensor) else x.dtype.name
    if None not in x.shape:
        return full(x.shape, value, own if dtype is None else dtype)
    # A dim known only at run time: the framework reads x's shape when the program runs.
    dtype = as_dtype(own if dtype is None else dtype)
    value = np.asarray(value).astype(dtype).item()
    return apply("full_like", [x], {"value": value, "dtype": dtype})


def _constant_node(array: np.ndarray) -> Tensor:
    """A computed constant: a `constant` node when tracing, an eager tensor otherwise."""
    if _builder.get() is not None:
        return apply("constant", [], {"value": array})
    from unigraph.tensor import tensor

    return tensor(array)


def arange(start, stop=None, step=1, dtype=None):
    """start, start + step, ... below stop, as NumPy's arange (one argument: 0 to it). The
    dtype is int64 for ints, float32 if any bound is a float, or `dtype`; the values are
    computed in float64 and rounded once. A `constant`.

    Example::

        >>> ug.arange(1, 7, 2)
        [1, 3, 5]
    """
    if stop is None:
        start, stop = 0, start
    bounds = (start, stop, step)
    if dtype is None:
        dtype = "int64" if all(isinstance(b, int | np.integer) for b in bounds) else "float32"
    dtype = as_dtype(dtype)
    wide = "int64" if is_int(dtype) else "float64"
    return _constant_node(np.arange(start, stop, step, dtype=wide).astype(dtype))


def linspace(start, stop, num=50, endpoint=True, dtype="float32"):
    """`num` evenly spaced values from start to stop (included unless endpoint=False), as
    NumPy's linspace, computed in float64 and rounded once to `dtype`. A `constant`.

    Example::

        >>> ug.linspace(0.0, 1.0, 5)
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    values = np.linspace(start, stop, int(num), endpoint=endpoint)
    return _constant_node(values.astype(as_dtype(dtype)))


def eye(n, m=None, k=0, dtype="float32"):
    """The n x m identity (ones on diagonal k), as NumPy's eye. A `constant`.

    Example::

        >>> ug.eye(2)
        [[1.0, 0.0], [0.0, 1.0]]
    """
    return _constant_node(np.eye(int(n), None if m is None else int(m), int(k),
                                 dtype=as_dtype(dtype)))
