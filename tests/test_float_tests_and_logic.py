"""`ug.isnan`, `ug.isinf`, `ug.isfinite`, `ug.any`, `ug.all` and `ug.logical_xor` on all 9
targets (and onnxruntime:static: inference only), against NumPy: float16 and computed
special values, ints and bools, empty axes (any: False, all: True), a non-bool x read as
x != 0, and a NaN guard's gradient."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, -1.5, 3.0, 6e4]
TESTS = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}


def _same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(TESTS))
def test_float_tests_of_special_and_computed_values(target, name, dtype):
    x = np.array(SPECIAL, dtype)
    y = np.array([1.0, 0.0, -1.0, 0.0], dtype)
    test = getattr(ug, name)
    # y / 0 makes inf, -inf and NaN inside the graph; x * 1e4 overflows float16 (6e8).
    fn = ug.function(lambda x, y: (test(x), test(y / 0.0), test(x * 1e4)))
    got = run_on(target, fn, x, y)
    with np.errstate(all="ignore"):
        wants = [TESTS[name](x), TESTS[name](y / np.array(0.0, dtype)),
                 TESTS[name](x * np.array(1e4, dtype))]
    for g, want in zip(got, wants):
        _same(g, want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "bool"])
def test_float_tests_of_ints_and_bools(target, dtype):
    x = np.array([[0, 1], [1, 0], [1, 1]]).astype(dtype)
    fn = ug.function(lambda x: (ug.isnan(x), ug.isinf(x), ug.isfinite(x)))
    for g, test in zip(run_on(target, fn, x), (np.isnan, np.isinf, np.isfinite)):
        _same(g, test(x))


EMPTY = [((0, 3), 0), ((0, 3), 1), ((0, 3), None), ((2, 0, 3), (0, 1)), ((3, 0), 1)]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", EMPTY, ids=[f"{s}-{a}" for s, a in EMPTY])
def test_any_and_all_over_empty_axes(target, shape, axis, keepdims):
    x = np.zeros(shape, bool)
    fn = ug.function(lambda x: (ug.any(x, axis, keepdims), ug.all(x, axis, keepdims)))
    got = run_on(target, fn, x)
    _same(got[0], np.asarray(np.any(x, axis=axis, keepdims=keepdims)))
    _same(got[1], np.asarray(np.all(x, axis=axis, keepdims=keepdims)))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int64", "bool"])
def test_any_and_all_read_a_non_bool_x_as_nonzero(target, dtype):
    x = np.array([[0, 2, 0], [0, 0, 0], [1, 3, 5]]).astype(dtype)
    if dtype.startswith("float"):
        x[1, 1] = np.nan  # true, as NumPy
    fn = ug.function(lambda x: (ug.any(x, axis=1), ug.all(x, axis=1), ug.any(x), ug.all(x),
                                ug.all(x, axis=(0, 1), keepdims=True)))
    got = run_on(target, fn, x)
    wants = [np.any(x, axis=1), np.all(x, axis=1), np.asarray(np.any(x)),
             np.asarray(np.all(x)), np.all(x, axis=(0, 1), keepdims=True)]
    for g, want in zip(got, wants):
        _same(g, want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_logical_xor_broadcasts_and_is_the_operator(target):
    x = np.array([True, False, True])
    y = np.array([[True], [False]])
    fn = ug.function(lambda x, y: (ug.logical_xor(x, y), x ^ y, ug.logical_xor(x, True)))
    got = run_on(target, fn, x, y)
    for g, want in zip(got, [np.logical_xor(x, y), x ^ y, np.logical_xor(x, True)]):
        _same(g, want)


@pytest.mark.parametrize("target", TARGETS)
def test_a_nan_guard_passes_the_gradient_where_finite(target):
    # loss = sum(where(isfinite(x), x, 0) * w): value sum of the finite x * w, gradient w
    # where x is finite, else 0 (worked out by hand).
    x = np.array([1.5, np.nan, -2.0, np.inf, 0.5])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def loss(x):
        return ug.sum(ug.where(ug.isfinite(x), x, 0.0) * w)

    value, gradient = run_on(target, ug.function(lambda x: ug.value_and_grad(loss)(x)), x)
    np.testing.assert_allclose(value, 1.5 - 6.0 + 2.5, rtol=1e-12)
    np.testing.assert_array_equal(gradient, [1.0, 0.0, 3.0, 0.0, 5.0])
