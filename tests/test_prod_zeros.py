"""The gradient of prod where a slice holds zeros, on all 9 targets: d prod / d x_i is the
product of the others (6 at the zero of [2, 0, 3], 0 where two are zero). Paddle's prod_grad
divides the product by each element, so it gave NaN (0/0) at every zero
(`unigraph_paddle.lowerings._prod_of_zeros_by_multiplies`)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

CASES = {
    # name: (x, axis, keepdims)
    "one_zero": ([2.0, 0.0, 3.0], None, False),
    "two_zeros": ([2.0, 0.0, -0.0], None, True),
    "rows": ([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5], [0.0, 0.0, 4.0]], (1,), False),
    "columns_kept": ([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5], [0.0, 0.5, 4.0]], (0,), True),
    "odd_length": ([[0.5, 2.0, 0.0, -1.0, 3.0, 2.0, -0.5]], (-1,), False),
}


def _rank_6(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], (2, 3, 2, 3, 2, 3), p=[.15] * 2 + [
        .1] + [.2] * 3)


def _check(target, x, axis, keepdims, dtype):
    def loss(x):
        return ug.sum(ug.prod(x, axis=axis, keepdims=keepdims) * 1.5)

    program = ug.function(lambda x: (ug.prod(x, axis=axis, keepdims=keepdims), ug.grad(loss)(x)))
    x = np.asarray(x, dtype)
    expected = run_on("numpy:eager", program, x.astype(np.float64))
    got = run_on(target, program, x)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape and g.dtype == dtype, k
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=0, err_msg=f"result {k}")
    # products by hand: the gradient at each zero is the product of the others
    if axis is None and x.ndim == 1:
        others = [np.prod(np.delete(x.astype(np.float64), i)) * 1.5 for i in range(x.size)]
        np.testing.assert_array_equal(got[1], np.asarray(others, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_prod_gradient_where_a_slice_holds_zeros(target, case, dtype):
    x, axis, keepdims = CASES[case]
    _check(target, x, axis, keepdims, dtype)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_prod_gradient_with_zeros_over_several_axes_of_rank_6(target, keepdims):
    for axis in [(1, 3, 5), (0, 2), None]:
        _check(target, _rank_6(seed=3), axis, keepdims, "float32")
