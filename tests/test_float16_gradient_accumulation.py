"""float16 gradients of the ops whose forward accumulates in float32 and rounds once
(`tests/test_float16_accumulation.py`): their gradients sum or multiply many float16 terms
too, and on every target they are within the bound below of the exact (float64) gradient of
the same float16 inputs, worked out here by hand.

Before: the reference's gradient rules (the numpy targets; the other targets take the
framework's own gradient) ran in float16. Here, prod's exclusive products along 4,096 factors
were 154 and 133 ulps off; einsum's gradient contracting 4,096 terms 144 ulps, a batched one
contracting 1,024 terms 2.03; softmax's down axis 0 of 4,096 rows 69 ulps of its terms (its
float16 sum of g * out); log_softmax's down axis 0 34 times the checker's float16 budget (its
float16 sum of g): 12 cases failed, all on numpy:eager and numpy:static. torch, TensorFlow
and Paddle passed.

The gradient of an operand that broadcast (a bias [4] against [4,096, 4] rows) sums the
cotangent: the reference (`unbroadcast`, and the NumPy fast kernels' add and sub) and TF (its
gradient's float16 Sum, quirk "add (sub, mul, div, where)") summed in float16, up to 518 ulps
off: 30 cases failed, on numpy:eager, numpy:static and the three TF targets. So did the
gradient of `take` with repeated indices (the reference's np.add.at into float16, TF's
float16 UnsortedSegmentSum, quirk "take"): 515 ulps off.
"""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

TERMS = 4096


def _uniform(low, high, shape, seed):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float16)


def _gradients(op, inputs, cotangent):
    """d sum(op(*inputs) * cotangent) / d inputs, the loss summed in float32 (a float16 sum
    of 4,096 products would overflow; d sum / d y is the cotangent exactly either way)."""
    weights = cotangent.astype(np.float32)

    def loss(*xs):
        return ug.sum(ug.cast(op(*xs), "float32") * weights)

    argnums = tuple(range(len(inputs)))
    return ug.function(lambda *xs: ug.grad(loss, argnums=argnums)(*xs),
                       name="float16_gradient")


def _ulps(got, exact):
    assert got.dtype == np.float16, got.dtype
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    return float((np.abs(got.astype(np.float64) - exact) / spacing).max())


def _budget_ratio(got, exact):
    # The checker's float16 budget, |got - exact| <= 1e-2 + 1e-2 |exact| (DEFAULT_TOLERANCE)
    error = np.abs(got.astype(np.float64) - exact)
    return float((error / (1e-2 + 1e-2 * np.abs(exact))).max())


def _run(target, op, inputs, cotangent):
    got = run_on(target, _gradients(op, inputs, cotangent), *inputs)
    return got if isinstance(got, list) else [got]


# -- products and contractions: within one ulp of the exact gradient ---------------------


def _prod_case(axis):
    # Factors within 2% of 1: every exclusive product of 4,095 of them lies in [0.1, 10].
    x = _uniform(0.98, 1.02, (TERMS, 4) if axis == 0 else (4, TERMS), seed=axis)
    w = _uniform(0.5, 1.0, (4,), seed=10 + axis)
    wide = x.astype(np.float64)
    exact = np.expand_dims(w.astype(np.float64), axis) * wide.prod(axis, keepdims=True) / wide
    return (lambda x: ug.prod(x, axis=axis)), [x], w, [exact]


def _contraction_case(kind):
    # Every term positive: no cancellation, so one ulp is a fair bound for a sum rounded once.
    if kind == "einsum" or kind == "matmul":  # b's gradient a.T @ w sums 4,096 terms
        a, b = _uniform(0.5, 1.0, (TERMS, 8), 20), _uniform(0.5, 1.0, (8, 6), 21)
        w = _uniform(0.5, 1.0, (TERMS, 6), 22)
        op = ((lambda a, b: ug.einsum("ij,jk->ik", a, b)) if kind == "einsum"
              else (lambda a, b: ug.matmul(a, b)))
    else:  # batched: a's gradient w @ b.T sums 1,024 terms per batch
        a, b = _uniform(0.5, 1.0, (2, 6, 8), 23), _uniform(0.5, 1.0, (2, 8, 1024), 24)
        w = _uniform(0.5, 1.0, (2, 6, 1024), 25)
        op = lambda a, b: ug.einsum("bij,bjk->bik", a, b)  # noqa: E731
    a64, b64, w64 = (v.astype(np.float64) for v in (a, b, w))
    exact = [w64 @ np.swapaxes(b64, -1, -2), np.swapaxes(a64, -1, -2) @ w64]
    return op, [a, b], w, exact


def _cumsum_case(axis):
    x = _uniform(0.5, 1.0, (TERMS, 4) if axis == 0 else (4, TERMS), seed=30 + axis)
    w = _uniform(0.5, 1.0, x.shape, seed=32 + axis)
    # input i feeds outputs i, i+1, ...: its gradient sums w from i to the end
    exact = np.flip(np.cumsum(np.flip(w.astype(np.float64), axis), axis), axis)
    return (lambda x: ug.cumsum(x, axis=axis)), [x], w, [exact]


def _broadcast_case(kind):
    # A bias b [4] against rows x [4096, 4]: its gradient sums 4,096 terms of one sign.
    x, b = _uniform(0.5, 1.0, (TERMS, 4), 60), _uniform(0.5, 1.0, (4,), 61)
    w = _uniform(0.5, 1.0, (TERMS, 4), 62)
    x64, b64, w64 = (v.astype(np.float64) for v in (x, b, w))
    if kind == "add":
        op, dx, db = (lambda x, b: x + b), w64, w64
    elif kind == "sub":
        op, dx, db = (lambda x, b: x - b), w64, -w64
    elif kind == "mul":
        op, dx, db = (lambda x, b: x * b), w64 * b64, w64 * x64
    elif kind == "div":
        op, dx, db = (lambda x, b: x / b), w64 / b64, -w64 * x64 / b64**2
    elif kind == "where":  # b where x > 0.75, else x
        above = x64 > 0.75
        op, dx, db = (lambda x, b: ug.where(x > 0.75, b, x)), w64 * ~above, w64 * above
    else:  # maximum: the larger side gets w, a tie 0.5 to each (README, "Ties")
        tie = 0.5 * (x64 == b64)
        op = lambda x, b: ug.maximum(x, b)  # noqa: E731
        dx, db = w64 * ((x64 > b64) + tie), w64 * ((b64 > x64) + tie)
    return op, [x, b], w, [dx, db.sum(0)]


def _take_case(axis):
    # Repeated indices sum their gradients: 4,096 picks of 3 rows (axis 0, one index
    # repeated throughout), or 4,096 picks of 3 columns by [64, 64] indices (axis 1).
    rng = np.random.default_rng(70 + axis)
    if axis == 0:
        x, indices = _uniform(0.5, 1.0, (3, 4), 71), np.zeros(TERMS, np.int64)
        out_shape = (TERMS, 4)
    else:
        x, indices = _uniform(0.5, 1.0, (4, 3), 72), rng.integers(0, 3, (64, 64))
        out_shape = (4, 64, 64)
    w = _uniform(0.5, 1.0, out_shape, 73 + axis)
    exact = np.zeros(x.shape)
    w64 = w.astype(np.float64)
    if axis == 0:
        np.add.at(exact, indices, w64)
    else:
        for i, j in np.ndindex(indices.shape):
            exact[:, indices[i, j]] += w64[:, i, j]
    return (lambda x: ug.take(x, indices, axis=axis)), [x], w, [exact]


ONE_ULP_CASES = {
    "take-axis0": lambda: _take_case(0),
    "take-axis1": lambda: _take_case(1),
    **{f"{kind}-bias": (lambda kind=kind: _broadcast_case(kind))
       for kind in ("add", "sub", "mul", "div", "where", "maximum")},
    "prod-axis0": lambda: _prod_case(0),
    "prod-axis1": lambda: _prod_case(1),
    "einsum": lambda: _contraction_case("einsum"),
    "einsum-batched": lambda: _contraction_case("batched"),
    "matmul": lambda: _contraction_case("matmul"),
    "cumsum-axis0": lambda: _cumsum_case(0),
    "cumsum-axis1": lambda: _cumsum_case(1),
}


@pytest.mark.parametrize("case", sorted(ONE_ULP_CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_float16_gradient_is_rounded_once(target, case):
    op, inputs, w, exact = ONE_ULP_CASES[case]()
    for i, (got, want) in enumerate(zip(_run(target, op, inputs, w), exact, strict=True)):
        ulps = _ulps(got, want)
        assert ulps <= 1.0, f"{case} gradient {i} on {target}: {ulps:.2f} float16 ulps"


# -- softmax and log_softmax --------------------------------------------------------------


def _softmax64(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("target", TARGETS)
def test_float16_softmax_gradient_is_rounded_once(target, axis):
    # p * (g - s), s = sum(g * p): g - s cancels, so the error is counted in ulps of the
    # terms, p * (|g| + |s|), not of the result. Within 1: torch's kernel is 2.03 ulps of
    # the result off here and 0.65 of the terms, the reference in float32 1.6 and 0.60; its
    # float16 sum s down 4,096 rows was 69 ulps of the terms off.
    x = _uniform(-5.0, 5.0, (TERMS, 4) if axis == 0 else (4, TERMS), seed=40 + axis)
    w = _uniform(0.5, 1.0, x.shape, seed=42 + axis)
    p, w64 = _softmax64(x.astype(np.float64), axis), w.astype(np.float64)
    s = (w64 * p).sum(axis, keepdims=True)
    exact = p * (w64 - s)
    (got,) = _run(target, lambda x: ug.softmax(x, axis=axis), [x], w)
    assert got.dtype == np.float16, got.dtype
    terms = np.spacing((p * (np.abs(w64) + np.abs(s))).astype(np.float16)).astype(np.float64)
    ulps = float((np.abs(got.astype(np.float64) - exact) / terms).max())
    assert ulps <= 1.0, (f"softmax axis {axis} gradient on {target}: {ulps:.2f} float16 ulps "
                         "of its terms")


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("target", TARGETS)
def test_float16_log_softmax_gradient_is_within_budget(target, axis):
    # g - exp(out) * sum(g): every target's rule reads the float16 output, whose rounding
    # alone puts it 0.4 to 0.6 of the checker's budget from the exact gradient here (and
    # thousands of ulps where the difference cancels), so the bound is that budget. A
    # float16 sum of g down 4,096 rows put the reference at 34 times it.
    x = _uniform(-5.0, 5.0, (TERMS, 4) if axis == 0 else (4, TERMS), seed=50 + axis)
    w = _uniform(0.5, 1.0, x.shape, seed=52 + axis)
    p, w64 = _softmax64(x.astype(np.float64), axis), w.astype(np.float64)
    exact = w64 - p * w64.sum(axis, keepdims=True)
    (got,) = _run(target, lambda x: ug.log_softmax(x, axis=axis), [x], w)
    ratio = _budget_ratio(got, exact)
    assert ratio <= 1.0, (f"log_softmax axis {axis} gradient on {target}: {ratio:.2f} times "
                          "the checker's float16 budget")
