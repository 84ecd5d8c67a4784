"""`ug.optim.Adam` with its default eps (1e-8) on float16 parameters, two compiled steps, on
all 9 targets, fused or not: the update runs in float32 and the parameter and both moments
are each rounded to float16 once (torch.optim.Adam(fused=True)'s float16 update, and
Paddle's, whose kernel has no float16).

Before, the formula ran op by op in float16, where 1e-8 is 0: a parameter whose gradient was
0 had v = 0 and became 0 / 0 = NaN, one whose gradient's square underflowed (1e-4) became
inf, on every target but a fused Paddle one (torch's default foreach Adam does the same).
The random-program tester found it (a float16 rerun of seed 14004: 7 of 9 targets NaN).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

W0 = np.array([[0.5, -0.25], [0.75, 1.0]], np.float16)
# The gradient of sum(x @ w) is x's column sums along w's columns: 1.25 for w's first row,
# 1e-4 (its square is 0 in float16) for the second, and 0 for a third parameter.
X = np.array([[1.0, 1e-4], [0.25, 0.0]], np.float16)
LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-8


def _expected():
    """Two steps of the formula in float32 (NumPy), op by op in its order, each of w, m, v
    rounded to float16 after each step (the weak Python numbers as float32)."""
    f32 = np.float32
    w, b = W0, np.zeros(3, np.float16)
    g_w = np.repeat(X.sum(axis=0)[:, None], 2, axis=1)
    g_b = np.zeros(3, np.float16)
    state = {"w": [w, np.zeros_like(w), np.zeros_like(w)],
             "b": [b, np.zeros_like(b), np.zeros_like(b)]}
    for t in (1, 2):
        for name, g in (("w", g_w), ("b", g_b)):
            p, m, v = (x.astype(f32) for x in state[name])
            g = g.astype(f32)
            m = m * f32(B1) + g * f32(1 - B1)
            v = v * f32(B2) + (g * g) * f32(1 - B2)
            c1, c2 = f32(1 - B1 ** float(t)), f32(1 - B2 ** float(t))
            p = p - ((m / c1) * f32(LR)) / (np.sqrt(v / c2) + f32(EPS))
            state[name] = [x.astype(np.float16) for x in (p, m, v)]
    return state


@pytest.mark.parametrize("fused", [False, True], ids=["formula", "fused"])
@pytest.mark.parametrize("target", TARGETS)
def test_float16_adam_with_the_default_eps_stays_finite(target, fused):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        weight = ug.nn.Parameter(W0.copy())
        bias = ug.nn.Parameter(np.zeros(3, np.float16))
        opt = ug.optim.Adam([weight, bias], lr=LR, fused=fused)  # eps: the default, 1e-8

        @ug.function
        def step(x):
            loss, grads = ug.value_and_grad(lambda: ug.sum(x @ weight) + ug.sum(bias * 0.0),
                                            wrt=opt.params)()
            opt.step(grads)
            return loss

        step(X)
        step(X)
        got = {name: [p.numpy(), opt.state(p, "m").numpy(), opt.state(p, "v").numpy()]
               for name, p in (("w", weight), ("b", bias))}
    for name, want in _expected().items():
        for value, expected in zip(got[name], want):
            assert value.dtype == np.float16
            assert np.isfinite(value).all(), (name, value)
            if fused:  # the framework's own kernels: its rounding, within a float16 ulp
                np.testing.assert_allclose(value.astype(np.float64),
                                           expected.astype(np.float64), rtol=1e-3, atol=1e-7)
            else:  # the formula: the same bits on every target
                np.testing.assert_array_equal(value, expected)
