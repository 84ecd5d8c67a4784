"""A tensor made inside a loop body or a cond branch and kept outside it, in a Python list.

Written with Python `while` / `if` on a tensor (autograph), the program is refused on every
target alike, eager ones included ("one meaning in every mode"): a ControlFlowError naming
the statement, the `append` and the fix. Before, the 4 eager targets ran it and the 5
static ones raised "a symbolic tensor from another traced function was used here".

Written with `ug.while_loop` / `ug.cond` and a closure that appends (a functional body with
a side effect), eager targets run the Python and static ones trace the body once: their
TracingError now names where the tensor was made, where it was used, and what to write."""

import inspect
import re

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

HERE = "test_values_leaving_a_region.py"


def while_kept_in_a_list(x):
    kept = []
    while ug.sum(x) < 10:  # STATEMENT
        x = x * 2
        kept.append(x)  # GROWN
    return ug.stack(kept)


def if_kept_in_a_list(x):
    kept = []
    if ug.sum(x) > 0:  # STATEMENT
        kept.append(x * 2)  # GROWN
    else:
        kept.append(x * 3)
    return kept[0] + 1.0


def range_kept_in_a_list(x):
    kept = []
    for i in ug.range(ug.cast(ug.sum(x), "int64")):  # STATEMENT
        kept.append(x * i)  # GROWN
    return ug.stack(kept)


class Scaler:
    def __init__(self):
        self.scale = 1.0
        self.steps = 0

    def pick(self, x):
        if ug.sum(x) > 0:  # STATEMENT
            self.scale = 2.0  # GROWN
        else:
            self.scale = -1.0
        return x * self.scale

    def count(self, x):
        while ug.sum(x) < 10:  # STATEMENT
            x = x * 2
            self.steps += 1  # GROWN
        return x


def if_sets_an_attribute(x):
    return Scaler().pick(x)


def while_counts_in_an_attribute(x):
    return Scaler().count(x)


def range_sets_an_item(x):
    last = {}
    for i in ug.range(ug.cast(ug.sum(x), "int64")):  # STATEMENT
        x = x + 1.0
        last["x"], last["i"] = x, i  # GROWN
    return x


def if_deletes_an_item(x):
    cache = {"y": x}
    if ug.sum(x) > 0:  # STATEMENT
        del cache["y"]  # GROWN
    return x


def while_loop_kept_in_a_list(x):
    kept = []

    def body(v):
        kept.append(v * 2)  # MADE
        return (v * 2,)

    ug.while_loop(lambda v: ug.sum(v) < 10, body, (x,))
    return ug.stack(kept)


def cond_kept_in_a_list(x):
    kept = []

    def double():
        kept.append(x * 2)  # MADE
        return x

    ug.cond(ug.sum(x) > 0, double, lambda: x)
    return kept[0] + 1.0


def _line(fn, marker):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _at(fn, marker):
    return rf"\S*{HERE}:{_line(fn, marker)}\b"


REFUSED = {
    "while": (while_kept_in_a_list, "`while` loop", while_kept_in_a_list, "kept.append(...)"),
    "if": (if_kept_in_a_list, "`if`", if_kept_in_a_list, "kept.append(...)"),
    "for": (range_kept_in_a_list, "`for` loop", range_kept_in_a_list, "kept.append(...)"),
    "if_attribute": (if_sets_an_attribute, "`if`", Scaler.pick, "self.scale = ..."),
    "while_attribute": (while_counts_in_an_attribute, "`while` loop", Scaler.count,
                        "self.steps += ..."),
    "for_item": (range_sets_an_item, "`for` loop", range_sets_an_item, "last['i'] = ..."),
    "if_del": (if_deletes_an_item, "`if`", if_deletes_an_item, "del cache['y']"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("target", TARGETS)
def test_an_object_changed_under_a_tensor_condition_is_refused_alike(target, case):
    """A list grown, an attribute or an item set or deleted: eager targets ran the change
    once per trip taken, static ones once per trace (an attribute kept the branch traced
    last, whatever the condition)."""
    fn, statement, source, change = REFUSED[case]
    with pytest.raises(ug.ControlFlowError) as caught:
        run_on(target, ug.function(fn), np.array([1.0, 2.0]))
    message = str(caught.value)
    assert re.search(rf"{statement} at {_at(source, 'STATEMENT')} \(its condition is a tensor\) "
                     rf"changes a Python object made before it: `{re.escape(change)}` at "
                     rf"{_at(source, 'GROWN')}", message), message
    assert "buf = buf.at[i].set(v)" in message, message


@pytest.mark.parametrize("target", TARGETS)
def test_a_list_of_a_python_loop_or_branch_still_grows(target):
    """Conditions on Python values (and a `break` under a tensor condition, whose loop
    runs as Python on eager targets) are not refused."""
    def fn(x):
        kept = []
        for i in range(3):
            if i > 0:
                kept.append(x * i)
        return ug.stack(kept)

    def breaks(x):
        kept = []
        for i in range(3):
            if ug.sum(x) > 5:
                break
            x = x * 2
            kept.append(i)
        return x

    got = run_on(target, ug.function(fn), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got, [[1.0, 2.0], [2.0, 4.0]])
    got = run_on(target, ug.function(breaks), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got, [2.0, 4.0])


FUNCTIONAL = {
    "while_loop": (while_loop_kept_in_a_list, np.array([[2.0, 4.0], [4.0, 8.0]]),
                   "the body of a while loop", "buf.at[i].set(v)"),
    "cond": (cond_kept_in_a_list, np.array([3.0, 5.0]), "a branch of a cond",
             "in both branches"),
}


@pytest.mark.parametrize("case", sorted(FUNCTIONAL))
@pytest.mark.parametrize("target", TARGETS)
def test_a_functional_body_that_keeps_a_value_outside(target, case):
    fn, want, region, fix = FUNCTIONAL[case]
    x = np.array([1.0, 2.0])
    if Target.parse(target).mode == "eager":
        np.testing.assert_array_equal(run_on(target, ug.function(fn, autograph=False), x), want)
        return
    with pytest.raises(ug.TracingError) as caught:
        run_on(target, ug.function(fn, autograph=False), x)
    message = str(caught.value)
    assert re.search(rf"made inside {region} at {_at(fn, 'MADE')} ", message), message
    assert re.search(rf"here \(\S*{HERE}:\d+\)", message), message
    assert fix in message, message
