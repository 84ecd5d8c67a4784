"""The NumPy backend's `sub_` (the eager optimizers' in-place update, issue 19 item 4): the
numbers of the `sub` op's reference bit for bit, written in place only into an array that
owns writeable memory, outside a gradient tape. The optimizer-level behaviour on all 9
targets is `tests/test_optim_in_place.py`'s."""

from __future__ import annotations

import numpy as np
import pytest
from unigraph_numpy.backend import sub_

from unigraph.ops import OPS
from unigraph.reference import eager_grad, eager_op


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4)])
def test_sub_in_place_equals_the_reference(dtype, shape):
    rng = np.random.default_rng(3)
    param = np.asarray(rng.standard_normal(shape) * 3, dtype)
    delta = np.asarray(rng.standard_normal(shape) * 1e-3, dtype)
    want = OPS["sub"].reference(param, delta)
    got = sub_(param, delta)
    assert got is param
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def _owned():
    return np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3).copy()


REFUSED = {
    "a view": lambda: (_owned()[::1], np.ones((2, 3), np.float32)),
    "read-only": lambda: (np.asarray(_owned()).copy(), np.ones((2, 3), np.float32)),
    "another dtype": lambda: (_owned(), np.ones((2, 3), np.float64)),
    "broadcast": lambda: (_owned(), np.ones(3, np.float32)),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_sub_makes_a_new_array_where_writing_is_not_safe(case):
    param, delta = REFUSED[case]()
    if case == "read-only":
        param.flags.writeable = False
    before = param.copy()
    got = sub_(param, delta)
    assert got is not param
    np.testing.assert_array_equal(param, before)
    np.testing.assert_array_equal(got, OPS["sub"].reference(before, delta))


def test_sub_inside_a_gradient_tape_leaves_the_taped_value_alone():
    w = np.array([1.0, 2.0, 3.0])

    def f(leaf):
        sub_(w, np.full(3, 0.5))  # not a taped input: allocating anyway keeps this simple
        return [eager_op("sum", [eager_op("mul", [leaf, leaf], {})],
                         {"axis": None, "keepdims": False})]

    _, (grad,) = eager_grad(f, [w])
    np.testing.assert_array_equal(w, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(grad, [2.0, 4.0, 6.0])
