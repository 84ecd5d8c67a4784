"""Elementwise ops (`ug.add`, `ug.exp`, `ug.where`, `ug.cast`, ...): operands promoted,
then the op record.
"""

from __future__ import annotations

from unigraph.api.creation import full_like
from unigraph.api.operands import (
    _KEEPS_FLOAT,
    _KEEPS_INT,
    _docs_from_records,
    _promote,
    _record_doc,
    _scalar,
    _tensor_or_array,
    promote_for,
    ready_dtypes,
)
from unigraph.dispatch import apply, apply_simple, eager_binary, eager_simple
from unigraph.dtypes import as_dtype, is_float
from unigraph.tensor import Parameter, Tensor
from unigraph.tracing import _builder, open_builders

# The operand types of the wrappers' fast paths: a Parameter (a layer's weight, the
# optimizers' learning rate) is read as it is, like a Tensor (never a WeakTensor).
_PLAIN = (Tensor, Parameter)


def _binary(op: str, policy: str | None = None):
    """`ug.<op>(x, y)`: the operands promoted as the record says, then the op."""

    ready = ready_dtypes(op, policy)

    def function(x, y, keep=None):
        # (`keep`: this op's plans in `eager_binary`, which calls this on every other call)
        # Fast paths, the same operands `promote_for` gives: two tensors of one dtype the op
        # takes as they are, or a tensor and a Python number that keeps its dtype (made a
        # scalar of it by `eager_simple`, which resolves the backend once for both). (No
        # trace open anywhere, `open_builders` empty: no ContextVar to read, ~0.85 k
        # instructions less an op.)
        if type(x) in _PLAIN and x.dtype in ready:
            if type(y) in _PLAIN and x.dtype == y.dtype:
                if not open_builders or _builder.get() is None:
                    return eager_simple(op, x, y, False, keep)
                return apply_simple(op, x, y)
            # `weak_scalar`, inline (a Python call less in every `x + 1`).
            if (x.dtype in _KEEPS_INT) if type(y) is int else \
                    (type(y) is float and x.dtype in _KEEPS_FLOAT):
                if not open_builders or _builder.get() is None:
                    return eager_simple(op, x, y, True, keep)
                return apply_simple(op, x, _scalar(y, x.dtype))
        elif type(y) in _PLAIN and y.dtype in ready and (
                (y.dtype in _KEEPS_INT) if type(x) is int
                else (type(x) is float and y.dtype in _KEEPS_FLOAT)):
            if not open_builders or _builder.get() is None:
                return eager_simple(op, x, y, True)
            return apply_simple(op, _scalar(x, y.dtype), y)
        return apply(op, promote_for(op, x, y, policy=policy), {})

    function = eager_binary(op, function)  # the eager fast path in front
    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op, "Operands broadcast and promote as in NumPy.")
    return function


def _unary(op: str, policy: str | None = None):
    """`ug.<op>(x)`: x promoted as the record says, then the op."""

    ready = ready_dtypes(op, policy)

    def function(x):
        if type(x) in _PLAIN and x.dtype in ready:  # nothing to promote
            if not open_builders or _builder.get() is None:
                return eager_simple(op, x)
            return apply_simple(op, x)
        return apply(op, promote_for(op, x, policy=policy), {})

    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op)
    return function


# One line per op: the record (unigraph/ops/) says how operands promote and what the doc is.
add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
pow = _binary("pow")
mod = _binary("mod")
floor_divide = _binary("floor_divide")
atan2 = _binary("atan2")
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")

neg = _unary("neg")
abs = _unary("abs")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
# NumPy's floor of an int array is a float array: ints become float64 here too.
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
erf = _unary("erf")
log1p = _unary("log1p")
expm1 = _unary("expm1")
softplus = _unary("softplus")
stop_gradient = _unary("stop_gradient")
logical_not = _unary("logical_not")
relu = _unary("relu")
# Float-only records in ops/nn.py, which does not set `promote="float"` yet.
sigmoid = _unary("sigmoid", policy="float")
tanh = _unary("tanh", policy="float")


def _float_test(op: str, for_others: bool):
    """`ug.<op>(x)` (isnan, isinf, isfinite): the record for a floating x; an int or bool x
    holds no NaN or infinity, so the answer is `for_others` everywhere, as NumPy's (a
    `full_like` of x's shape: no cast to float, no op that a framework lacks for ints)."""

    test = _unary(op)

    def function(x):
        (a,) = _promote(x)
        if is_float(str(a.dtype)):
            return test(a)
        return full_like(a, for_others, "bool")

    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op, "An int or bool x gives "
                                   f"{'all True' if for_others else 'all False'}, as NumPy.")
    return function


isnan = _float_test("isnan", False)
isinf = _float_test("isinf", False)
isfinite = _float_test("isfinite", True)


def where(condition, x, y):
    """`x` where `condition` is true, else `y` (broadcast)."""
    (c,) = _promote(condition)
    a, b = _promote(x, y)
    return apply("where", [c, a, b], {})


def cast(x, dtype):
    """`x` converted to `dtype` (NumPy's `astype`)."""
    dtype = as_dtype(dtype)
    return apply("cast", [_tensor_or_array(x)], {"dtype": dtype})


_docs_from_records(where, cast)
