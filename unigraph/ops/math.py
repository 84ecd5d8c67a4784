"""Elementwise math beyond arithmetic: rounding, floor division and modulo, trigonometry,
hyperbolic functions, log1p and expm1, erf and softplus.

Each is an op of one dtype, computed in that dtype, on the pattern of `elementwise.py`.
Rounding ops are step functions: their gradient is 0 (as torch, TF and Paddle give), not
"undefined".
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import FLOAT_DTYPES
from unigraph.ops._util import NUMERIC_DTYPES, normal, positive
from unigraph.ops.base import Sample
from unigraph.ops.elementwise import _binary, _binary_samples, _unary, _unary_samples


def _zero(g, x, out):
    return np.zeros_like(x)


def _fractional(rng, shape):
    """Values at least 0.1 away from every integer, so a step function is flat near each."""
    return rng.integers(-4, 4, shape) + rng.uniform(0.1, 0.9, shape)


def _rounding_samples(rng):
    return _unary_samples(_fractional)(rng)[:1] + [
        # Halves: NumPy rounds them to the even neighbour (0.5 -> 0, 1.5 -> 2, -2.5 -> -2).
        Sample((np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.25, -1.75]),), at_kink=True),
    ]


_unary(
    "floor", np.floor, _zero, "The largest integer <= x, for floats (a float result). "
    "Gradient 0.", _rounding_samples, allowed=FLOAT_DTYPES,
    example="ug.floor([1.5, -1.5, 2.0])  # [1.0, -2.0, 2.0]",
)
_unary(
    "ceil", np.ceil, _zero, "The smallest integer >= x, for floats (a float result). "
    "Gradient 0.", _rounding_samples, allowed=FLOAT_DTYPES,
    example="ug.ceil([1.5, -1.5, 2.0])  # [2.0, -1.0, 2.0]",
)
_unary(
    "round", np.round, _zero, "x rounded to the nearest integer, for floats; halves go to "
    "the even neighbour, as NumPy (0.5 -> 0, 1.5 -> 2). Gradient 0.",
    _rounding_samples, allowed=FLOAT_DTYPES,
    example="ug.round([0.5, 1.5, -2.5, 0.7])  # [0.0, 2.0, -2.0, 1.0]",
)


def _signed(rng, shape):
    """Dividends and divisors of both signs, |v| in [0.5, 4]: no division by ~0."""
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 4.0, shape)


def _division_samples(rng):
    ints = Sample((np.array([-7, 7, -7, 7, 0, 6]), np.array([2, 2, -2, -2, 3, 3])))
    return _binary_samples(_signed)(rng)[:2] + [ints]


def _mod_grads(g, x, y, out):
    # x mod y = x - floor(x / y) * y: the floor is flat, so d/dx = 1, d/dy = -floor(x / y).
    return g, -g * np.floor_divide(x, y)


_binary(
    "mod", np.mod, _mod_grads,
    "x mod y with the sign of y (floor semantics, as NumPy and Python's %): x - "
    "floor(x / y) * y. Ints and floats. Gradient 1 for x and -floor(x / y) for y. An integer "
    "y of 0 is an error on some backends; do not rely on its result. Not promised: the sign of "
    "a zero result (NumPy's is y's, the frameworks' +0.0), nor the result where x / y "
    "overflows the dtype (torch gives NaN for 3.4e38 mod 0.5 in float32).",
    _division_samples,
    example="ug.mod([-7, 7, 5], [2, 2, -3])  # [1, 1, -1]",
)
def _floor_divide(x, y):
    if x.dtype.kind in "iu":  # the smallest int // -1 wraps, silently (NumPy warns)
        with np.errstate(over="ignore"):
            return np.floor_divide(x, y)
    return np.floor_divide(x, y)


_binary(
    "floor_divide", _floor_divide, lambda g, x, y, out: (g * 0, g * 0),
    "floor(x / y), elementwise, as NumPy and Python's //: ints give ints, floats floats. A "
    "step function: gradient 0. Where x / y lies within rounding of an integer (1.0 // 0.1 "
    "is 9.0 in NumPy) backends may differ by one. The smallest int // -1 wraps to itself, "
    "as NumPy. An integer y of 0 is an error on some backends; do not rely on its result.",
    _division_samples, allowed=NUMERIC_DTYPES,
    example="ug.floor_divide([-7, 7, 5], [2, 2, -3])  # [-4, 3, -2]",
)


def _atan2_grads(g, y, x, out):
    # d/dy atan2(y, x) = x / (x^2 + y^2); d/dx = -y / (x^2 + y^2).
    r2 = x * x + y * y
    return g * x / r2, -g * y / r2


_binary(
    "atan2", np.arctan2, _atan2_grads,
    "The angle of the point (x, y), atan2(y, x) in [-pi, pi], for floats; the first argument "
    "is y. Gradient x / (x^2 + y^2) for y and -y / (x^2 + y^2) for x.",
    _binary_samples(_signed), allowed=FLOAT_DTYPES,
    example="ug.atan2([1.0, -1.0], [0.0, -1.0])  # [1.5707964, -2.3561945]",
)


def _inside_one(rng, shape):
    return rng.uniform(-0.9, 0.9, shape)


def _float_math(name, compute, grad, doc, make, example):
    _unary(name, compute, grad, doc, _unary_samples(make), allowed=FLOAT_DTYPES,
           example=example)


_float_math("sin", np.sin, lambda g, x, out: g * np.cos(x), "Sine of x (radians). Gradient "
            "cos(x).", normal, "ug.sin([0.0, 1.5707964])  # [0.0, 1.0]")
_float_math("cos", np.cos, lambda g, x, out: -g * np.sin(x), "Cosine of x (radians). "
            "Gradient -sin(x).", normal, "ug.cos([0.0, 3.1415927])  # [1.0, -1.0]")
_float_math("tan", np.tan, lambda g, x, out: g * (1 + out * out), "Tangent of x (radians). "
            "Gradient 1 + tan(x)^2.", _inside_one, "ug.tan([0.0, 0.7853982])  # [0.0, 1.0]")
_float_math("asin", np.arcsin, lambda g, x, out: g / np.sqrt(1 - x * x),
            "Arcsine of x in [-pi/2, pi/2]; NaN outside [-1, 1]. Gradient 1 / sqrt(1 - x^2).",
            _inside_one, "ug.asin([0.0, 1.0])  # [0.0, 1.5707964]")
_float_math("acos", np.arccos, lambda g, x, out: -g / np.sqrt(1 - x * x),
            "Arccosine of x in [0, pi]; NaN outside [-1, 1]. Gradient -1 / sqrt(1 - x^2).",
            _inside_one, "ug.acos([1.0, 0.0])  # [0.0, 1.5707964]")
_float_math("atan", np.arctan, lambda g, x, out: g / (1 + x * x),
            "Arctangent of x in (-pi/2, pi/2). Gradient 1 / (1 + x^2).", normal,
            "ug.atan([0.0, 1.0])  # [0.0, 0.7853982]")
_float_math("sinh", np.sinh, lambda g, x, out: g * np.cosh(x),
            "Hyperbolic sine. Gradient cosh(x).", normal, "ug.sinh([0.0, 1.0])  # [0.0, 1.1752012]")
_float_math("cosh", np.cosh, lambda g, x, out: g * np.sinh(x),
            "Hyperbolic cosine. Gradient sinh(x).", normal,
            "ug.cosh([0.0, 1.0])  # [1.0, 1.5430806]")


def _near_zero_samples(make):
    """`make`'s values, and values near 0 where log(1 + x) and exp(x) - 1 lose every digit
    (1 + 1e-10 rounds to 1 in float32): the op must be computed as itself."""

    def samples(rng):
        tiny = np.array([1e-10, -1e-10, 3e-8, -2e-5, 0.0, 1e-3, -0.5, 2.0])
        return _unary_samples(make)(rng) + [Sample((tiny,))]

    return samples


def _above_minus_one(rng, shape):
    return rng.uniform(-0.9, 3.0, shape)


_unary(
    "log1p", np.log1p, lambda g, x, out: g / (1 + x),
    "log(1 + x), accurate for x near 0 (log1p(1e-10) is 1e-10 where log(1 + 1e-10) rounds "
    "to 0 in float32), for floats: -inf at -1, NaN below. Gradient 1 / (1 + x).",
    _near_zero_samples(_above_minus_one), allowed=FLOAT_DTYPES,
    example="ug.log1p([0.0, 1e-10, -1.0])  # [0.0, 1e-10, -inf]",
)
_unary(
    "expm1", np.expm1, lambda g, x, out: g * np.exp(x),
    "exp(x) - 1, accurate for x near 0 (expm1(1e-10) is 1e-10 where exp(1e-10) - 1 is 0 in "
    "float32), for floats: -1 at -inf. Gradient exp(x).",
    _near_zero_samples(normal), allowed=FLOAT_DTYPES,
    example="ug.expm1([0.0, 1e-10, -inf])  # [0.0, 1e-10, -1.0]",
)


def _erf(x):
    # NumPy has no erf; math.erf is exact to double rounding. Vectorised per element: the
    # reference favours being obviously right over speed.
    import math

    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    return np.array([math.erf(v) for v in flat]).reshape(np.shape(x))


_float_math("erf", _erf, lambda g, x, out: g * (2 / np.sqrt(np.pi)) * np.exp(-x * x),
            "The error function, 2 / sqrt(pi) * integral of exp(-t^2) from 0 to x. Gradient "
            "2 / sqrt(pi) * exp(-x^2).", normal, "ug.erf([0.0, 1.0])  # [0.0, 0.8427008]")


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_unary(
    "softplus", lambda x: np.logaddexp(0, x), lambda g, x, out: g * _sigmoid(x),
    "log(1 + exp(x)), computed without overflow (as NumPy's logaddexp(0, x)). Gradient "
    "sigmoid(x).",
    lambda rng: [Sample((normal(rng, (3, 4)) * 3,)), Sample((positive(rng, (2, 5)) * -4,))],
    allowed=FLOAT_DTYPES,
    example="ug.softplus([0.0, 100.0])  # [0.6931472, 100.0]",
)
