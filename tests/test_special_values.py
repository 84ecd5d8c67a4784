"""Special values on every target: NaN, +-inf, +-0, values near overflow, integer extremes.

The random-program tester keeps its inputs away from hazards; this module feeds each
elementwise op record and the reductions grids of special values (every pair, for binary
ops), one tensor per op, dtype and target, and compares with the op record's NumPy
reference. What "agree" means, from the records' docstrings and README "Dtype rules":

- the same NaN positions, the same infinities (with their signs), the same bools and ints
  (ints wrap as NumPy, README "Small integers");
- a zero result has the reference's sign, except where the record leaves it open: `mod` (a
  zero remainder), `maximum`/`minimum` of a +0/-0 tie and `relu(-0.0)` (NumPy itself gives
  either sign there, by dtype), and the reductions (the order of a sum decides it);
- finite values to a few ulps (a transcendental op is not correctly rounded anywhere);
- subnormals are not promised: the grids hold none, and where the reference's result is
  subnormal a target may give any value below the dtype's smallest normal, zero included
  (TensorFlow's CPU kernels flush subnormals to zero; Paddle's float32 exp(-100) is 2.9e-39
  where it is 3.8e-44);
- float -> int casts of NaN, inf and out-of-range values are unspecified (the cast record):
  only in-range values are cast here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.ops import OPS

NAN, INF = np.nan, np.inf

# Per float dtype: NaN, infinities, signed zeros, halves (round's ties), values near overflow
# (their sum, square or exp overflows), and small ordinary numbers. No subnormals (above).
FLOAT_GRID = {
    "float16": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -11.0,
                65504.0, -65504.0, 1e4],
    "float32": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 100.0, -100.0,
                90.0, 3.4e38, -3.4e38, 1e10],
    "float64": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 800.0, -800.0,
                1e20, 1.7e308, -1.7e308, 1e300],
}
FLOATS = sorted(FLOAT_GRID)

# How close a finite value must be: a few ulps of the dtype (erf, tanh, sin are not correctly
# rounded on any framework).
RTOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}

UNARY_FLOAT = ["neg", "abs", "exp", "log", "sqrt", "floor", "ceil", "round", "sin", "cos",
               "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "softplus", "sigmoid",
               "tanh", "relu", "stop_gradient", "isnan", "isinf", "isfinite",
               "log1p", "expm1"]
BINARY_FLOAT = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod",
                "floor_divide", "atan2", "equal", "not_equal", "less", "less_equal",
                "greater", "greater_equal"]
# Trig of a huge argument needs an exact argument reduction, which a vectorised kernel may
# skip on some CPU; the records promise the function, so the grid keeps to |x| <= 100 there.
SMALL_ARGUMENTS = {"sin", "cos", "tan"}
# The records leave the sign of these ops' zero results open (see the module docstring).
ZERO_SIGN_OPEN = {"mod", "relu", "sum", "mean", "cumsum", "prod", "logsumexp"}
ZERO_TIE_OPEN = {"maximum", "minimum"}  # only where x and y are both zeros

INTS = ["int8", "uint8", "int16", "int32", "int64"]


def _int_grid(dtype):
    info = np.iinfo(dtype)
    values = {info.min, info.min + 1, info.max - 1, info.max, 0, 1, 2, 3, 7}
    if info.min < 0:
        values |= {-1, -2, -7}
    return np.array(sorted(values), dtype)


def _run(target, fn, *args):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(fn)(*args)
    return np.asarray(out.numpy())


def _reference(name, *args, **attrs):
    with np.errstate(all="ignore"):
        return OPS[name].reference(*args, **attrs)


def _mismatches(got, want, *, zero_sign=True, zero_tie=None):
    """A bool mask of the elements where `got` breaks the module's rules against `want`."""
    assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind != "f":
        return got != want
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.isnan(g) != np.isnan(w)
    bad |= (np.isinf(g) | np.isinf(w)) & (g != w)
    subnormal = (w != 0) & (np.abs(w) < np.finfo(want.dtype).tiny)
    sign_checked = (w == 0) & zero_sign
    if zero_tie is not None:
        sign_checked &= ~zero_tie
    bad |= (w == 0) & (g != 0) & ~subnormal
    bad |= sign_checked & (np.signbit(g) != np.signbit(w))
    finite = np.isfinite(g) & np.isfinite(w) & (w != 0) & ~subnormal
    with np.errstate(all="ignore"):
        bad |= finite & (np.abs(g - w) > RTOL[str(want.dtype)] * np.abs(w))
    bad |= subnormal & ~(np.abs(g) < np.finfo(want.dtype).tiny)
    return bad


def _report(what, bad, inputs, got, want):
    columns = [np.asarray(i)[bad][:8].tolist() for i in inputs]
    return (f"{what}: {int(bad.sum())} of {bad.size} wrong; inputs {columns}, "
            f"got {got[bad][:8].tolist()}, reference {want[bad][:8].tolist()}")


def _float_grid(name, dtype):
    grid = np.array(FLOAT_GRID[dtype], dtype)
    if name in SMALL_ARGUMENTS:
        grid = grid[~(np.abs(grid) > 100)]
    return grid


@pytest.mark.parametrize("name", UNARY_FLOAT)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_unary_float_ops_on_special_values(target, name):
    problems = []
    for dtype in FLOATS:
        x = _float_grid(name, dtype)
        got, want = _run(target, getattr(ug, name), x), _reference(name, x)
        bad = _mismatches(got, want, zero_sign=name not in ZERO_SIGN_OPEN)
        if bad.any():
            problems.append(_report(f"{name} {dtype} on {target}", bad, [x], got, want))
    assert not problems, "\n".join(problems)


def _pairs(values):
    xs, ys = zip(*itertools.product(values, values), strict=True)
    return np.array(xs, values.dtype), np.array(ys, values.dtype)


@pytest.mark.parametrize("name", BINARY_FLOAT)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_binary_float_ops_on_every_pair_of_special_values(target, name):
    problems = []
    for dtype in FLOATS:
        x, y = _pairs(_float_grid(name, dtype))
        if name == "mod":  # the record leaves mod open where x / y overflows
            with np.errstate(all="ignore"):
                x, y = x[~np.isinf(x / y) | np.isinf(x)], y[~np.isinf(x / y) | np.isinf(x)]
        got, want = _run(target, getattr(ug, name), x, y), _reference(name, x, y)
        tie = (x == 0) & (y == 0) if name in ZERO_TIE_OPEN else None
        bad = _mismatches(got, want, zero_sign=name not in ZERO_SIGN_OPEN, zero_tie=tie)
        if bad.any():
            problems.append(_report(f"{name} {dtype} on {target}", bad, [x, y], got, want))
    assert not problems, "\n".join(problems)


# Integer ops, each over every pair of a dtype's extremes and small values: results wrap as
# NumPy's. floor_divide and mod by 0 are left out (their records: do not rely on it).
INT_BINARY = ["add", "sub", "mul", "maximum", "minimum", "floor_divide", "mod", "equal",
              "less", "greater_equal"]
INT_UNARY = ["neg", "abs"]


@pytest.mark.parametrize("name", INT_BINARY + INT_UNARY)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_int_ops_at_the_dtype_edges_wrap_as_numpy(target, name):
    problems = []
    for dtype in INTS:
        grid = _int_grid(dtype)
        if name in INT_UNARY:
            inputs = [grid]
        else:
            x, y = _pairs(grid)
            keep = y != 0 if name in ("floor_divide", "mod") else slice(None)
            inputs = [x[keep], y[keep]]
        got, want = _run(target, getattr(ug, name), *inputs), _reference(name, *inputs)
        bad = _mismatches(got, want)
        if bad.any():
            problems.append(_report(f"{name} {dtype} on {target}", bad, inputs, got, want))
    assert not problems, "\n".join(problems)


def _cast_cases():
    """(source dtype, values, destination dtype): values the cast record gives a meaning."""
    cases = []
    for src in FLOATS:
        grid = np.array(FLOAT_GRID[src], src)
        for dst in FLOATS + ["bool"]:
            cases.append((src, grid, dst))  # overflow to inf, NaN stays NaN, x != 0
        for dst in INTS:
            info = np.iinfo(dst)
            # In range only (truncation toward zero; -0.0 -> 0); NaN, inf and values out of
            # range give unspecified ints.
            whole = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -0.5, 3.0, -11.0, 100.0,
                              -100.0, 90.0, 127.0, 255.0, -128.0], src)
            inside = whole[(whole >= info.min) & (whole < info.max + 1) & np.isfinite(whole)]
            cases.append((src, inside, dst))
    for src in INTS:
        for dst in FLOATS + INTS + ["bool"]:
            cases.append((src, _int_grid(src), dst))  # ints wrap; int64 max rounds in floats
    return cases


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_cast_of_special_values(target):
    problems = []
    for src, x, dst in _cast_cases():
        got = _run(target, lambda v, dst=dst: ug.cast(v, dst), x)
        want = _reference("cast", x, dtype=dst)
        bad = _mismatches(got, want)
        if bad.any():
            problems.append(_report(f"cast {src} -> {dst} on {target}", bad, [x], got, want))
    assert not problems, "\n".join(problems)


# Reductions over rows that each hold one hazard.
FLOAT_ROWS = {
    "nan": [NAN, 1.0, 2.0, -1.0],
    "inf": [INF, 1.0, 2.0, -1.0],
    "-inf": [-INF, 1.0, 2.0, -1.0],
    "inf-inf": [INF, -INF, 1.0, 0.0],
    "only-inf": [INF, INF, INF, INF],
    "only-minus-inf": [-INF, -INF, -INF, -INF],
    "zeros": [0.0, -0.0, -0.0, 0.0],
    "ties": [2.0, -1.0, 2.0, 2.0],
    "large": [1000.0, 0.0, -1000.0, 1000.0],
}
FLOAT_REDUCTIONS = {
    "sum": lambda x: ug.sum(x, axis=1),
    "mean": lambda x: ug.mean(x, axis=1),
    "max": lambda x: ug.max(x, axis=1),
    "min": lambda x: ug.min(x, axis=1),
    "prod": lambda x: ug.prod(x, axis=1),
    "argmax": lambda x: ug.argmax(x, axis=1),
    "cumsum": lambda x: ug.cumsum(x, axis=1),
    "softmax": lambda x: ug.softmax(x, axis=1),
    "log_softmax": lambda x: ug.log_softmax(x, axis=1),
}


def _reduction_reference(name, x):
    attrs = {"argmax": {"axis": 1, "keepdims": False}, "cumsum": {"axis": 1},
             "softmax": {"axis": 1}, "log_softmax": {"axis": 1}}
    attrs = attrs.get(name, {"axis": (1,), "keepdims": False})
    return _reference(name, x, **attrs)


@pytest.mark.parametrize("name", sorted(FLOAT_REDUCTIONS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_reductions_over_rows_of_special_values(target, name):
    problems = []
    for dtype in FLOATS:
        big = np.finfo(dtype).max
        rows = dict(FLOAT_ROWS, overflow=[big, big, 1.0, 1.0])
        x = np.array(list(rows.values()), dtype)
        got = _run(target, FLOAT_REDUCTIONS[name], x)
        want = _reduction_reference(name, x)
        bad = _mismatches(got, want, zero_sign=name not in ZERO_SIGN_OPEN)
        if bad.any():
            rows_at = np.nonzero(bad.reshape(len(rows), -1).any(axis=1))[0]
            problems.append(f"{name} {dtype} on {target}: rows "
                            f"{[list(rows)[i] for i in rows_at]}: got {got[rows_at].tolist()}, "
                            f"reference {want[rows_at].tolist()}")
    assert not problems, "\n".join(problems)


INT_REDUCTIONS = ["sum", "max", "min", "prod", "argmax", "cumsum"]


@pytest.mark.parametrize("name", INT_REDUCTIONS)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_int_reductions_at_the_dtype_edges_wrap_as_numpy(target, name):
    problems = []
    for dtype in INTS:
        info = np.iinfo(dtype)
        x = np.array([[info.max, 1, 0, 0], [info.min, info.min, info.max, 0],
                      [info.max, info.max, info.max, 2], [info.min, 0, info.max, info.min],
                      [3, 7, 2, 5]], dtype)
        got = _run(target, FLOAT_REDUCTIONS[name], x)
        want = _reduction_reference(name, x)
        bad = _mismatches(got, want)
        if bad.any():
            problems.append(f"{name} {dtype} on {target}: got {got.tolist()}, "
                            f"reference {want.tolist()}")
    assert not problems, "\n".join(problems)


def _numpy_logsumexp(x):
    """NumPy's np.logaddexp.reduce over each row, in float64: inf for a row holding +inf,
    -inf for a row of only -inf, NaN for a row holding a NaN."""
    with np.errstate(all="ignore"):
        return np.logaddexp.reduce(x.astype(np.float64), axis=1).astype(x.dtype)


# Composed functions (ug.clip, ug.sign, ug.logsumexp: no op record of their own), against
# NumPy's np.clip, np.sign and np.logaddexp.reduce.
COMPOSED = {
    "clip": (lambda x: ug.clip(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0), "grid"),
    "sign": (ug.sign, np.sign, "grid"),
    "logsumexp": (lambda x: ug.logsumexp(x, axis=1), _numpy_logsumexp, "rows"),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_composed_functions_on_special_values(target, name):
    fn, numpy_fn, shape = COMPOSED[name]
    problems = []
    for dtype in FLOATS:
        if shape == "grid":
            x = np.array(FLOAT_GRID[dtype], dtype)
        else:
            x = np.array(list(FLOAT_ROWS.values()), dtype)
        got, want = _run(target, fn, x), numpy_fn(x)
        # sign(-0.0): np.sign gives +0.0, ug.sign keeps x's -0.0; either is a zero.
        bad = _mismatches(got, want, zero_sign=name == "clip")
        if bad.any():
            problems.append(_report(f"{name} {dtype} on {target}", bad, [x], got, want))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_where_picks_special_values_as_they_are(target):
    """ug.where hands back the value it picks, -0.0 included, from either side (ONNX
    Runtime's Where gave +0.0 for a -0.0 taken from x)."""
    problems = []
    for dtype in FLOATS:
        x, y = _pairs(_float_grid("where", dtype))
        cond = np.arange(x.size) % 3 != 1  # both sides picked, for every pair
        cond[x.size // 2:] = ~cond[x.size // 2:]
        got, want = _run(target, ug.where, cond, x, y), _reference("where", cond, x, y)
        bad = _mismatches(got, want)
        if bad.any():
            problems.append(_report(f"where {dtype} on {target}", bad, [cond, x, y], got, want))
    assert not problems, "\n".join(problems)


# softplus of a very negative x is exp(x), far below 1: log(1 + exp(x)) as written keeps none
# of its digits (ONNX Runtime's float64 Softplus gave 0 at -40, 3e-8 off at -20).
SOFTPLUS_TAILS = {"float16": [-5.0, -8.0], "float32": [-20.0, -40.0, -80.0],
                  "float64": [-20.0, -40.0, -700.0]}


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_softplus_keeps_the_digits_of_a_small_result(target):
    problems = []
    for dtype in FLOATS:
        x = np.array(SOFTPLUS_TAILS[dtype], dtype)
        got, want = _run(target, ug.softplus, x), _reference("softplus", x)
        bad = _mismatches(got, want)
        if bad.any():
            problems.append(_report(f"softplus {dtype} on {target}", bad, [x], got, want))
    assert not problems, "\n".join(problems)
