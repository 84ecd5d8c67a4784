"""`ug.argsort` and `ug.sort` on all 9 targets (and onnxruntime:static): NumPy's stable order
(ties keep their order, 0.0 ties -0.0, NaN last after +inf) in float16/32/64, ints at their
extremes, every axis, against `np.argsort(x, axis, kind="stable")` and `np.sort`; sort's
gradient goes back to each element's place."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

SPECIAL = [3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0, -0.0, np.inf, -0.0, 0.0, -2.5]
INTS = ["int8", "uint8", "int16", "int32", "int64"]


def _check(got, x, axis):
    want = np.argsort(x, axis=axis, kind="stable")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floats_ties_and_nan_along_every_axis(target, dtype):
    rng = np.random.default_rng(3)
    x = rng.choice(np.array(SPECIAL, dtype), size=(4, 5, 6))
    fn = ug.function(lambda x: (ug.argsort(x, 0), ug.argsort(x, 1), ug.argsort(x),
                                ug.argsort(x[0, 0], 0)))
    got = run_on(target, fn, x)
    for g, (value, axis) in zip(got, [(x, 0), (x, 1), (x, -1), (x[0, 0], 0)]):
        _check(g, value, axis)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", INTS)
def test_ints_at_their_extremes(target, dtype):
    info = np.iinfo(dtype)
    values = np.array([info.max, info.min, 0, 1, info.min, info.max, 1, 0], dtype)
    x = np.stack([values, values[::-1]])
    got = run_on(target, ug.function(lambda x: (ug.argsort(x), ug.argsort(x, 0))), x)
    _check(got[0], x, -1)
    _check(got[1], x, 0)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int64"])
def test_sort_along_every_axis(target, dtype):
    rng = np.random.default_rng(4)
    if dtype.startswith("float"):
        x = rng.choice(np.array(SPECIAL, dtype), size=(3, 4, 5))
    else:
        x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (3, 4, 5), dtype=dtype)
    fn = ug.function(lambda x: (ug.sort(x, 0), ug.sort(x, 1), ug.sort(x), ug.sort(x[1, 2])))
    got = run_on(target, fn, x)
    for g, (value, axis) in zip(got, [(x, 0), (x, 1), (x, -1), (x[1, 2], 0)]):
        # stable: which of two tied zeros (0.0, -0.0) comes first is their order in x
        want = np.sort(value, axis=axis, kind="stable")
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(want))


@pytest.mark.parametrize("target", TARGETS)
def test_sort_gradient_goes_back_to_each_place(target):
    x = np.array([[0.5, -2.0, 3.0, 1.0], [2.0, 2.0, -1.0, 0.0], [1.5, 0.25, -0.5, 4.0]])
    w = np.arange(12.0).reshape(3, 4) - 5

    def loss(x):
        return ug.sum(ug.sort(x, axis=0) * w) + ug.sum(ug.sort(x) * w * 2.0)

    value, gradient = run_on(target, ug.function(lambda x: ug.value_and_grad(loss)(x)), x)
    # d/dx[i] of sum(sort(x) * w) is w at the place x[i] went to: w[rank of i].
    by_columns = np.empty_like(w)
    np.put_along_axis(by_columns, np.argsort(x, axis=0, kind="stable"), w, axis=0)
    by_rows = np.empty_like(w)
    np.put_along_axis(by_rows, np.argsort(x, axis=1, kind="stable"), w * 2.0, axis=1)
    np.testing.assert_allclose(value, np.sum(np.sort(x, axis=0) * w)
                               + np.sum(np.sort(x) * w * 2.0), rtol=1e-13)
    np.testing.assert_allclose(gradient, by_columns + by_rows, rtol=1e-13)
