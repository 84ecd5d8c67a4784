"""`ug.take` reading the result of an op whose TensorFlow lowering has its own gradient
(`tf.custom_gradient`: maximum/minimum's tie split, max_pool2d's NaN rule, reductions over
more merged dims than TF broadcasts), on all 9 targets. tf.gather's gradient is an
IndexedSlices: maximum/minimum's gradient function multiplied it by a float, and every TF
target raised a raw TypeError (random programs, seed 4012: take(minimum(x0, x1))); the
others take it through raw ops, which make it dense (they passed before, kept as cases)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

ROWS = np.array([0, 2, 1, 0])


def _minimum(x):
    return ug.minimum(x[0, 0], x[:, 1])  # a 0-d against a [3]: broadcast, as in seed 4012


def _maximum(x):
    return ug.maximum(x, ug.tensor(0.25, x.dtype))


def _max_pool(x):
    return ug.max_pool2d(ug.reshape(x, (3, 1, 2, 2)), 2, 1)


def _wide_sum(x):
    # 7 merged dims kept: TF broadcasts at most 5 (unigraph_tensorflow.ranks)
    wide = ug.broadcast_to(ug.reshape(x, (3, 1, 4, 1, 1, 1, 1)), (3, 2, 4, 2, 3, 2, 3))
    return ug.sum(wide, axis=(1, 3, 5), keepdims=True)


OPS = {"minimum": _minimum, "maximum": _maximum, "max_pool2d": _max_pool,
       "wide_sum": _wide_sum}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("target", TARGETS)
def test_take_of_an_op_with_its_own_gradient(target, op):
    make = OPS[op]

    def loss(x):
        taken = ug.take(make(x), ROWS, axis=0)
        weights = np.cos(np.arange(int(np.prod(taken.shape))) + 0.5).reshape(taken.shape)
        return ug.sum(taken * weights.astype(taken.dtype))

    program = ug.function(lambda x: (loss(x), ug.grad(loss)(x)))
    x = np.array([[1.25, 0.5, -1.0, 2.0], [0.75, 1.5, 0.5, -0.5], [-2.0, 1.0, 3.0, 0.25]],
                 np.float32)
    expected = run_on("numpy:eager", program, x.astype(np.float64))
    got = run_on(target, program, x)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, k
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"result {k}")
    assert np.any(got[1] != 0)  # the gradient reaches x
