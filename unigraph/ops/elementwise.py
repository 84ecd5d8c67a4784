"""Elementwise ops: arithmetic, comparisons, logic, unary math, `where` and `cast`.

Binary ops take inputs of one dtype (the frontend inserts the casts) and broadcast the way
NumPy does. The result is computed in the input dtype: float16 stays float16.
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import DTYPES, FLOAT_DTYPES
from unigraph.ops._util import (
    NUMERIC_DTYPES,
    broadcast_shapes,
    distinct,
    grad_for,
    is_float,
    nonzero,
    normal,
    positive,
    require_bool,
    require_dtype,
    require_dtype_name,
    require_same_dtype,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register

_FIXES = {
    FLOAT_DTYPES: "use cast(x, 'float32') first",
    NUMERIC_DTYPES: "use cast(x, 'int32') first, or a logical_* op for bools",
    DTYPES: "",
    ("bool",): "compare first, e.g. x != 0",
}

# Shape pairs every binary op is sampled on: same shape, trailing broadcast, both stretched.
_BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4))]


def _binary_samples(make_x, make_y=None):
    make_y = make_y or make_x

    def samples(rng):
        return [Sample((make_x(rng, xs), make_y(rng, ys))) for xs, ys in _BINARY_SHAPES]

    return samples


def _promotion(allowed) -> str:
    """A float-only op promotes ints and bools to float (NumPy's `np.sqrt(4)` is 2.0)."""
    return "float" if allowed == FLOAT_DTYPES else "same"


def _binary(name, compute, grads, doc, samples, allowed=NUMERIC_DTYPES, out_dtype=None,
            example=""):
    """An op f(x, y) of one dtype with NumPy broadcasting; `out_dtype` None keeps x's.

    grads(g, x, y, out) -> (dx, dy) at the broadcast shape, or None: not differentiable.
    """

    def infer(x, y):
        dtype = require_same_dtype(name, {"x": x, "y": y})
        require_dtype(name, "x", x, allowed, _FIXES[allowed])
        return TensorSpec(broadcast_shapes(name, {"x": x, "y": y}), out_dtype or dtype)

    def reference(x, y):
        return np.asarray(compute(x, y)).astype(out_dtype or x.dtype, copy=False)

    def vjp(g, inputs, out):
        x, y = inputs
        dx, dy = grads(g, x, y, out)
        return [grad_for(dx, x), grad_for(dy, y)]

    return register(OpDef(name, infer, reference, vjp if grads else None, doc, samples,
                          example=example, promote=_promotion(allowed)))


def _unary(name, compute, grad, doc, samples, allowed=NUMERIC_DTYPES, example="",
           out_dtype=None):
    """An op f(x); grad(g, x, out) -> dx, or None: not differentiable; `out_dtype` None
    keeps x's."""

    def infer(x):
        require_dtype(name, "x", x, allowed, _FIXES[allowed])
        return TensorSpec(x.shape, out_dtype) if out_dtype else x

    def reference(x):
        return np.asarray(compute(x)).astype(out_dtype or x.dtype, copy=False)

    def vjp(g, inputs, out):
        return [grad_for(grad(g, inputs[0], out), inputs[0])]

    return register(OpDef(name, infer, reference, vjp if grad else None, doc, samples,
                          example=example, promote=_promotion(allowed)))


def _pow_grads(g, x, y, out):
    with np.errstate(divide="ignore", invalid="ignore"):
        # d/dx x**y = y * x**(y-1), taken as 0 where y == 0 (also at x == 0, like torch).
        dx = np.where(y == 0, 0, y * x ** (y - 1))
        # d/dy x**y = x**y * log(x): real only for x > 0; 0 at x == 0 when y >= 0, else NaN.
        safe_log = np.log(np.where(x > 0, x, 1))
        dy = np.where(x > 0, out * safe_log, np.where((x == 0) & (y >= 0), 0, np.nan))
    return g * dx, g * dy


def _with_ints(make):
    """A sampler that adds an int64 case to a float one: ints have no gradient."""

    def samples(rng):
        ints = Sample((rng.integers(-5, 5, (2, 3)), rng.integers(-5, 5, (3,))))
        return make(rng) + [ints]

    return samples


def _half_grid(rng, shape):
    return rng.integers(-4, 4, shape) / 2.0


def _pair_split(g, x, y, out):
    """maximum/minimum's gradient: the rule of the max/min reductions over the pair (x, y).
    An input equal to the result gets g, halved when both are; NaN to both where the result
    is NaN (then neither equals it)."""
    hit_x, hit_y = x == out, y == out
    count = hit_x.astype(np.int8) + hit_y
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(count == 0, np.nan, g / count)
    return np.where(hit_x | (count == 0), share, 0), np.where(hit_y | (count == 0), share, 0)


def _pair_samples(rng):
    # A coarse grid for both, so ties (where the gradient splits) occur, and one NaN sample.
    with_nan = Sample((np.array([np.nan, 1.0, np.nan, 2.0]), np.array([0.5, np.nan, np.nan, 2.0])),
                      at_kink=True)
    return _binary_samples(_half_grid)(rng)[:2] + [with_nan]


_binary(
    "add", np.add, lambda g, x, y, out: (g, g), "x + y.", _with_ints(_binary_samples(normal)),
    example="ug.add([1.0, 2.0], [10.0, 20.0])  # [11.0, 22.0]",
)
_binary(
    "sub", np.subtract, lambda g, x, y, out: (g, -g), "x - y.",
    _with_ints(_binary_samples(normal)),
    example="ug.sub([5.0, 1.0], [2.0, 3.0])  # [3.0, -2.0]",
)
_binary(
    "mul", np.multiply, lambda g, x, y, out: (g * y, g * x), "x * y.",
    _with_ints(_binary_samples(normal)),
    example="ug.mul([2.0, 3.0], [4.0, -1.0])  # [8.0, -3.0]",
)
_binary(
    "div", np.divide, lambda g, x, y, out: (g / y, -g * out / y),
    "x / y, true division of floats (cast ints first).",
    _binary_samples(normal, positive), allowed=FLOAT_DTYPES,
    example="ug.div([1.0, 3.0], [4.0, 2.0])  # [0.25, 1.5]",
)
_binary(
    "pow", np.power, _pow_grads,
    "x ** y for floats. Gradient: y * x**(y-1) for x (0 where y == 0) and x**y * log(x) for "
    "y (0 where x == 0 and y >= 0; NaN where x < 0). Promised for finite x > 0 only: at x <= "
    "0 and at infinite or NaN operands the frameworks differ (TF gives 0 for y at x < 0, "
    "torch -inf at x == 0 with y < 0).",
    _binary_samples(positive, normal), allowed=FLOAT_DTYPES,
    example="ug.pow([2.0, 9.0], [3.0, 0.5])  # [8.0, 3.0]",
)
_binary(
    "maximum", np.maximum, _pair_split,
    "Elementwise max(x, y). NaN propagates: NaN if either is NaN. Gradient: to the input "
    "equal to the result; where x == y each gets half; where the result is NaN both get NaN. "
    "Of 0.0 and -0.0 either zero may come back (NumPy's own choice depends on the dtype).",
    _with_ints(_pair_samples),
    example="ug.maximum([1.0, 4.0, nan], [3.0, 2.0, 0.0])  # [3.0, 4.0, nan]",
)
_binary(
    "minimum", np.minimum, _pair_split,
    "Elementwise min(x, y). NaN propagates: NaN if either is NaN. Gradient: to the input "
    "equal to the result; where x == y each gets half; where the result is NaN both get NaN. "
    "Of 0.0 and -0.0 either zero may come back (NumPy's own choice depends on the dtype).",
    _with_ints(_pair_samples),
    example="ug.minimum([1.0, 4.0, nan], [3.0, 2.0, 0.0])  # [1.0, 2.0, nan]",
)

# Comparisons: any dtype, bool result, no gradient. Samples on a coarse grid so ties occur.
for _name, _fn, _text, _result in [
    ("equal", np.equal, "x == y", "[True, False, False]"),
    ("not_equal", np.not_equal, "x != y", "[False, True, True]"),
    ("less", np.less, "x < y", "[False, True, False]"),
    ("less_equal", np.less_equal, "x <= y", "[True, True, False]"),
    ("greater", np.greater, "x > y", "[False, False, True]"),
    ("greater_equal", np.greater_equal, "x >= y", "[True, False, True]"),
]:
    _binary(
        _name, _fn, None, f"{_text}, elementwise, as bool. Not differentiable.",
        _with_ints(_binary_samples(_half_grid)), allowed=DTYPES, out_dtype="bool",
        example=f"ug.{_name}([2, 1, 3], [2, 2, 2])  # {_result}",
    )


def _bools(rng, shape):
    return rng.random(shape) < 0.5


_binary(
    "logical_and", np.logical_and, None, "x and y, elementwise, for bools.",
    _binary_samples(_bools), allowed=("bool",), out_dtype="bool",
    example="ug.logical_and([True, True, False], [True, False, False])  # [True, False, False]",
)
_binary(
    "logical_or", np.logical_or, None, "x or y, elementwise, for bools.",
    _binary_samples(_bools), allowed=("bool",), out_dtype="bool",
    example="ug.logical_or([True, True, False], [True, False, False])  # [True, True, False]",
)
_binary(
    "logical_xor", np.logical_xor, None, "x or y but not both (x != y), elementwise, for bools.",
    _binary_samples(_bools), allowed=("bool",), out_dtype="bool",
    example="ug.logical_xor([True, True, False], [True, False, False])  # [False, True, False]",
)
_unary(
    "logical_not", np.logical_not, None, "not x, elementwise, for bools.",
    lambda rng: [Sample((_bools(rng, (3, 4)),)), Sample((np.array(True),))], allowed=("bool",),
    example="ug.logical_not([True, False])  # [False, True]",
)


def _unary_samples(make):
    return lambda rng: [Sample((make(rng, (3, 4)),)), Sample((make(rng, (2, 1, 5)),))]


_unary(
    "neg", np.negative, lambda g, x, out: -g, "-x.", _unary_samples(normal),
    example="ug.neg([1.0, -2.0])  # [-1.0, 2.0]",
)
_unary(
    "abs", np.abs, lambda g, x, out: g * np.sign(x),
    "|x|. Gradient sign(x), which is 0 at x == 0.",
    lambda rng: _unary_samples(nonzero)(rng) + [Sample((rng.integers(-5, 5, (4,)),))],
    example="ug.abs([-1.5, 0.0, 2.0])  # [1.5, 0.0, 2.0]",
)
_unary(
    "exp", np.exp, lambda g, x, out: g * out, "e ** x, for floats.",
    _unary_samples(normal), allowed=FLOAT_DTYPES,
    example="ug.exp([0.0, 1.0])  # [1.0, 2.7182817]",
)
_unary(
    "log", np.log, lambda g, x, out: g / x,
    "Natural log of x, for floats: -inf at 0, NaN below.",
    _unary_samples(positive), allowed=FLOAT_DTYPES,
    example="ug.log([1.0, 100.0])  # [0.0, 4.6051702]",
)
_unary(
    "sqrt", np.sqrt, lambda g, x, out: g / (2 * out),
    "Square root of x, for floats: NaN below 0; gradient 1 / (2 sqrt(x)), inf at 0.",
    _unary_samples(positive), allowed=FLOAT_DTYPES,
    example="ug.sqrt([4.0, 2.0])  # [2.0, 1.4142135]",
)



def _stop_gradient_samples(rng):
    # Every sample is `at_kink`: the gradient 0 is this op's definition, not the derivative
    # finite differences would measure (1); the consistency suite checks the 0 on every target.
    return [Sample((normal(rng, (3, 4)),), at_kink=True),
            Sample((normal(rng, (2, 1, 5)),), at_kink=True),
            Sample((rng.integers(-5, 5, (4,)),))]


_unary(
    "stop_gradient", lambda x: x, lambda g, x, out: np.zeros_like(x),
    "x, unchanged, with no gradient flowing back through it: its gradient is 0, as torch's "
    "x.detach(), tf.stop_gradient and Paddle's x.detach() (target networks, "
    "straight-through estimators). Any dtype.",
    _stop_gradient_samples, allowed=DTYPES,
    example="ug.stop_gradient([1.0, -2.0])  # [1.0, -2.0]",
)


def _special_samples(rng):
    """NaN, both infinities, zeros of both signs and finite values, at two shapes."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.5, 3.0, 6e4])
    scattered = normal(rng, (3, 4))
    scattered[0, 1], scattered[1, 3], scattered[2, 0] = np.nan, np.inf, -np.inf
    return [Sample((special,)), Sample((scattered,))]


# Tests of floating values: bool results, no gradient. `ug.isnan` of an int or bool x is
# all False (`ug.isfinite`'s all True), as NumPy, without an op (api/elementwise.py).
for _name, _fn, _text, _result in [
    ("isnan", np.isnan, "x is NaN", "[False, True, False, False]"),
    ("isinf", np.isinf, "x is +inf or -inf", "[False, False, True, True]"),
    ("isfinite", np.isfinite, "x is neither NaN nor infinite", "[True, False, False, False]"),
]:
    _unary(
        _name, _fn, None, f"Whether {_text}, elementwise, as a bool (NumPy's np.{_fn.__name__}"
        "). Floats; an int or bool x has no NaN or infinity. Not differentiable.",
        _special_samples, allowed=FLOAT_DTYPES, out_dtype="bool",
        example=f"ug.{_name}([1.0, nan, inf, -inf])  # {_result}",
    )


def _where_infer(cond, x, y):
    require_bool("where", "cond", cond)
    dtype = require_same_dtype("where", {"x": x, "y": y})
    return TensorSpec(broadcast_shapes("where", {"cond": cond, "x": x, "y": y}), dtype)


def _where_vjp(g, inputs, out):
    cond, x, y = inputs
    return [None, grad_for(np.where(cond, g, 0), x), grad_for(np.where(cond, 0, g), y)]


register(OpDef(
    name="where",
    infer=_where_infer,
    reference=lambda cond, x, y: np.where(cond, x, y).astype(x.dtype, copy=False),
    vjp=_where_vjp,
    doc="x where cond is true, else y; all three broadcast. The gradient goes to the side "
        "that was picked; cond has none.",
    example="ug.where([True, False], [1.0, 2.0], [10.0, 20.0])  # [1.0, 20.0]",
    samples=lambda rng: [
        Sample((_bools(rng, (3, 4)), normal(rng, (3, 4)), normal(rng, (3, 4)))),
        Sample((_bools(rng, (3, 1)), normal(rng, (4,)), normal(rng, (2, 1, 1)))),
    ],
))


def _cast_infer(x, *, dtype):
    return TensorSpec(x.shape, require_dtype_name("cast", dtype))


def _cast_vjp(g, inputs, out, *, dtype):
    (x,) = inputs
    if not is_float(x.dtype):
        return [None]
    if not is_float(out.dtype):
        # A float -> int or bool cast is a step function: its derivative is 0 almost
        # everywhere (the cotangent of an int output carries no information anyway).
        return [np.zeros_like(x)]
    return [g.astype(x.dtype, copy=False)]


def _cast_samples(rng):
    # Away from integers, so float -> int truncation has a derivative of 0 near each value.
    fractional = rng.integers(-5, 5, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4))
    return [
        Sample((normal(rng, (3, 4)),), {"dtype": "float32"}),
        Sample((fractional,), {"dtype": "int32"}),
        Sample((rng.integers(-5, 5, (2, 3)),), {"dtype": "float64"}),
        Sample((distinct(rng, (5,)),), {"dtype": "bool"}),
    ]


register(OpDef(
    name="cast",
    infer=_cast_infer,
    reference=lambda x, *, dtype: x.astype(dtype),
    vjp=_cast_vjp,
    doc="x converted to `dtype`, as NumPy's astype: floats to ints truncate toward zero "
        "(NaN and out-of-range values give unspecified results), anything to bool is x != 0. "
        "Gradient: cast back to x's dtype for float -> float, 0 for float -> int or bool, "
        "none for int or bool x.",
    example='ug.cast([1.7, -1.7, 0.0], "int32")  # [1, -1, 0]',
    samples=_cast_samples,
))
