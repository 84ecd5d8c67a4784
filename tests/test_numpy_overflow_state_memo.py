"""A numpy:static plan's integer `+ - *` runs with NumPy's `over` error state ignored (the
caller's other settings kept): the generated code reads the state to set from the last
answer of `error_state.ignoring('over')` while the caller's state is the same object, and
asks again when it changes (`error_state.last_ignoring`). On all 9 targets, int64 sums that
wrap, in a loop and outside one, under one error state and then others, wrap silently and
give the same numbers on every call."""

import warnings

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

CALLS = 4  # the first call, the second (makes the plan's code), the code's own calls
BIG = 2**62


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def _wrapped(x):
    return int(np.int64(x % 2**64 - (2**64 if x % 2**64 >= 2**63 else 0)))


@ug.function
def wrap_in_loop(x, step):
    i = ug.tensor(np.int64(0))
    while i < 3:
        x = x + step
        i = i + 1
    return x, x * step


@pytest.mark.parametrize("target", TARGETS)
def test_integer_sums_wrap_silently_under_each_error_state(target):
    x, step = np.int64(BIG), np.int64(BIG)
    want = _wrapped(BIG + 3 * BIG)
    states = [{}, {"over": "raise"}, {"all": "raise"}, {}, {"over": "warn", "divide": "raise"}]
    with on(target), warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the test
        for state in states:
            with np.errstate(**state):
                for _ in range(CALLS):
                    total, product = wrap_in_loop(ug.tensor(x), ug.tensor(step))
                    assert int(total.numpy()) == want
                    assert int(product.numpy()) == _wrapped(want * BIG)
