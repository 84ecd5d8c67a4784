"""A `ug.cond` whose branches return dicts with the same keys in two orders (and a
`while_loop` body that reorders its loop variables' dict), on all 9 targets: refused, as
before, but the message said only "both must return the same structure", with nothing on
what differed. Now it names both orders and says that key order counts.

Refused, not accepted: the results are matched by position, and eagerly the dict of the
path taken is returned as it is, so two orders would make the result's key order depend on
the branch that ran; with one order the result is the same on every target and mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError

X = np.array([1.0, 2.0], np.float32)


def _reordered_cond(x):
    return ug.cond(ug.sum(x) > 0, lambda: {"a": x + 1, "b": x * 2},
                   lambda: {"b": x * 3, "a": x - 1})


def _reordered_body(x):
    return ug.while_loop(lambda v: ug.sum(v["a"]) < 10,
                         lambda v: ({"b": v["b"] * 2, "a": v["a"] + 1},),
                         ({"a": x, "b": x},))


def _one_order(x):
    return ug.cond(ug.sum(x) > 0, lambda: {"a": x + 1, "b": x * 2},
                   lambda: {"a": x - 1, "b": x * 3})


# (Eagerly cond compares the branch taken, true_fn here, with the other, traced.)
REFUSALS = {
    "cond": (_reordered_cond,
             r"cond at .*test_cond_dict_key_order.py:\d+: (true_fn|the branch taken) returns "
             r"\{'a': tensor, 'b': tensor\} but (false_fn|the other branch) returns \{'b': "
             r"tensor, 'a': tensor\}: the same keys in another order \('a', 'b' in (true_fn|"
             r"the branch taken), 'b', 'a' in (false_fn|the other branch)\); a dict's key "
             r"order counts, as part of the structure both must share: build both dicts with "
             r"their keys in one order"),
    "while_loop": (_reordered_body,
                   r"while_loop at .*test_cond_dict_key_order.py:\d+: .*the same keys in "
                   r"another order \('a', 'b' in loop_vars, 'b', 'a' in the body\); a dict's "
                   r"key order counts"),
}


@pytest.mark.parametrize("program", list(REFUSALS))
@pytest.mark.parametrize("target", TARGETS)
def test_two_key_orders_are_named(target, program):
    fn, message = REFUSALS[program]
    with pytest.raises(ControlFlowError, match=message):
        run_on(target, ug.function(fn), X)


@pytest.mark.parametrize("target", TARGETS)
def test_one_order_runs(target):
    result = ug.function(_one_order)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = result(X)
    assert list(out) == ["a", "b"]
    np.testing.assert_array_equal(out["a"].numpy(), X + 1)
    np.testing.assert_array_equal(out["b"].numpy(), X * 2)
