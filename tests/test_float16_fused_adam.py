"""`ug.optim.Adam(fused=True)` on float16 parameters, a compiled step called twice, on all
9 targets: the moments m and v after the steps, and the weights, against
the documented formula worked out in float64 by hand here.

paddle:static wrote the float16 update into float32 copies (its kernel has no float16) but
planned it as a fused write into the variables themselves, so m and v stayed 0 and the
second step started from fresh moments (the weights went wrong, silently); paddle:eager and
the other targets were right. The random-program tester found it (seed 14004, float16
training programs, 4 programs).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

W0 = np.array([[0.5, -0.25], [0.75, 1.0]], np.float16)
X = np.array([[1.0, -0.5], [0.25, 2.0]], np.float16)
LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-8


def _expected():
    """Two Adam steps of loss = sum(x @ w) in float64 (its gradient is the same each
    step: x's column sums, repeated along w's columns)."""
    w = W0.astype(np.float64)
    g = np.repeat(X.astype(np.float64).sum(axis=0)[:, None], 2, axis=1)
    m = v = np.zeros_like(w)
    for t in (1, 2):
        m, v = B1 * m + (1 - B1) * g, B2 * v + (1 - B2) * g * g
        w = w - LR * (m / (1 - B1**t)) / (np.sqrt(v / (1 - B2**t)) + EPS)
    return w, m, v


@pytest.mark.parametrize("target", TARGETS)
def test_fused_adam_on_float16_parameters_keeps_its_moments(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        weight = ug.nn.Parameter(W0.copy())
        opt = ug.optim.Adam([weight], lr=LR, betas=(B1, B2), eps=EPS, fused=True)

        @ug.function
        def step(x):
            loss, grads = ug.value_and_grad(lambda: ug.sum(x @ weight), wrt=opt.params)()
            opt.step(grads)
            return loss

        step(X)
        step(X)
        got = [weight.numpy(), opt.state(weight, "m").numpy(), opt.state(weight, "v").numpy()]
    for value, want in zip(got, _expected()):
        assert value.dtype == np.float16
        np.testing.assert_allclose(value.astype(np.float64), want, rtol=2e-3, atol=1e-4)
