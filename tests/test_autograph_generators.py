"""A generator function that converted code calls is converted too: a tensor `if` in one
ran as Python on the eager targets and raised TracingError on the static ones (generators
ran as written). Now its statements without a `yield` convert as any function's; one that
holds a `yield` stays a Python statement (a `yield` cannot be inside a cond branch or a
loop body), and a tensor condition there is refused with ControlFlowError naming the line,
on every target, eager too. Expected values are worked out with NumPy in the test."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([1.0, -4.0, 2.0], np.float32)


def double_or_negate(xs):
    for x in xs:                   # holds the yield: a Python loop over a Python list
        if ug.sum(x) > 0.0:        # no yield inside: a tensor `if`, converted
            x = x * 2.0
        else:
            x = -x
        yield x


def first_two(xs):
    for k, x in enumerate(xs):
        if k == 2:
            break                  # a lowered break, in a loop that stays Python
        yield x + 1.0


def halvings(x):
    n = 0
    while n < 3:                   # a Python condition around a yield
        x = x / 2.0
        n += 1
        yield x


def generators(x):
    parts = [*double_or_negate([x, -x, x[:1]]), *first_two([x, x * 3.0, x * 5.0])]
    return ug.concat([*parts, *halvings(x)])


def generators_reference(x):
    parts = [x * 2.0 if x.sum() > 0 else -x for x in (x, -x, x[:1])]
    parts += [x + 1.0, x * 3.0 + 1.0]
    parts += [x / 2.0, x / 4.0, x / 8.0]
    return np.concatenate(parts)


@pytest.mark.parametrize("target", TARGETS)
def test_a_called_generator_runs_converted(target):
    got = run_on(target, ug.function(generators), X)
    np.testing.assert_allclose(got, generators_reference(X), rtol=1e-6)


def yield_in_a_tensor_branch(x):
    if ug.sum(x) > 0.0:
        yield x * 2.0
    else:
        yield -x


def yield_in_a_tensor_loop(x):
    while ug.sum(x) < 10.0:
        x = x * 2.0
        yield x


def takes_yield_in_a_tensor_branch(x):
    return next(yield_in_a_tensor_branch(x))


def takes_yield_in_a_tensor_loop(x):
    return ug.concat(list(yield_in_a_tensor_loop(x)))


@pytest.mark.parametrize("program, what", [
    (takes_yield_in_a_tensor_branch, "`if`"), (takes_yield_in_a_tensor_loop, "`while`")],
    ids=["if", "while"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_yield_under_a_tensor_condition_is_refused_alike(target, program, what):
    with pytest.raises(ug.ControlFlowError) as caught:
        run_on(target, ug.function(program), np.abs(X))
    message = str(caught.value)
    assert f"{what} on a tensor at" in message
    assert "test_autograph_generators.py" in message
    assert "yield" in message
