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
