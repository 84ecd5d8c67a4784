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


@pytest.mark.parametrize("target", TARGETS)
def test_cond_names_both_key_orders(target):
    """(Eagerly the branch taken, true_fn here, is compared with the other, traced.)"""
    with pytest.raises(ControlFlowError, match=(
            r"cond at .*test_cond_dict_key_order.py:\d+: (true_fn|the branch taken) returns "
            r"\{'a': tensor, 'b': tensor\} but (false_fn|the other branch) returns \{'b': "
            r"tensor, 'a': tensor\}: the same keys in another order \('a', 'b' in (true_fn|the "
            r"branch taken), 'b', 'a' in (false_fn|the other branch)\); a dict's key order "
            r"counts, as part of the structure both must share: build both dicts with their "
            r"keys in one order")):
        run_on(target, ug.function(_reordered_cond), X)


@pytest.mark.parametrize("target", TARGETS)
def test_while_loop_body_names_both_key_orders(target):
    with pytest.raises(ControlFlowError, match=(
            r"while_loop at .*test_cond_dict_key_order.py:\d+: .*the same keys in another "
            r"order \('a', 'b' in loop_vars, 'b', 'a' in the body\); a dict's key order "
            r"counts")):
        run_on(target, ug.function(_reordered_body), X)


@pytest.mark.parametrize("target", TARGETS)
def test_one_order_runs(target):
    result = ug.function(_one_order)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = result(X)
    assert list(out) == ["a", "b"]
    np.testing.assert_array_equal(out["a"].numpy(), X + 1)
    np.testing.assert_array_equal(out["b"].numpy(), X * 2)
