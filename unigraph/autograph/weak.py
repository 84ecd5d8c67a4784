"""Weakly typed tensors: values that promote like the Python numbers they stand for.

Converted code runs the same program eagerly and traced. Eagerly, a counter `k = 0`
carried through a loop stays a Python int, and `x * k` keeps `x`'s float32 (Python numbers
are weak: NumPy 2's NEP 50 rule, `unigraph.dtypes`). Traced into a `while_loop`, the same
`k` must be a tensor, and an int64 tensor times a float32 one is float64: the two modes would
compute in different dtypes, or the static one would fail. A `WeakTensor` is a tensor that
keeps the Python number's rule in operators:

    i = weak(ug.tensor(3))      # int64, weak
    x * i                       # float32 for a float32 x, as `x * 3`
    i + 1, i * 2, -i            # still weak int64
    i / 2                       # weak float64: `x * (i / 2)` is float32 too

Operators with any ordinary (strong) tensor or array give an ordinary tensor; operators
among weak values and Python numbers give a weak one. `ug.*` functions see an ordinary
tensor of the weak one's dtype (cast it where that matters: `ug.cast(i, x.dtype)`).

The loop index of `for i in ug.range(n)` with a tensor `n` is weak in every mode, and so is
a Python number carried through a tensor `if`/`while` (see `runtime`).
"""

from __future__ import annotations

import numpy as np

from unigraph import api
from unigraph.dtypes import result_dtype
from unigraph.tensor import Tensor

__all__ = ["WeakTensor", "is_weak", "strong", "weak"]

_SCALARS = (bool, int, float)
_SLOTS = tuple(slot for cls in Tensor.__mro__ for slot in getattr(cls, "__slots__", ()))
# The Python number each kind of dtype stands for, for `result_dtype`'s weak operands.
_PYTHON_KIND = {"b": True, "i": 1, "u": 1, "f": 1.0}


class WeakTensor(Tensor):
    """A tensor whose operators promote it like a Python number (see the module docstring).

    >>> x * weak(ug.tensor(2))     # x's dtype, whatever it is
    """

    __slots__ = ()
    __hash__ = Tensor.__hash__

    def __repr__(self):
        return "Weak" + super().__repr__()

    def __add__(self, other):
        return _apply(api.add, self, other)

    def __radd__(self, other):
        return _apply(api.add, other, self)

    def __sub__(self, other):
        return _apply(api.sub, self, other)

    def __rsub__(self, other):
        return _apply(api.sub, other, self)

    def __mul__(self, other):
        return _apply(api.mul, self, other)

    def __rmul__(self, other):
        return _apply(api.mul, other, self)

    def __truediv__(self, other):
        return _apply(api.div, self, other)

    def __rtruediv__(self, other):
        return _apply(api.div, other, self)

    def __pow__(self, other):
        return _apply(api.pow, self, other)

    def __rpow__(self, other):
        return _apply(api.pow, other, self)

    def __lt__(self, other):
        return _apply(api.less, self, other)

    def __le__(self, other):
        return _apply(api.less_equal, self, other)

    def __gt__(self, other):
        return _apply(api.greater, self, other)

    def __ge__(self, other):
        return _apply(api.greater_equal, self, other)

    def __eq__(self, other):
        return _apply(api.equal, self, other)

    def __ne__(self, other):
        return _apply(api.not_equal, self, other)

    def __neg__(self):
        return weak(api.neg(strong(self)))

    def __abs__(self):
        return weak(api.abs(strong(self)))


def _copy(x: Tensor, cls) -> Tensor:
    out = object.__new__(cls)
    for slot in _SLOTS:
        try:
            setattr(out, slot, getattr(x, slot))
        except AttributeError:
            pass
    return out


def weak(x):
    """`x` (a Tensor) as a WeakTensor sharing its value; anything else unchanged."""
    if type(x) is Tensor:
        return _copy(x, WeakTensor)
    return x


def strong(x):
    """`x` as an ordinary Tensor (the same value, the same dtype); anything else unchanged."""
    if isinstance(x, WeakTensor):
        return _copy(x, Tensor)
    return x


def is_weak(x) -> bool:
    """Whether `x` promotes like a Python number: a Python number or a WeakTensor."""
    return isinstance(x, (*_SCALARS, WeakTensor))


def _apply(op, *operands):
    strong_dtypes, weak_dtypes, numbers = [], [], []
    for x in operands:
        if isinstance(x, WeakTensor):
            weak_dtypes.append(x.dtype)
        elif isinstance(x, Tensor):
            strong_dtypes.append(x.dtype)
        elif isinstance(x, np.ndarray | np.generic):
            strong_dtypes.append(np.dtype(x.dtype).name)
        elif isinstance(x, _SCALARS):
            numbers.append(x)
        else:
            return NotImplemented
    if strong_dtypes:
        kinds = [_PYTHON_KIND[np.dtype(d).kind] for d in weak_dtypes]
        dtype = result_dtype(strong_dtypes, kinds + numbers)
        return op(*[_as_number(x) if _on_host(x) else _as(x, dtype) for x in operands])
    dtype = result_dtype(weak_dtypes, numbers)
    return weak(op(*[_as(x, dtype) for x in operands]))


def _on_host(x) -> bool:
    """An eager weak scalar whose value is already on the host (an eager loop index): it
    can stand in as the Python number it is, which costs no cast."""
    return isinstance(x, WeakTensor) and x._value is None and x._array is not None \
        and x.shape == ()


def _as_number(x):
    return x._array.item()


def _as(x, dtype: str):
    if not isinstance(x, WeakTensor):
        return x
    x = strong(x)
    return x if x.dtype == dtype else api.cast(x, dtype)
