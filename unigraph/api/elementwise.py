"""Elementwise ops (`ug.add`, `ug.exp`, `ug.where`, `ug.cast`, ...): operands promoted,
then the op record.
"""

from __future__ import annotations

from unigraph.api.operands import (
    _docs_from_records,
    _promote,
    _record_doc,
    _tensor_or_array,
)
from unigraph.dispatch import apply
from unigraph.dtypes import as_dtype


def _binary(op: str, to_float=False):
    def function(x, y):
        a, b = _promote(x, y, to_float=to_float)
        return apply(op, [a, b], {})

    function.__name__ = op
    function.__doc__ = _record_doc(op, "Operands broadcast and promote as in NumPy.")
    return function


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div", to_float=True)
pow = _binary("pow", to_float=True)
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")


def logical_and(x, y):
    return apply("logical_and", _promote(x, y), {})


def logical_or(x, y):
    return apply("logical_or", _promote(x, y), {})


def _unary(op: str, to_float=False):
    def function(x):
        (a,) = _promote(x, to_float=to_float)
        return apply(op, [a], {})

    function.__name__ = op
    function.__doc__ = _record_doc(op)
    return function


neg = _unary("neg")
abs = _unary("abs")
exp = _unary("exp", to_float=True)
log = _unary("log", to_float=True)
sqrt = _unary("sqrt", to_float=True)
mod = _binary("mod")
floor_divide = _binary("floor_divide")
atan2 = _binary("atan2", to_float=True)
# NumPy's floor of an int array is a float array: ints become float64 here too.
floor = _unary("floor", to_float=True)
ceil = _unary("ceil", to_float=True)
round = _unary("round", to_float=True)
sin = _unary("sin", to_float=True)
cos = _unary("cos", to_float=True)
tan = _unary("tan", to_float=True)
asin = _unary("asin", to_float=True)
acos = _unary("acos", to_float=True)
atan = _unary("atan", to_float=True)
sinh = _unary("sinh", to_float=True)
cosh = _unary("cosh", to_float=True)
erf = _unary("erf", to_float=True)
softplus = _unary("softplus", to_float=True)
logical_not = _unary("logical_not")
relu = _unary("relu")
sigmoid = _unary("sigmoid", to_float=True)
tanh = _unary("tanh", to_float=True)


def where(condition, x, y):
    """`x` where `condition` is true, else `y` (broadcast)."""
    (c,) = _promote(condition)
    a, b = _promote(x, y)
    return apply("where", [c, a, b], {})


def cast(x, dtype):
    """`x` converted to `dtype` (NumPy's `astype`)."""
    dtype = as_dtype(dtype)
    return apply("cast", [_tensor_or_array(x)], {"dtype": dtype})


_docs_from_records(logical_and, logical_or, where, cast, relu, sigmoid, tanh)
