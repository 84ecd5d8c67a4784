"""`ug.tensor` of a (nested) list holding tensors: one stacked tensor with the same meaning
on all 9 targets. A static target traces it (it used to raise `.numpy() on a symbolic
tensor`), and an eager gradient flows through the tensors (it used to copy their values
out: the gradient was silently 0). Python numbers beside the tensors are weak, as in
`x + 1.0`. Expected values are computed by hand."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


@pytest.mark.parametrize("target", TARGETS)
def test_a_nested_list_of_tensors_and_numbers_is_one_tensor(target):
    @ug.function
    def rows(a):
        return ug.tensor([[a, 2 * a], [1, 2]]), ug.tensor([a, 1], dtype="float64")

    grid, wide = run_on(target, rows, np.float32(3.0))
    assert grid.dtype == np.float32 and wide.dtype == np.float64
    np.testing.assert_array_equal(grid, [[3.0, 6.0], [1.0, 2.0]])
    np.testing.assert_array_equal(wide, [3.0, 1.0])


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_flows_through_the_listed_tensors(target):
    # d/dx (x + x*x + 1) = 1 + 2x = 7 at x = 3
    def total(x):
        return ug.sum(ug.tensor([x, x * x, 1.0]))

    grad = run_on(target, ug.grad(total), np.float32(3.0))
    assert grad.dtype == np.float32
    assert grad == 7.0


@pytest.mark.parametrize("target", TARGETS)
def test_numbers_beside_an_int_tensor_are_weak(target):
    # an int64 tensor beside 2.5: float64, as `x + 2.5` is; beside 2: int64
    got = run_on(target, ug.function(lambda n: (ug.tensor([n, 2.5]), ug.tensor([n, 2]))),
                 np.int64(4))
    assert got[0].dtype == np.float64 and got[1].dtype == np.int64
    np.testing.assert_array_equal(got[0], [4.0, 2.5])
    np.testing.assert_array_equal(got[1], [4, 2])
