"""Gradients at special points on every target: kinks, ties, bounds, NaN and infinities.

The expected gradient is the op record's VJP rule (the NumPy engine's definition) applied to
the same grid as tests/test_special_values.py, or a value worked out by hand. Where a record
leaves a gradient open (below, `OPEN`), the grid skips those points, and the record says so.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_special_values import BINARY_FLOAT, UNARY_FLOAT, _float_grid, _pairs

import unigraph as ug
from unigraph.config import Target
from unigraph.ops import OPS

NAN, INF = np.nan, np.inf
DTYPES = ["float32", "float64"]
RTOL = {"float32": 1e-5, "float64": 1e-12}  # TF's float32 tanh' is 1 - t*t in float32
# Finite values also pass within an absolute tolerance far below any gradient that matters:
# Paddle's erf gradient stops at 3.3e-39 where exp(-x*x) underflows (float64 too), and TF
# flushes a subnormal intermediate to 0 (d/dy of 3.4e38 ** -1 in float32 is 2.6e-37).
ATOL = {"float32": 1e-30, "float64": 1e-37}


def _pow_open(x, y):
    # The pow record promises d/dx = y * x**(y-1) and d/dy = x**y * log(x) for finite x > 0,
    # and both at finite x < 0 for d/dx; at x == 0 (0 / 0, inf * 0), at x < 0 for d/dy (the
    # reference's NaN, TF's 0) and at infinite or NaN operands the frameworks' conventions
    # differ (torch -inf, TF 0, NumPy NaN), so the record leaves them open.
    both_finite = np.isfinite(x) & np.isfinite(y)
    return ~both_finite | (x <= 0)


def _mod_open(x, y):
    # The result is NaN at infinite x; at infinite y, or a quotient x / y below the smallest
    # normal, TF's FloorModGrad flushes floor(x / y) to 0 (FTZ) and Paddle reads -0 as 0.
    with np.errstate(all="ignore"):
        quotient = np.abs(x / y)
    tiny = np.finfo(x.dtype).tiny
    return ~np.isfinite(x) | ~np.isfinite(y) | ((quotient < tiny) & (x != 0))


# Points where a record leaves the gradient open; (x,) or (x, y) -> a mask of open points.
OPEN = {
    "abs": lambda x: np.isnan(x),  # sign(NaN): torch and Paddle give 0
    "atan2": lambda y, x: (y == 0) & (x == 0),  # 0 / 0: torch gives 0
    "mod": _mod_open,
    "pow": _pow_open,
}


def _record_gradient(name, xs):
    with np.errstate(all="ignore"):
        out = OPS[name].reference(*xs)
        grads = OPS[name].vjp(np.ones_like(out), list(xs), out)
    return [np.asarray(g, x.dtype) * np.ones_like(x) for g, x in zip(grads, xs, strict=True)]


def _gradients(target, fn, xs):
    both = ug.grad(lambda *a: ug.sum(fn(*a)), argnums=tuple(range(len(xs))))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(both)(*xs)
    return [np.asarray(g.numpy()) for g in got]


def _wrong(got, want, dtype):
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.isnan(g) != np.isnan(w)
    bad |= (np.isinf(g) | np.isinf(w)) & (g != w)
    finite = np.isfinite(g) & np.isfinite(w)
    with np.errstate(all="ignore"):
        bad |= finite & (np.abs(g - w) > RTOL[dtype] * np.abs(w) + ATOL[dtype])
    return bad


DIFFERENTIABLE = [n for n in UNARY_FLOAT + BINARY_FLOAT if OPS[n].vjp is not None]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@pytest.mark.parametrize("target", TARGETS)
def test_gradients_over_the_special_value_grid(target, name):
    problems = []
    for dtype in DTYPES:
        grid = _float_grid(name, dtype)
        xs = [grid] if name in UNARY_FLOAT else list(_pairs(grid))
        if name in OPEN:
            keep = ~OPEN[name](*xs)
            xs = [x[keep] for x in xs]
        got = _gradients(target, getattr(ug, name), xs)
        for k, (g, want) in enumerate(zip(got, _record_gradient(name, xs), strict=True)):
            assert g.dtype == want.dtype and g.shape == want.shape, (name, g.dtype, g.shape)
            bad = _wrong(g, want, dtype)
            if bad.any():
                points = list(zip(*[x[bad][:6].tolist() for x in xs], strict=True))
                problems.append(f"d{name}/d input {k}, {dtype} on {target}: {int(bad.sum())} "
                                f"wrong at {points}: got {g[bad][:6].tolist()}, record "
                                f"{want[bad][:6].tolist()}")
    assert not problems, "\n".join(problems)


def _sqrt_or_zero(x):
    return ug.where(x > 0, ug.sqrt(x), ug.zeros_like(x))


def _safe_sqrt_or_zero(x):
    positive = x > 0
    return ug.where(positive, ug.sqrt(ug.where(positive, x, ug.ones_like(x))), ug.zeros_like(x))


# name -> (fn, x, d sum(fn(x)) / dx), each worked out by hand from the records' rules.
KINKS = {
    # relu'(0) = 0 on either zero; abs'(0) = sign(0) = 0.
    "relu": (ug.relu, [-0.0, 0.0, 2.0, -3.0], [0.0, 0.0, 1.0, 0.0]),
    "abs": (ug.abs, [-0.0, 0.0, 2.0, -3.0], [0.0, 0.0, 1.0, -1.0]),
    # sqrt'(x) = 1 / (2 sqrt(x)): inf at 0, 1/4 at 4.
    "sqrt": (ug.sqrt, [0.0, 4.0], [INF, 0.25]),
    # clip = minimum(maximum(x, lo), hi): at a bound x ties with it and gets half.
    "clip": (lambda x: ug.clip(x, 0.0, 1.0), [-1.0, 0.0, 0.5, 1.0, 2.0],
             [0.0, 0.5, 1.0, 0.5, 0.0]),
    # The way out of the where trap (next test): sqrt of a value positive in both branches.
    "where-safe-sqrt": (_safe_sqrt_or_zero, [-1.0, 0.0, 4.0], [0.0, 0.0, 0.25]),
    # exp, tanh, sigmoid and softplus saturate: their gradients at +-inf are exact.
    "exp": (ug.exp, [-INF, 0.0, INF], [0.0, 1.0, INF]),
    "tanh": (ug.tanh, [-INF, 0.0, INF], [0.0, 1.0, 0.0]),
    "sigmoid": (ug.sigmoid, [-INF, 0.0, INF], [0.0, 0.25, 0.0]),
    "softplus": (ug.softplus, [-INF, 0.0, INF], [0.0, 0.5, 1.0]),
    # log' = 1 / x: inf at +0, -inf at -0.
    "log": (ug.log, [0.0, -0.0, 2.0], [INF, -INF, 0.5]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(KINKS))
@pytest.mark.parametrize("target", TARGETS)
def test_gradient_at_kinks_bounds_and_the_where_trap(target, name, dtype):
    fn, x, want = KINKS[name]
    (got,) = _gradients(target, fn, [np.array(x, dtype)])
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.array(want, dtype), err_msg=f"{name} on {target}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_the_where_trap_is_nan_or_zero_where_the_branch_was_not_taken(target, dtype):
    """where(x > 0, sqrt(x), 0): the untaken sqrt still gets a 0 cotangent, and its rule
    0 / (2 sqrt(x)) is 0 / NaN at x < 0 and 0 / 0 at x == 0. NumPy, torch and Paddle give
    NaN there; TF's SqrtGrad gives 0 for a 0 cotangent. Not promised either way (README
    "Gradients": use where(x > 0, sqrt(where(x > 0, x, 1)), 0)); the taken side is."""
    (got,) = _gradients(target, _sqrt_or_zero, [np.array([-1.0, 0.0, 4.0, 0.25], dtype)])
    assert got.dtype == np.dtype(dtype)
    assert list(got[2:]) == [0.25, 1.0], (target, got)
    assert all(np.isnan(v) or v == 0 for v in got[:2]), (target, got)
