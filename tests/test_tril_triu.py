"""`ug.tril` / `ug.triu` on all 9 targets (and onnxruntime:static): every dtype (Paddle and
ONNX Runtime have no int8/uint8/int16 kernel), k below, on and above the diagonal and past
the matrix, batches, special values kept where the triangle keeps them, the gradient, and
the error for a vector. Expected values: NumPy's np.tril / np.triu."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"]
KS = [-5, -1, 0, 2, 7]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_k(target, dtype):
    x = (np.arange(2 * 3 * 4).reshape(2, 3, 4) % 5 + 1).astype(dtype)
    fn = ug.function(lambda x: tuple(f(x, k) for k in KS for f in (ug.tril, ug.triu)))
    got = run_on(target, fn, x)
    wants = [f(x, k) for k in KS for f in (np.tril, np.triu)]
    for g, want in zip(got, wants, strict=True):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_special_values_kept_inside_the_triangle(target):
    x = np.array([[np.nan, -0.0, np.inf], [-np.inf, -0.0, np.nan], [1.0, np.nan, -0.0]],
                 np.float32)
    got = run_on(target, ug.function(lambda x: (ug.tril(x), ug.triu(x, 1))), x)
    for g, want in zip(got, [np.tril(x), np.triu(x, 1)]):
        np.testing.assert_array_equal(g, want)  # NaN where NaN
        np.testing.assert_array_equal(np.signbit(g), np.signbit(want))


@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_the_triangle_of_the_cotangent(target):
    x = np.arange(24.0).reshape(2, 3, 4) / 7
    w = np.linspace(-1.0, 1.0, 24).reshape(2, 3, 4)

    def loss(x):
        return ug.sum(ug.tril(x, -1) * w) + ug.sum(ug.triu(x, 2) * w * 3.0)

    value, gradient = run_on(target, ug.function(lambda x: ug.value_and_grad(loss)(x)), x)
    np.testing.assert_allclose(value, np.sum(np.tril(x, -1) * w) + np.sum(np.triu(x, 2) * w * 3),
                               rtol=1e-13)
    np.testing.assert_allclose(gradient, np.tril(w, -1) + 3 * np.triu(w, 2), rtol=1e-13)


@pytest.mark.parametrize("target", TARGETS)
def test_a_vector_is_refused_by_name(target):
    with pytest.raises(ug.ShapeError, match=r"tril: x is float64\[3\], but tril needs rank >= 2"):
        run_on(target, ug.function(lambda x: ug.tril(x)), np.ones(3))
