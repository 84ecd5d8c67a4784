"""`ug.argsort` on all 9 targets (and onnxruntime:static): NumPy's stable order (ties keep
their order, 0.0 ties -0.0, NaN last after +inf) in float16/32/64, ints at their extremes
(TF's stable sort negates), every axis, against `np.argsort(x, axis, kind="stable")`."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on

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
