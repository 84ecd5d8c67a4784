"""Integer `//` and `%` of the smallest int by -1 on all 9 targets and onnxruntime: as
NumPy, x // -1 is -x (which wraps to the smallest int itself) and x % -1 is 0. Paddle's
integer floor_divide and remainder kernels (eager and in a Program) and ONNX Runtime's
integer Div killed the process with SIGFPE for int32 and int64 (found beside the random
tester's small-int draws, which wrap values onto the smallest int). No target warns: NumPy's
floor_divide of the smallest int by -1 printed "overflow encountered" on the numpy targets.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on

import unigraph as ug


def _operands(dtype):
    smallest = np.iinfo(dtype).min
    x = np.array([smallest, smallest, 7, -7, smallest + 1], dtype)
    y = np.array([-1, 3, -1, 2, -1], dtype)
    return x, y


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_smallest_int_by_minus_one(target, dtype):
    x, y = _operands(dtype)
    fn = ug.function(lambda a, b: (a // b, a % b, ug.floor_divide(a, -1), ug.mod(a, -1)))
    with np.errstate(over="ignore"):
        want = [x // y, x % y, x // np.array(-1, dtype), x % np.array(-1, dtype)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = run_on(target, fn, x, y)
    assert want[0][0] == np.iinfo(dtype).min and want[1][0] == 0  # wraps, as NumPy
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
