"""A `cond` whose branch reads an empty value (a batch of 0) made before it, and the
gradient through it, on all 9 targets (and onnxruntime:static forward): value and gradient
are numpy:eager's, in their shapes. paddle:static passed the empty value into its `if` op,
whose backward gave its gradient no memory: the gradient of `x * 2.0` that made it then
failed at run time with a raw RuntimeError ("Tensor holds no memory"; random tester, the
CI batch with dict results and pair-returning conds). Also a `while_loop` whose body reads
one, and with a dim left open by input_spec.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS, run_on

import unigraph as ug

X = np.array([[-0.499, 1.144, 1.629], [0.379, 0.228, -1.021]], np.float32)
EMPTY = np.zeros((0, 4), np.float32)
WEIGHTS = np.cos(np.arange(6.0)).reshape(2, 3)


def _cond(x, e):
    v = e * 2.0  # made before the cond, read in a branch
    return ug.cond(ug.mean(x) < 0.0, lambda: x * 3.0, lambda: x + ug.sum(v)), v


def _loop(x, e):
    v = e * 2.0  # made before the loop, read in its body
    _, w = ug.while_loop(lambda k, w: k < 2, lambda k, w: (k + 1, w * 1.5 + ug.sum(v)),
                         (ug.tensor(0), x))
    return w, v


def _reference(program, x):
    with ug.use_backend("numpy", "eager"):
        a, b = ug.tensor(x.astype(np.float64)), ug.tensor(EMPTY.astype(np.float64))
        out = [np.asarray(o.numpy()) for o in program(a, b)]
        grads = ug.grad(lambda a, b: ug.sum(program(a, b)[0] * WEIGHTS), argnums=(0, 1))(a, b)
    return out, [np.asarray(g.numpy()) for g in grads]


@pytest.mark.parametrize("spec", [None, (None, 4)])
@pytest.mark.parametrize("sign", [1.0, -1.0])  # either branch taken
@pytest.mark.parametrize("program", [_cond, _loop])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_branch_reading_an_empty_value(target, program, sign, spec):
    x = X * np.float32(sign)
    spec = None if spec is None else [ug.Spec((2, 3), "float32"), ug.Spec(spec, "float32")]
    expected, expected_grads = _reference(program, x)
    out = run_on(target, ug.function(program, input_spec=spec), x, EMPTY)
    assert out[1].shape == (0, 4) and out[1].dtype == np.float32
    np.testing.assert_allclose(out[0], expected[0], rtol=1e-5)
    if target in INFERENCE_TARGETS:
        return

    def loss(a, b):
        return ug.sum(program(a, b)[0] * WEIGHTS.astype(np.float32))

    grad = ug.function(lambda a, b: ug.grad(loss, argnums=(0, 1))(a, b), input_spec=spec)
    d_x, d_e = run_on(target, grad, x, EMPTY)
    assert d_e.shape == (0, 4) and d_e.dtype == np.float32
    np.testing.assert_allclose(d_x, expected_grads[0], rtol=1e-5)
