"""Gradients where the bookkeeping of a tape matters (numpy:eager's `reference.eager.Tape`
is one; the other targets use their framework's autodiff): a value read by several ops
(contributions summed in the order they arrive), a leaf no gradient reaches (zeros), an op
with a non-differentiable integer operand (`take`'s indices), an op whose result is one of
its inputs (a cast to its own dtype), a parameter and an argument together; on all 9
targets against the hand-derived float64 gradients."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

X = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 7
W = (np.arange(6, dtype=np.float32).reshape(3, 2) + 1.0) / 5
INDICES = np.array([1, 0, 1], np.int64)


def _loss_of(param):
    def loss(x, unused, indices):
        y = ug.cast(x, "float32")  # its own dtype: the same value
        h = y * y + ug.exp(y) * 0.5  # y read by three ops
        rows = ug.take(ug.matmul(h, param), indices, axis=1)  # int indices: no gradient
        return ug.sum(rows * rows) + ug.sum(h)

    return loss


def _expected():
    x, w = X.astype(np.float64), W.astype(np.float64)
    h = x * x + np.exp(x) * 0.5
    m = h @ w  # [2, 2]
    dm = np.zeros_like(m)
    for j in INDICES:  # rows = m[:, INDICES]; d/drows of sum(rows**2) = 2 rows
        dm[:, j] += 2 * m[:, j]
    dh = dm @ w.T + 1.0
    dx = dh * (2 * x + np.exp(x) * 0.5)
    dw = h.T @ dm
    return dx, dw


@pytest.mark.parametrize("target", TARGETS)
def test_shared_reads_unused_leaf_int_operand_and_parameter(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        param = ug.Parameter(W, name="w")
        loss_fn = _loss_of(param)
        both = ug.value_and_grad(loss_fn, argnums=(0, 1))
        params = ug.value_and_grad(loss_fn, wrt=[param])

        @ug.function
        def step(x, unused, indices):
            _, (dx, du) = both(x, unused, indices)
            loss, (dw,) = params(x, unused, indices)
            return loss, dx, du, dw

        loss, dx, du, dw = (np.asarray(v.numpy()) for v in step(X, X + 1, INDICES))
    want_dx, want_dw = _expected()
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-5, atol=1e-6)
    assert du.shape == X.shape and du.dtype == np.float32 and not du.any()
    assert np.isfinite(loss) and loss.shape == ()
