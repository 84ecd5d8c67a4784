"""An eager op with a Python number finds its plan and the number's scalar by one key (the
op, the backend, the tensor's shape and dtype, the number's type and value, its side, a
zero's sign: `dispatch._number_plans`), on all 9 targets the same numbers as NumPy: zeros of
either sign, a number on either side, one number with tensors of other shapes and dtypes,
an int and a float of one value, a NaN, and our OverflowError for an int that does not fit,
each asked twice (the second from the plan the first made)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([1.5, -2.0, 0.0], np.float32)
N = np.array([3, -4, 0], np.int64)


def _numbers(x, n):
    return (x * -0.0, x * 0.0, 0.0 * x, -0.0 * x, x * -0.0, x - 0.0, -0.0 - x,
            x - 2.5, 2.5 - x, x - 2.5, x + 1, x + 1.0, x * float("nan"), x > 0.5, 0.5 > x,
            n + 1, 1 - n, n * 3, n + 1, n == 0, 0 == n, n - 0)


def _agree(got, want):
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, (index, g.dtype, w.dtype)
        assert g.shape == w.shape, (index, g.shape, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"output {index}")  # NaNs equal
        if g.dtype.kind == "f":  # and each zero's sign
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=f"{index}")


@pytest.mark.parametrize("target", TARGETS)
def test_numbers_on_either_side_with_zero_signs_agree_with_numpy(target):
    f = ug.function(_numbers)
    with np.errstate(invalid="ignore"):
        for x, n in [(X, N), (X, N), (X[0], N[0]), (X.astype(np.float64), N), (X, N)]:
            got = run_on(target, f, x, n)
            _agree(got, [np.asarray(w) for w in _numbers(x, n)])


@pytest.mark.parametrize("target", TARGETS)
def test_an_int_that_does_not_fit_is_refused_every_time(target):
    @ug.function
    def f(n):
        return n + 2**70

    for _ in range(2):
        with pytest.raises(OverflowError, match=r"2\*\*70|1180591620717411303424.*int64"):
            run_on(target, f, N)
