"""An eager `ug.cond` runs the branch taken and checks, once per signature, that the other
branch would return the same structure (so code that passes eagerly passes on every static
target). The check remembers what it checked by each branch's code object; here functions
are made again and again from source (new code objects, the old ones freed), each pair
checked anew: a broken untaken branch raises on every target, every time."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError

GOOD = "def branches(x):\n    return (lambda: x + 1.0), (lambda: x - 1.0)\n"
BAD = "def branches(x):\n    return (lambda: x + 1.0), (lambda: (x, x))\n"


def call_cond(x, taken, other):
    """ug.cond(x[0] > 0, taken, other) in a @ug.function, called on `x`."""
    def choose(x):
        return ug.cond(x[0] > 0.0, taken, other)

    return ug.function(choose)(x)


def fresh(source: str):
    scope: dict = {}
    exec(compile(source, "<branches>", "exec"), scope)
    return scope["branches"]


@pytest.mark.parametrize("target", TARGETS)
def test_every_fresh_pair_of_branches_is_checked(target):
    t = Target.parse(target)
    x = np.array([1.0, 2.0], np.float32)
    with ug.use_backend(t.backend, t.mode):
        for _ in range(6):
            taken, other = fresh(GOOD)(ug.tensor(x))
            result = call_cond(x, taken, other)
            np.testing.assert_array_equal(result.numpy(), x + 1.0)
            del taken, other, result
            gc.collect()  # the good pair's code objects may be freed now
            taken, other = fresh(BAD)(ug.tensor(x))
            with pytest.raises(ControlFlowError, match="cond"):
                call_cond(x, taken, other)
            del taken, other
            gc.collect()
