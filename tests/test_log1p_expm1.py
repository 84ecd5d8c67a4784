"""`ug.log1p` and `ug.expm1` on all 9 targets (and onnxruntime:static, where ONNX has no such
op and unigraph writes one): accurate near 0 in float16/32/64 against NumPy's float64
log1p/expm1 (log(1 + 1e-10) would be 0 in float32), -1 <-> -inf at the edges, and the
gradients 1 / (1 + x) and exp(x) there."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

# Per dtype: values that 1 + x or exp(x) would round away, then ordinary ones and the edges.
NEAR_ZERO = {
    "float64": [1e-10, -1e-10, 1e-20, -3e-16, 5e-8],
    "float32": [1e-10, -3e-9, 1e-7, -2e-6, 5e-5],
    "float16": [1e-4, -2e-4, 1e-3, -3e-3, 6e-5],
}
ORDINARY = [0.0, -0.0, 0.5, -0.5, 2.0, -0.9, 10.0]
RTOL = {"float64": 1e-15, "float32": 2.5e-7, "float16": 1e-3}  # about 2 ulps


def _check(got, want, dtype):
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[dtype], atol=0)
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", sorted(NEAR_ZERO))
def test_log1p_is_accurate_near_zero_and_minus_inf_at_minus_one(target, dtype):
    x = np.array(NEAR_ZERO[dtype] + ORDINARY + [-1.0, np.inf], dtype)
    got = run_on(target, ug.function(ug.log1p), x)
    want = np.log1p(x.astype(np.float64)).astype(dtype)  # -1 -> -inf, inf -> inf
    _check(got, want, dtype)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", sorted(NEAR_ZERO))
def test_expm1_is_accurate_near_zero_and_minus_one_at_minus_inf(target, dtype):
    x = np.array(NEAR_ZERO[dtype] + ORDINARY + [-np.inf, -50.0, np.inf], dtype)
    got = run_on(target, ug.function(ug.expm1), x)
    want = np.expm1(x.astype(np.float64)).astype(dtype)  # -inf -> -1, inf -> inf
    _check(got, want, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_the_gradients_near_zero(target):
    x = np.array([1e-10, -1e-10, 0.5, -0.5, 3.0])

    def loss(x):
        return ug.sum(ug.log1p(x)) + ug.sum(ug.expm1(x) * 2.0)

    value, gradient = run_on(target, ug.function(lambda x: ug.value_and_grad(loss)(x)), x)
    np.testing.assert_allclose(value, np.sum(np.log1p(x)) + 2 * np.sum(np.expm1(x)),
                               rtol=1e-14)
    np.testing.assert_allclose(gradient, 1 / (1 + x) + 2 * np.exp(x), rtol=1e-14)
