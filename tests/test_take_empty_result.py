"""ug.take of a tensor with elements by indices with none (and so x[mask] of an all-False
NumPy mask), on all 9 targets and onnxruntime:static: the empty result has eager NumPy's
shape, and x's gradient is zeros of x's shape.

Found by the random tester, seed 12007 (`--max-depth 0`), on paddle:eager:
`v1[np.array([False, False, False])]` of a [3] value raised a raw SystemError ("<built-in
function reshape> returned a result with an exception set"): Paddle's eager reshape by a
shape tensor of an empty result raises it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target

X1 = np.array([0.5, -1.25, 2.0], np.float32)
X2 = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5

CASES = {  # name: (function, input)
    "take, 1-D, no indices": (lambda x: ug.take(x, np.zeros(0, np.int64), axis=0) * 2.0, X1),
    "x[mask], all False": (lambda x: ug.tanh(x[np.array([False, False, False])]), X1),
    "take, indices (2, 0)": (lambda x: ug.take(x, np.zeros((2, 0), np.int64), axis=0), X2),
    "take, axis 1, no indices": (lambda x: ug.take(x, np.zeros(0, np.int64), axis=1) + 1.0,
                                 X2),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_take_of_no_indices_is_empty_on_every_target(target, name):
    fn, x = CASES[name]
    with ug.use_backend("numpy", "eager"):
        want = fn(ug.tensor(x)).numpy()
    assert want.size == 0
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(fn)(x).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
        if target in INFERENCE_TARGETS:
            return
        grad = ug.function(ug.grad(lambda x: ug.sum(fn(x))))(x).numpy()
        np.testing.assert_array_equal(grad, np.zeros_like(x))
