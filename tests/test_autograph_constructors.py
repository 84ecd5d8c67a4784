"""A class that converted code constructs runs its `__init__` converted: a tensor `if` in
a plain class's or a Module's `__init__` (`Holder(x)` inside a `@ug.function`) ran as
Python on the eager targets and raised TracingError on the static ones. Now the
constructor's own `__init__` (a base class's too, through `super().__init__`) means the same
on every target; a dataclass's generated `__init__` (no source) is called as it is, with no
warning. Expected values are worked out with NumPy in the test."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

POSITIVE = np.array([1.0, 2.0, 3.0], np.float32)
NEGATIVE = np.array([-1.0, 0.5, -3.0], np.float32)


def reference(x):
    return x * 2.0 if x.sum() > 0 else -x


class Holder:
    """A plain class whose `__init__` branches on a tensor."""

    def __init__(self, x, *, scale=2.0):
        if ug.sum(x) > 0.0:
            y = x * scale
        else:
            y = -x
        self.y = y


class Child(Holder):
    """Its own `__init__` calls the base's, whose tensor `if` is converted too."""

    def __init__(self, x):
        super().__init__(x)
        self.z = self.y + 1.0


class Offset(ug.nn.Module):
    """A Module built inside converted code: its `__init__` is converted, its `forward` too."""

    def __init__(self, w):
        super().__init__()
        if ug.sum(w) > 0.0:
            offset = w * 2.0
        else:
            offset = -w
        self.offset = offset

    def forward(self, x):
        return x + self.offset


@dataclasses.dataclass
class Pair:
    first: object
    second: object


def build_holder(x):
    return Holder(x).y


def build_with_keyword(x):
    return Holder(x, scale=2.0).y


def build_child(x):
    return Child(x).z


def build_module(x):
    return Offset(x)(x)


def build_dataclass(x):
    pair = Pair(x, Holder(x).y)
    return pair.second


CASES = {
    "plain": (build_holder, reference),
    "keyword": (build_with_keyword, reference),
    "subclass": (build_child, lambda x: reference(x) + 1.0),
    "module": (build_module, lambda x: x + reference(x)),
    "dataclass": (build_dataclass, reference),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_constructed_class_runs_its_init_converted(target, case):
    program, expected = CASES[case]
    fn = ug.function(program)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (no "could not convert" warning)
        for x in (POSITIVE, NEGATIVE):  # both branches, one trace per sign on static targets
            np.testing.assert_allclose(run_on(target, fn, x), expected(x), rtol=1e-6)
