"""ONNX emitters for the math op records (rounding, floor division and modulo, trigonometry,
erf, softplus, log1p, expm1), prod, cumsum, einsum, full and full_like;
`unigraph.onnx.emitters.EMITTERS` spreads `MATH_EMITTERS` into its table.

ONNX Runtime (1.32) has no float64 kernel for Tan, Asin, Acos, Atan, Sinh, Cosh and Erf, so
float64 takes a composition of ops that have one (still ONNX ops, still float64 throughout):

* tan = sin / cos; sinh and cosh from exp (a short series where exp(x) - exp(-x) cancels);
* atan: float32 Atan as a seed, then one Newton step in float64 (|x| > 1 through
  pi/2 - atan(1/x), where Newton converges fastest); asin and acos through atan;
* erf: its series 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!! (every term positive: no
  cancellation) below |x| = 4, 1 - the asymptotic erfc above.

ONNX Runtime's float16 Softplus overflows above 88 (its exp is float32) and its float64
Softplus is log(1 + exp(x)) as written (inf above 709, no digits below -37): float16 runs the
float32 kernel, rounded once; float64 is max(x, 0) + log1p(exp(-|x|)), with log1p's
emitter below.

A -0.0 that a result must keep goes in Where's second slot (Y): ONNX Runtime's Where returns
+0.0 where it takes a -0.0 from its first (X), and its graph optimiser rewrites
Where(Not(c), a, b) as Where(c, b, a), so such a condition is written as the comparison
itself, never as a Not.

ONNX has no Log1p or Expm1: they are Goldberg's and Kahan's corrected quotients of Log
and Exp (accurate near 0, where log(1 + x) and exp(x) - 1 lose every digit).

ONNX's Mod takes floats only as C's fmod (fmod=1), and integer ReduceProd (and ReduceSum)
saturate where NumPy's integer arithmetic wraps: see the entries and
`unigraph.onnx.integer_reductions`.
"""

from __future__ import annotations

import math

import numpy as np

from unigraph.onnx.integer_reductions import wrapping_prod

# ONNX Runtime's CPU kernels for these ops have no float64 (checked: 1.32).
NO_FLOAT64_KERNEL = ("tan", "asin", "acos", "atan", "sinh", "cosh", "erf")
ERF_SERIES_TERMS = 60  # the series' terms at |x| = 4 fall below 1e-17 of its sum by then
ERF_SERIES_LIMIT = 4.0  # above: erfc(x) < 1.6e-8, so 4 asymptotic terms are exact to 1e-12


def _dtype(node, index: int = 0) -> str:
    return node.inputs[index].dtype


def _c(w, value, dtype: str) -> str:
    return w.const(np.array(value, dtype))


def _unary(op_type: str, float64_route):
    """One ONNX node, except in float64, where `float64_route(w, x)` writes the op."""

    def emit(w, args, node):
        if _dtype(node) == "float64":
            return float64_route(w, args[0])
        return w.node(op_type, args)

    return emit


def _bool(w, name: str, dtype: str) -> str:
    return w.node("Cast", [name], to=w.onnx_dtype(dtype))


# -- float64 compositions ------------------------------------------------------------------------
def _tan64(w, x):
    return w.node("Div", [w.node("Sin", [x]), w.node("Cos", [x])])


def _sinh64(w, x):
    # (exp(x) - exp(-x)) / 2 loses digits to cancellation near 0: there x + x^3/6 + x^5/120
    # (the next term, x^7/5040, is below 1e-17 of x for |x| < 0.01).
    half = _c(w, 0.5, "float64")
    wide = w.node("Mul", [w.node("Sub", [w.node("Exp", [x]), w.node("Exp", [w.node("Neg", [x])])]),
                          half])
    square = w.node("Mul", [x, x])
    inner = w.node("Add", [_c(w, 1 / 6, "float64"),
                           w.node("Mul", [square, _c(w, 1 / 120, "float64")])])
    series = w.node("Add", [x, w.node("Mul", [x, w.node("Mul", [square, inner])])])
    # The series (sinh(-0.0) = -0.0) in Where's second slot (module docstring).
    large = w.node("GreaterOrEqual", [w.node("Abs", [x]), _c(w, 0.01, "float64")])
    return w.node("Where", [large, wide, series])


def _cosh64(w, x):
    both = w.node("Add", [w.node("Exp", [x]), w.node("Exp", [w.node("Neg", [x])])])
    return w.node("Mul", [both, _c(w, 0.5, "float64")])


def _atan_newton(w, t):
    """atan(t) for |t| <= 1 in float64: float32 Atan, then one Newton step on tan(y) = t
    (y -= cos(y) * (sin(y) - t cos(y))): the float32 error e becomes about e^2."""
    seed = w.node("Cast", [w.node("Atan", [w.node("Cast", [t], to=w.onnx_dtype("float32"))])],
                  to=w.onnx_dtype("float64"))
    cos = w.node("Cos", [seed])
    residual = w.node("Sub", [w.node("Sin", [seed]), w.node("Mul", [t, cos])])
    return w.node("Sub", [seed, w.node("Mul", [cos, residual])])


def _atan64(w, x):
    outside = w.node("Greater", [w.node("Abs", [x]), _c(w, 1.0, "float64")])
    inverse = w.node("Div", [_c(w, 1.0, "float64"), x])  # read only where |x| > 1
    inner = _atan_newton(w, w.node("Where", [outside, inverse, x]))
    quarter_turn = w.node("Mul", [w.node("Sign", [x]), _c(w, math.pi / 2, "float64")])
    return w.node("Where", [outside, w.node("Sub", [quarter_turn, inner]), inner])


def _atan_any(w, x: str, dtype: str) -> str:
    return _atan64(w, x) if dtype == "float64" else w.node("Atan", [x])


def _asin64(w, x):
    # asin(x) = atan(x / sqrt((1 - x)(1 + x))): NaN outside [-1, 1], pi/2 at 1 (atan(inf)).
    one = _c(w, 1.0, "float64")
    root = w.node("Sqrt", [w.node("Mul", [w.node("Sub", [one, x]), w.node("Add", [one, x])])])
    return _atan64(w, w.node("Div", [x, root]))


def _acos64(w, x):
    # acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near 1, pi at -1.
    one = _c(w, 1.0, "float64")
    ratio = w.node("Div", [w.node("Sub", [one, x]), w.node("Add", [one, x])])
    return w.node("Mul", [_c(w, 2.0, "float64"), _atan64(w, w.node("Sqrt", [ratio]))])


def _erf64(w, x):
    dtype = "float64"
    limit = _c(w, ERF_SERIES_LIMIT, dtype)
    near = w.node("Min", [w.node("Max", [x, w.node("Neg", [limit])]), limit])
    twice_square = w.node("Mul", [_c(w, 2.0, dtype), w.node("Mul", [near, near])])
    total = _c(w, 1.0, dtype)  # Horner: 1 + t/3 (1 + t/5 (1 + ...)), t = 2x^2
    for n in range(ERF_SERIES_TERMS, 0, -1):
        step = w.node("Mul", [twice_square, _c(w, 1.0 / (2 * n + 1), dtype)])
        total = w.node("Add", [_c(w, 1.0, dtype), w.node("Mul", [total, step])])
    gauss = w.node("Exp", [w.node("Neg", [w.node("Mul", [near, near])])])
    series = w.node("Mul", [w.node("Mul", [near, gauss]),
                            w.node("Mul", [total, _c(w, 2 / math.sqrt(math.pi), dtype)])])
    # erfc(|x|) ~ exp(-x^2) / (|x| sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6))
    size = w.node("Abs", [x])
    inverse = w.node("Div", [_c(w, 1.0, dtype), w.node("Mul", [size, size])])
    bracket = _c(w, -15 / 8, dtype)
    for coefficient in (3 / 4, -1 / 2, 1.0):
        bracket = w.node("Add", [_c(w, coefficient, dtype), w.node("Mul", [bracket, inverse])])
    tail = w.node("Div", [w.node("Exp", [w.node("Neg", [w.node("Mul", [size, size])])]),
                          w.node("Mul", [size, _c(w, math.sqrt(math.pi), dtype)])])
    far = w.node("Mul", [w.node("Sign", [x]),
                         w.node("Sub", [_c(w, 1.0, dtype), w.node("Mul", [tail, bracket])])])
    # The series (erf(-0.0) = -0.0) in Where's second slot (module docstring); NaN is
    # not outside, and the series keeps it (ORT's Max and Min propagate NaN).
    outside = w.node("GreaterOrEqual", [size, limit])
    return w.node("Where", [outside, far, series])


def _softplus64(w, x):
    # max(x, 0) + log1p(exp(-|x|)): exp never overflows, and log1p keeps exp(-40)'s digits.
    tail = _log1p_of(w, w.node("Exp", [w.node("Neg", [w.node("Abs", [x])])]), "float64")
    return w.node("Add", [w.node("Relu", [x]), tail])


def _softplus(w, args, node):
    dtype = _dtype(node)
    if dtype == "float64":
        return _softplus64(w, args[0])
    if dtype == "float16":
        wide = w.node("Softplus", [w.node("Cast", args, to=w.onnx_dtype("float32"))])
        return w.node("Cast", [wide], to=w.onnx_dtype("float16"))
    return w.node("Softplus", args)


# -- division ------------------------------------------------------------------------------------
def _mod_parts(w, x: str, y: str, dtype: str):
    """(floor-semantics remainder, bool 'the truncated remainder was moved')."""
    truncated = w.node("Mod", [x, y], fmod=1)  # C's fmod: the sign of x
    zero = _c(w, 0, dtype)
    signs_differ = w.node("Xor", [w.node("Less", [truncated, zero]), w.node("Less", [y, zero])])
    moved = w.node("And", [w.node("Not", [w.node("Equal", [truncated, zero])]), signs_differ])
    return w.node("Where", [moved, w.node("Add", [truncated, y]), truncated]), truncated, moved


def _mod(w, args, node):
    if _dtype(node) in ("int32", "int64"):
        return w.node("Mod", args, fmod=0)  # integer Mod takes the divisor's sign already
    # ONNX refuses fmod=0 on floats (before opset 28): C's fmod, moved by y where the signs
    # differ, as NumPy does.
    return _mod_parts(w, *args, _dtype(node))[0]


def _floor_divide(w, args, node):
    x, y = args
    dtype = _dtype(node)
    _, truncated, moved = _mod_parts(w, x, y, dtype)
    if dtype in ("int32", "int64"):  # Div truncates toward 0: one less where it moved
        # ONNX Runtime's integer Div kills the process (SIGFPE) for the smallest int
        # divided by -1: a divisor -1 is 1 there and the quotient negated (wraps, as NumPy).
        minus_one = _bool(w, w.node("Equal", [y, _c(w, -1, dtype)]), dtype)
        two = _c(w, 2, dtype)
        safe = w.node("Add", [y, w.node("Mul", [minus_one, two])])
        sign = w.node("Sub", [_c(w, 1, dtype), w.node("Mul", [minus_one, two])])
        quotient = w.node("Mul", [w.node("Div", [x, safe]), sign])
        return w.node("Sub", [quotient, _bool(w, moved, dtype)])
    # NumPy's float rule: (x - fmod(x, y)) / y, one less where the remainder moved, then
    # rounded to the nearest integer (the quotient is an integer up to rounding).
    quotient = w.node("Div", [w.node("Sub", [x, truncated]), y])
    quotient = w.node("Sub", [quotient, _bool(w, moved, dtype)])
    floor = w.node("Floor", [quotient])
    up = w.node("Greater", [w.node("Sub", [quotient, floor]), _c(w, 0.5, dtype)])
    rounded = w.node("Add", [floor, _bool(w, up, dtype)])
    # A zero quotient has the sign of x / y, as NumPy's (0 // -1 is -0.0); the Add above
    # made it +0.0. It goes in Where's second slot (module docstring); a NaN quotient
    # takes it too, and (x / y) * 0 is NaN there.
    signed_zero = w.node("Mul", [w.node("Div", args), _c(w, 0, dtype)])
    nonzero = w.node("Greater", [w.node("Abs", [quotient]), _c(w, 0, dtype)])
    rounded = w.node("Where", [nonzero, rounded, signed_zero])
    # By zero: x / 0 (+-inf, NaN for 0 / 0), as NumPy; the route above gives NaN throughout.
    by_zero = w.node("Equal", [y, _c(w, 0, dtype)])
    return w.node("Where", [by_zero, w.node("Div", args), rounded])


def _sign_is(w, compare: str, x: str, dtype: str) -> str:
    """bool: x compares with 0 as `compare` ("Less" or "Greater"), -0.0 counting as below
    and +0.0 as above (1 / -0.0 is -inf); False for NaN."""
    zero = _c(w, 0, dtype)
    reciprocal = w.node("Div", [_c(w, 1, dtype), x])
    return w.node("Or", [w.node(compare, [x, zero]), w.node(compare, [reciprocal, zero])])


def _atan2(w, args, node):
    # NumPy's atan2 (C's), special values included: the angle of (|x|, |y|) in [0, pi/2],
    # mirrored to pi - angle where x < 0 or x is -0.0, then given the sign of y (-0.0 too).
    y, x = args
    dtype = _dtype(node)
    zero, inf = _c(w, 0, dtype), _c(w, np.inf, dtype)
    height, width = w.node("Abs", [y]), w.node("Abs", [x])
    angle = _atan_any(w, w.node("Div", [height, width]), dtype)  # x = 0: atan(inf) = pi/2
    # inf / inf and 0 / 0 are NaN: those angles are pi/4 and 0.
    both_infinite = w.node("And", [w.node("Equal", [height, inf]), w.node("Equal", [width, inf])])
    angle = w.node("Where", [both_infinite, _c(w, math.pi / 4, dtype), angle])
    angle = w.node("Where", [w.node("Equal", [height, zero]), zero, angle])
    mirrored = w.node("Sub", [_c(w, math.pi, dtype), angle])
    angle = w.node("Where", [_sign_is(w, "Less", x, dtype), mirrored, angle])
    # The negated angle (-0.0 at y = -0.0) in Where's second slot (module docstring).
    signed = w.node("Where", [_sign_is(w, "Greater", y, dtype), angle,
                              w.node("Neg", [angle])])
    either_nan = w.node("Or", [w.node("IsNaN", [x]), w.node("IsNaN", [y])])
    return w.node("Where", [either_nan, w.node("Add", [x, y]), signed])


# -- reductions, scans, contractions, creation -------------------------------------------------
def _prod(w, args, node):
    from unigraph.onnx.emitters import _reduce

    axis, keepdims, dtype = node.attrs["axis"], node.attrs["keepdims"], _dtype(node)
    if dtype in ("int32", "int64"):  # ORT's integer ReduceProd saturates
        return wrapping_prod(w, args[0], axis, keepdims, len(node.inputs[0].shape), dtype)
    return _reduce(w, "ReduceProd", args[0], axis, keepdims)


def _cumsum(w, args, node):
    return w.node("CumSum", [args[0], w.const(np.array(node.attrs["axis"], np.int64))])


def _einsum(w, args, node):
    return w.node("Einsum", args, equation=node.attrs["equation"])


def _full(w, args, node):
    from onnx import numpy_helper

    attrs = node.attrs
    shape = w.const(np.asarray(attrs["shape"], np.int64).reshape(-1))
    fill = numpy_helper.from_array(np.full((1,), attrs["value"], attrs["dtype"]), w.fresh("c"))
    return w.node("ConstantOfShape", [shape], value=fill)


def _full_like(w, args, node):
    from onnx import numpy_helper

    attrs = node.attrs
    fill = numpy_helper.from_array(np.full((1,), attrs["value"], attrs["dtype"]), w.fresh("c"))
    return w.node("ConstantOfShape", [w.node("Shape", args)], value=fill)


def _op(op_type: str):
    return lambda w, args, node: w.node(op_type, args)


def _in_float32(route):
    """`route(w, x, dtype)` run in float32 for a float16 x and rounded back once: its
    correction terms need every step rounded the same way, and ORT computes some float16
    ops in float32 (see quirk "isinf")."""

    def emit(w, args, node):
        dtype = _dtype(node)
        if dtype != "float16":
            return route(w, args[0], dtype)
        wide = w.node("Cast", args, to=w.onnx_dtype("float32"))
        return w.node("Cast", [route(w, wide, "float32")], to=w.onnx_dtype("float16"))

    return emit


# Both below end in x * factor, the factor picked by Where among positive values: ORT's Where
# gives +0.0 where it picks a -0.0 beside a nonzero value (quirk "where (atan2, ...)"),
# so x's own zero (-0.0 too) comes out of the product: NumPy's log1p(-0.0) is -0.0.
def _log1p_of(w, x, dtype):
    # ONNX has no Log1p. Goldberg's log1p: u = 1 + x rounded, then x * log(u) / (u - 1),
    # whose quotient corrects u's rounding; the factor is 1 where u == 1 (x itself) and at
    # u = +inf (x = +inf; inf / inf would be NaN). x = -1 gives -1 * inf, -inf.
    one = _c(w, 1.0, dtype)
    u = w.node("Add", [one, x])
    ratio = w.node("Div", [w.node("Log", [u]), w.node("Sub", [u, one])])
    exact = w.node("Or", [w.node("Equal", [u, one]),
                          w.node("IsInf", [u], detect_negative=0)])
    return w.node("Mul", [x, w.node("Where", [exact, one, ratio])])


_log1p = _in_float32(_log1p_of)


# Below this, expm1 is -1 in float64 (exp(-40) = 4e-18 is under half an ulp of 1), and the
# formula's exp and log stay normal numbers in float32.
EXPM1_FLOOR = -40.0


@_in_float32
def _expm1(w, x, dtype):
    # ONNX has no Expm1. Kahan's expm1: u = exp(x), then x * (u - 1) / log(u); the factor is
    # 1 where u == 1 (x itself), u itself where u overflows (x * inf = inf). x is floored at
    # EXPM1_FLOOR first (Max keeps a NaN), so -inf gives -1, not -inf * 0.
    one = _c(w, 1.0, dtype)
    floored = w.node("Max", [x, _c(w, EXPM1_FLOOR, dtype)])
    u = w.node("Exp", [floored])
    ratio = w.node("Div", [w.node("Sub", [u, one]), w.node("Log", [u])])
    factor = w.node("Where", [w.node("IsInf", [u]), u, ratio])
    factor = w.node("Where", [w.node("Equal", [u, one]), one, factor])
    return w.node("Mul", [floored, factor])


MATH_EMITTERS = {
    "floor": _op("Floor"),
    "ceil": _op("Ceil"),
    "round": _op("Round"),  # halves to even, as NumPy
    "mod": _mod,
    "floor_divide": _floor_divide,
    "atan2": _atan2,
    "sin": _op("Sin"),
    "cos": _op("Cos"),
    "tan": _unary("Tan", _tan64),
    "asin": _unary("Asin", _asin64),
    "acos": _unary("Acos", _acos64),
    "atan": _unary("Atan", _atan64),
    "sinh": _unary("Sinh", _sinh64),
    "cosh": _unary("Cosh", _cosh64),
    "erf": _unary("Erf", _erf64),
    "softplus": _softplus,
    "log1p": _log1p,
    "expm1": _expm1,
    "prod": _prod,
    "cumsum": _cumsum,
    "einsum": _einsum,
    "full": _full,
    "full_like": _full_like,
}
