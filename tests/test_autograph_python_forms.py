"""Python forms that autograph used to leave as Python under a tensor condition, where
the eager targets ran them on the tensor's value and the static ones raised the generic
TracingError ("`if`/`while`/`bool()` on a traced tensor"): one program, two meanings.
Now a chained comparison on tensors (`0.0 < s < 10.0`) converts, as `and` does; an
`assert`, a comprehension's `if` filter and a walrus (`:=`) in a `while` test whose value
is a tensor are refused with ug.ControlFlowError on every target, eager too, naming the
user's line and the fix. Expected values are worked out with NumPy in the test."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([1.0, -4.0, 2.5], np.float32)


def chained_if(x):
    s = ug.sum(x)
    if -2.0 < s < 10.0:
        x = x + 1.0
    else:
        x = x - 1.0
    return x


def chained_value(x):
    return ug.cast(ug.min(x) < ug.max(x) <= ug.sum(x) * 0.0 + 2.5, "float32")


def chained_while(x):
    while 0.0 <= ug.sum(x) * 0.0 < ug.sum(x) + 5.0:
        x = x - 1.0
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_a_chained_comparison_on_tensors_converts(target):
    s = float(X.sum())
    np.testing.assert_allclose(run_on(target, ug.function(chained_if), X),
                               X + 1.0 if -2.0 < s < 10.0 else X - 1.0)
    np.testing.assert_array_equal(
        run_on(target, ug.function(chained_value), X),
        np.float32(X.min() < X.max() <= 2.5))
    expected = X.copy()
    while 0.0 < expected.sum() + 5.0:
        expected = expected - 1.0
    np.testing.assert_allclose(run_on(target, ug.function(chained_while), X), expected)


def chained_middle_once(x):
    calls = []

    def middle():
        calls.append(1)
        return ug.sum(x)
    inside = ug.cast(-10.0 < middle() < 10.0, "float32")
    return inside + float(len(calls))


@pytest.mark.parametrize("target", TARGETS)
def test_a_chained_comparison_evaluates_its_middle_operand_once(target):
    np.testing.assert_array_equal(run_on(target, ug.function(chained_middle_once), X), 2.0)


def assert_tensor(x):
    assert ug.sum(x) < 100.0, "too large"
    return x + 1.0


def comprehension_filter(x):
    return ug.stack([x + k for k in range(3) if ug.sum(x) > k])


def walrus_while(x):
    while (s := ug.sum(x)) < 10.0:
        x = x + s * 0.0 + 1.0
    return x


REFUSED = {
    "assert": (assert_tensor, "`assert`", "ug.where"),
    "comprehension_if": (comprehension_filter, "comprehension", "ug.where"),
    "walrus_while": (walrus_while, ":=", "before the loop"),
}


@pytest.mark.parametrize("form", sorted(REFUSED))
@pytest.mark.parametrize("target", TARGETS)
def test_a_python_form_on_a_tensor_is_refused_on_every_target(target, form):
    fn, what, fix = REFUSED[form]
    with pytest.raises(ug.ControlFlowError) as caught:
        run_on(target, ug.function(fn), X)
    message = str(caught.value)
    assert "test_autograph_python_forms.py" in message
    assert what in message
    assert fix in message


def python_forms(x, n):
    assert n > 1, "a Python condition stays Python's assert"
    parts = [x * k for k in range(n) if k != 1]
    while (m := n - 1) > 1:
        n = m
    return ug.stack(parts) + float(0 < n < 3)


@pytest.mark.parametrize("target", TARGETS)
def test_the_same_forms_on_python_values_stay_python(target):
    got = run_on(target, ug.function(python_forms, static_argnums=1), X, 3)
    np.testing.assert_allclose(got, np.stack([X * 0.0, X * 2.0]) + 1.0)


def raise_in_branch(x):
    if ug.sum(x) < -100.0:
        raise ValueError("negative")
    return x + 1.0


def raise_in_loop(x):
    while ug.sum(x) < 10.0:
        if ug.max(x) > 1000.0:  # (a tensor `if` inside: its raise is the loop's too)
            raise ValueError("too large")
        x = x + 1.0
    return x


def del_in_branch(x):
    y = x * 2.0
    if ug.sum(x) > 0.0:
        del y
    return x


STATEMENTS = {
    "raise_in_if": (raise_in_branch, "raise ValueError('negative')", "ug.where"),
    "raise_in_while": (raise_in_loop, "raise ValueError('too large')", "ug.where"),
    "del_in_if": (del_in_branch, "del y", "after the `if`"),
}


@pytest.mark.parametrize("form", sorted(STATEMENTS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_statement_a_trace_would_run_on_every_path_is_refused(target, form):
    """A static target traces both branches (a loop's body once) whatever runs: a `raise`
    there raised on every call, a `del` of a variable the `if` carries failed with
    NameError, where the eager targets ran only the branch taken."""
    fn, statement, fix = STATEMENTS[form]
    with pytest.raises(ug.ControlFlowError) as caught:
        run_on(target, ug.function(fn), X)
    message = str(caught.value)
    assert "test_autograph_python_forms.py" in message
    assert statement in message
    assert fix in message


def python_statements(x, n):
    if n < 0:
        raise ValueError("a Python condition raises as Python does")
    y = x * 2.0
    if ug.sum(x) > 0.0:
        scratch = x + 1.0
        del scratch            # a variable the branch made itself: nothing carried
        try:
            raise KeyError("caught in the branch")
        except KeyError:
            y = y + 1.0
    del y
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_statements_a_trace_can_run_stay(target):
    got = run_on(target, ug.function(python_statements, static_argnums=1), X, 1)
    np.testing.assert_allclose(got, X)


def raise_on_a_python_value_in_a_tensor_loop(x, n):
    while ug.sum(x) < 10.0:
        if n < 0:              # a Python condition: its `raise` stays Python's
            raise ValueError("n must not be negative")
        x = x + float(n)
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_a_raise_under_a_python_condition_in_a_tensor_loop_stays(target):
    got = run_on(target, ug.function(raise_on_a_python_value_in_a_tensor_loop,
                                     static_argnums=1), X, 2)
    expected = X.copy()
    while expected.sum() < 10.0:
        expected = expected + 2.0
    np.testing.assert_allclose(got, expected)


def del_then_assign_in_a_loop(x):
    y = x
    while ug.sum(x) < 10.0:
        x = x + 1.0
        del y                  # bound again below: the loop carries `y` as before
        y = x * 2.0
    return y


@pytest.mark.parametrize("target", TARGETS)
def test_a_del_followed_by_an_assignment_stays(target):
    expected = X.copy()
    while expected.sum() < 10.0:
        expected = expected + 1.0
    np.testing.assert_allclose(run_on(target, ug.function(del_then_assign_in_a_loop), X),
                               expected * 2.0)
