"""log_softmax and logsumexp along an empty axis print no RuntimeWarning, on all 9 targets.

The NumPy targets' log_softmax took the log of the sum over the empty axis, log(0), and
NumPy printed "divide by zero encountered in log" (the result is empty all the same);
logsumexp over nothing is log(0) = -inf, and its gradient's 1 / 0 printed "divide by zero
encountered in divide". No other target prints anything: no value of the user's is
involved. The results are unchanged (empty, and -inf for logsumexp).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

OPS = {
    "softmax": lambda x: ug.softmax(x, axis=0),
    "log_softmax": lambda x: ug.log_softmax(x, axis=0),
    "logsumexp": lambda x: ug.logsumexp(x, axis=0),
}


def _with_grad(op):
    def program(x):
        return op(x), ug.grad(lambda x: ug.sum(op(x) * 1.5))(x)
    return program


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("target", TARGETS)
def test_an_empty_axis_prints_no_warning(target, op):
    program = _with_grad(OPS[op])
    x = np.zeros((0, 3), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, grad = run_on(target, ug.function(program), x)
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    want = np.full(3, -np.inf, np.float32) if op == "logsumexp" else np.zeros((0, 3))
    np.testing.assert_array_equal(value, want)
    assert grad.shape == (0, 3)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("target", TARGETS)
def test_an_open_axis_empty_at_the_run_prints_no_warning(target, op):
    program = ug.function(_with_grad(OPS[op]), input_spec=[ug.Spec((None, 3), "float32")])
    run_on(target, program, np.ones((2, 3), np.float32))  # (built, with any warning of that)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, grad = run_on(target, program, np.zeros((0, 3), np.float32))
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert value.shape == grad.shape == (0, 3)
