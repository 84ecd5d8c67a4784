"""Autograph converts the user's own functions that converted code calls (as TF's
AutoGraph `converted_call` does): a helper with a tensor `if` or `while`, called from a
`@ug.function`, ran on the eager targets (bool() of an eager tensor) and raised
TracingError on the static ones. Now the helper runs converted on every target: helpers
calling helpers, a helper from another module, a plain class's method, a helper taken
from a list, recursion on a Python int, a `functools.partial` and a `functools.wraps`
wrapper. Expected values are worked out with NumPy in the test."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
from autograph_helpers import halve_while_large
from conftest import TARGETS, run_on

import unigraph as ug

POSITIVE = np.array([1.0, 2.0, 3.0], np.float32)
NEGATIVE = np.array([-1.0, 0.5, -3.0], np.float32)


def double_or_negate(x):
    if ug.sum(x) > 0.0:  # a tensor condition
        return x * 2.0
    return -x


def double_or_negate_reference(x):
    return x * 2.0 if x.sum() > 0 else -x


def double_while_small(x):
    while ug.max(x * x) < 20.0:
        x = x * 2.0
    return x


def double_while_small_reference(x):
    while (x * x).max() < 20.0:
        x = x * 2.0
    return x


def outer_helper(x):
    y = double_or_negate(x)  # a helper calling a helper
    if ug.max(y) > 5.0:
        y = y - 5.0
    return y


def outer_helper_reference(x):
    y = double_or_negate_reference(x)
    return y - 5.0 if y.max() > 5.0 else y


def step_down(x, depth):
    if depth == 0:  # a Python int: plain Python
        return x
    if ug.sum(x) > 0.0:
        x = x - 1.0
    else:
        x = x + 1.0
    return step_down(x, depth - 1)


def step_down_reference(x, depth):
    for _ in range(depth):
        x = x - 1.0 if x.sum() > 0 else x + 1.0
    return x


class Scaler:
    """A plain class (not a Module): its method, called from converted code, is converted."""

    def __init__(self, factor):
        self.factor = factor

    def apply(self, x):
        if ug.min(x) < 0.0:
            return x * self.factor
        return x + self.factor


def scale(x, factor):
    if ug.sum(x) > 0.0:
        return x * factor
    return x - factor


def checked(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@checked
def wrapped_double_or_negate(x):
    if ug.sum(x) > 0.0:
        return x * 2.0
    return -x


@ug.function
def calls_helper(x):
    return double_or_negate(x) + 1.0


@ug.function
def calls_loop_helper(x):
    return double_while_small(x)


@ug.function
def calls_nested_helpers(x):
    return outer_helper(x)


@ug.function
def calls_imported_helper(x):
    return halve_while_large(x) + 0.0


@ug.function
def calls_method(x):
    return Scaler(3.0).apply(x)


@ug.function
def calls_from_a_list(x):
    fns = [double_or_negate]
    return fns[0](x)


@ug.function
def calls_recursive(x):
    return step_down(x, 3)


@ug.function
def calls_partial(x):
    triple = functools.partial(scale, factor=3.0)
    return triple(x)


@ug.function
def calls_wrapped(x):
    return wrapped_double_or_negate(x)


def halve_while_large_reference(x):
    while x.sum() > 4.0:
        x = x * 0.5
    return x


CASES = {
    "if": (calls_helper, lambda x: double_or_negate_reference(x) + 1.0),
    "while": (calls_loop_helper, double_while_small_reference),
    "nested": (calls_nested_helpers, outer_helper_reference),
    "imported": (calls_imported_helper, halve_while_large_reference),
    "method": (calls_method, lambda x: x * 3.0 if x.min() < 0 else x + 3.0),
    "list": (calls_from_a_list, double_or_negate_reference),
    "recursion": (calls_recursive, lambda x: step_down_reference(x, 3)),
    "partial": (calls_partial, lambda x: x * 3.0 if x.sum() > 0 else x - 3.0),
    "wraps": (calls_wrapped, double_or_negate_reference),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_called_helper_runs_converted(target, case):
    function, reference = CASES[case]
    for x in (POSITIVE, NEGATIVE):
        np.testing.assert_allclose(run_on(target, function, x), reference(x.astype(np.float64)),
                                   rtol=1e-6)


def one_branch_only(x):
    if ug.sum(x) > 0.0:
        y = x * 2.0
    return y


@ug.function
def calls_one_branch_only(x):
    return one_branch_only(x)


@pytest.mark.parametrize("target", TARGETS)
def test_an_error_in_a_called_helper_names_the_helpers_line(target):
    """A variable assigned in one branch of a tensor `if` only: ControlFlowError in every
    mode (before, eager targets returned y and static ones raised TracingError), naming
    the helper's own `if` line."""
    _, first = inspect.getsourcelines(one_branch_only)
    line = first + 1  # the `if`
    with pytest.raises(ug.ControlFlowError, match=f"test_autograph_calls.py:{line}\\b"):
        run_on(target, calls_one_branch_only, POSITIVE)
