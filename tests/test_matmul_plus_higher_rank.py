"""A 2-D matmul plus an addend of more dims whose leading ones are 1 (`[1, 1, N]`), on all 9
targets: the value has the broadcast's shape and its gradient numpy:eager's. On
tensorflow:function Grappler fused the sum into MatMul + BiasAdd, which kept the product's 2
dims: a silently wrong shape, and in a gradient a raw InvalidArgumentError from AddN (random
tester, seed 5013)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

A = np.array([[1.683, 0.759]], dtype=np.float32)
B = np.array([[-1.703, 0.5], [1.26, -0.25]], dtype=np.float32)
C = np.array([[[1.676, -0.3]]], dtype=np.float32)
WEIGHTS = np.array([[[0.75, -1.5]]], dtype=np.float32)


def matmul_plus(a, b, c):
    return ug.matmul(a, b) + c


def loss(a, b, c):
    y = matmul_plus(a, b, c)
    return ug.sum(ug.abs(y) * WEIGHTS) + ug.sum(ug.tanh(y))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("addend_first", [False, True])
def test_the_value_has_the_broadcast_shape(target, addend_first):
    fn = ug.function((lambda a, b, c: c + ug.matmul(a, b)) if addend_first else matmul_plus)
    out = run_on(target, fn, A, B, C)
    np.testing.assert_allclose(out, A @ B + C, rtol=1e-6)
    assert out.shape == (1, 1, 2)


@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_numpy_eagers(target):
    grad = ug.function(lambda a, b, c: ug.grad(loss, argnums=(0, 1, 2))(a, b, c))
    expected = run_on("numpy:eager", grad, A, B, C)
    got = run_on(target, grad, A, B, C)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
