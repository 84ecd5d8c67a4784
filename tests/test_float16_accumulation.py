"""float16 sums and products on every target: computed in float32 and rounded to float16
once, so within one float16 ulp of the exact (float64) result of the float16 inputs, along
any axis.

Before: NumPy's own float16 sum and cumsum (the reference engine) and TF's float16 Sum, Mean
and Cumsum rounded every partial sum to float16: 4,096 terms of [0.5, 1) along axis 0 were
about 516 ulps off, past the checker's own float16 budget (21 of these cases failed).
Products of 4,096 factors were ~144 ulps off on NumPy (down axis 0), torch and TF, past the
budget too (12 more cases failed). TF's float16 einsum contracted in float16, 4.4 to 6.9
ulps off where its MatMul is within 0.5, and NumPy's batched one 12 (8 more). avg_pool2d's
8 x 8 windows: NumPy 1.8 ulps, TF 5.0 (5 more). NumPy's float16 softmax down axis 0 of
4,096 rows: 119 ulps, log_softmax 15 (6 more).
And TF's float16 FloorDiv floored the float16-rounded quotient: 14.516 // 0.605 gave 24.
"""

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on

import unigraph as ug

TERMS = 4096


def _positive(shape, seed):
    # All terms and partial sums positive: no cancellation, so one ulp of the result is a
    # fair bound for a correctly rounded sum, and a float16 running sum (ulp 2 past 2,048,
    # adding terms of [0.5, 1)) is many ulps off.
    return np.random.default_rng(seed).uniform(0.5, 1.0, shape).astype(np.float16)


def _assert_within_one_ulp(got, exact, what):
    assert got.dtype == np.float16, f"{what}: {got.dtype}"
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    ulps = np.abs(got.astype(np.float64) - exact) / spacing
    assert ulps.max() <= 1.0, f"{what}: {ulps.max():.2f} float16 ulps from the exact sum"


def _factors(shape, seed):
    # Products of 4,096 factors within 2% of 1 stay within [0.1, 10]; a float16 running
    # product is ~144 ulps off, a float32 one rounded once within 1 (its own error, under
    # 4,096 float32 roundings, is a quarter of a float16 ulp at worst).
    return np.random.default_rng(seed).uniform(0.98, 1.02, shape).astype(np.float16)


SUMS = {
    "sum": (lambda x, axis: ug.sum(x, axis=axis), lambda w, axis: w.sum(axis), _positive),
    "mean": (lambda x, axis: ug.mean(x, axis=axis), lambda w, axis: w.mean(axis), _positive),
    "cumsum": (lambda x, axis: ug.cumsum(x, axis=axis), lambda w, axis: np.cumsum(w, axis),
               _positive),
    "prod": (lambda x, axis: ug.prod(x, axis=axis), lambda w, axis: w.prod(axis), _factors),
}


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", sorted(SUMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_sum_is_rounded_once(target, op, axis):
    ug_op, exact_op, inputs = SUMS[op]
    x = inputs((TERMS, 4) if axis == 0 else (4, TERMS), seed=axis)
    fn = ug.function(lambda x: ug_op(x, axis), name=f"float16_{op}")
    got = run_on(target, fn, x)
    _assert_within_one_ulp(got, exact_op(x.astype(np.float64), axis), f"{op} on {target}")


@pytest.mark.parametrize("equation,shapes", [
    ("ik,jk->ij", ((8, TERMS), (6, TERMS))),
    ("bik,bkj->bij", ((2, 8, 1024), (2, 1024, 6))),
])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_einsum_is_rounded_once(target, equation, shapes):
    a, b = (_positive(shape, seed) for seed, shape in enumerate(shapes))
    fn = ug.function(lambda a, b: ug.einsum(equation, a, b), name="float16_einsum")
    got = run_on(target, fn, a, b)
    exact = np.einsum(equation, a.astype(np.float64), b.astype(np.float64))
    _assert_within_one_ulp(got, exact, f"einsum {equation} on {target}")


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_avg_pool2d_is_rounded_once(target):
    # 2,048 windows of 64 terms of [0.5, 1): a window summed in float16 is several ulps off
    # somewhere; the mean of a float32 sum rounded once is within one everywhere.
    x = _positive((4, 8, 64, 64), seed=3)
    fn = ug.function(lambda x: ug.avg_pool2d(x, 8), name="float16_avg_pool2d")
    got = run_on(target, fn, x)
    exact = x.astype(np.float64).reshape(4, 8, 8, 8, 8, 8).mean(axis=(3, 5))
    _assert_within_one_ulp(got, exact, f"avg_pool2d on {target}")


def _exact_softmax(w, axis):
    e = np.exp(w - w.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _exact_log_softmax(w, axis):
    shifted = w - w.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op,exact_op", [(ug.softmax, _exact_softmax),
                                         (ug.log_softmax, _exact_log_softmax)])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_softmax_is_rounded_once(target, op, exact_op, axis):
    # Within 2 ulps, not 1: torch's float16 softmax down a non-last axis is 1.1 off (its
    # float32 exp and division, rounded once). A float16 normaliser is tens of ulps off.
    x = np.random.default_rng(4).uniform(-5.0, 5.0, (TERMS, 4) if axis == 0 else (4, TERMS))
    x = x.astype(np.float16)
    fn = ug.function(lambda x: op(x, axis=axis), name=f"float16_{op.__name__}")
    got = run_on(target, fn, x)
    exact = exact_op(x.astype(np.float64), axis)
    assert got.dtype == np.float16
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    ulps = np.abs(got.astype(np.float64) - exact) / spacing
    assert ulps.max() <= 2.0, f"{op.__name__} on {target}: {ulps.max():.2f} float16 ulps"


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_floor_divide_floors_the_exact_quotient(target):
    # Each float16 quotient rounds up onto the next integer (14.515625 / 0.60498046875 is
    # 23.9935..., 24.0 in float16); the exact quotients floor to these, worked out by hand.
    a = np.array([14.516, -20.0, 6.844, -18.66], np.float16)
    b = np.array([0.605, 0.645, 1.369, 1.865], np.float16)
    fn = ug.function(lambda a, b: ug.floor_divide(a, b), name="float16_floor_divide")
    got = run_on(target, fn, a, b)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.float16([23.0, -32.0, 4.0, -11.0]),
                                  err_msg=f"floor_divide on {target}")


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_float16_scatter_add_is_rounded_once(target, axis):
    # 4,096 updates of [0.5, 1) into one row (column) of x: each sum within 1 ulp, as a
    # float32 sum rounded once; added in float16 it was 515 ulps off on the numpy targets,
    # Paddle and TF (torch and onnxruntime: 0.45).
    x = _positive((3, 4) if axis == 0 else (4, 3), seed=5)
    updates = _positive((TERMS, 4) if axis == 0 else (4, TERMS), seed=6)
    indices = np.zeros(TERMS, np.int64)
    fn = ug.function(lambda x, u: ug.scatter_add(x, indices, u, axis=axis),
                     name="float16_scatter_add")
    got = run_on(target, fn, x, updates)
    exact = x.astype(np.float64)
    wide = updates.astype(np.float64)
    if axis == 0:
        exact[0] += wide.sum(0)
    else:
        exact[:, 0] += wide.sum(1)
    _assert_within_one_ulp(got, exact, f"scatter_add on {target}")
