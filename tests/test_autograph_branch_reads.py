"""An `if` branch that reads a variable before assigning it, the variable dead after the
`if` (`if self.training: x = f(x)`, x not read later): autograph made x a local of the
branch's function, so a `@ug.function` (or a traced Module) holding it raised a raw
UnboundLocalError on every target, eager ones included (they run the converted code too).
The branch now carries x as state, with a
Python condition and with a tensor one, nested ifs included.

And a function given to `ug.grad` / `ug.value_and_grad` with a tensor `if` in it: traced,
it was not converted (a static target raised TracingError at the `if`, eager ones ran it);
it is now converted when traced, as a Module's forward is."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug

X = np.array([1.0, -2.0, 3.0], np.float32)


class Scaled(ug.nn.Module):
    def forward(self, x):
        if self.training:  # a Python bool
            x = x * 2.0
            y = x + 1.0
        else:
            y = x - 1.0
        return y


def tensor_condition(x):
    if ug.sum(x) > 0.0:  # a tensor: both branches are traced
        x = x * 3.0
        y = x + 1.0
    else:
        y = -x
    return y


def tensor_condition_loss(x):
    if ug.sum(x) > 0.0:
        x = x * 3.0
        y = x + 1.0
    else:
        y = -x
    return ug.sum(y)


def other_branch_reads(x):
    z = x * 2.0
    if ug.sum(x) > 0.0:
        z = 1  # an int here: z is not carried (dead after, and this branch reads it not)
        y = x + 1.0
    else:
        y = z + 1.0  # the z from before the if
    return y


def nested(x, flag):
    if ug.max(x) > 0.0:
        if flag:
            x = x * 5.0
        y = x * x
    else:
        y = x
    return y


@pytest.mark.parametrize("target", TARGETS)
def test_branch_reads_then_assigns_a_dead_variable(target):
    with ug.use_backend(*target.split(":")):
        model = Scaled()
        forward = ug.function(lambda x: model(x))
        np.testing.assert_array_equal(forward(X).numpy(), X * 2 + 1)
        model.eval()
        np.testing.assert_array_equal(ug.function(lambda x: model(x))(X).numpy(), X - 1)

        traced = ug.function(tensor_condition)
        np.testing.assert_array_equal(traced(X).numpy(), X * 3 + 1)
        np.testing.assert_array_equal(traced(-X * 3).numpy(), X * 3)

        gradient = ug.function(ug.grad(tensor_condition_loss))
        np.testing.assert_array_equal(gradient(X).numpy(), np.full(3, 3.0, np.float32))
        np.testing.assert_array_equal(gradient(-X * 3).numpy(), np.full(3, -1.0, np.float32))

        other = ug.function(other_branch_reads)
        np.testing.assert_array_equal(other(X).numpy(), X + 1)
        np.testing.assert_array_equal(other(-X).numpy(), -X * 2 + 1)

        twice = ug.function(nested, static_argnames=("flag",))
        np.testing.assert_array_equal(twice(X, True).numpy(), (X * 5) ** 2)
        np.testing.assert_array_equal(twice(X, False).numpy(), X * X)
        np.testing.assert_array_equal(twice(-np.abs(X), True).numpy(), -np.abs(X))
