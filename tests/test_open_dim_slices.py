"""Slicing a dim left open by `input_spec` (its size known only when the program runs):
non-negative bounds are clamped then, as eagerly, on all 9 targets, forward and gradient;
a negative bound or an int index there is refused with unigraph's error naming the fix.
(Every static target refused `x[:, :1]` of a [None, 3] input with a ShapeError about the
frontend, and TF's graph targets took 2**63 - 1 as an int32 end.)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

SPEC = [ug.Spec((None, 5), "float32")]
SLICES = {
    "[:, :1]": lambda x: x[:, :1],
    "[1:]": lambda x: x[1:],
    "[:2]": lambda x: x[:2],
    "[::2, 1:4]": lambda x: x[::2, 1:4],
    "[1::3]": lambda x: x[1::3],
    "[10:]": lambda x: x[10:],
    "[3:1]": lambda x: x[3:1],
    "[..., 2]": lambda x: x[..., 2],
    "[None, :, 4]": lambda x: x[None, :, 4],
}
ROWS = (1, 4, 7)  # the open dim's size at run time: below, between and past the bounds


def _run(target, fn, x):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(fn, input_spec=SPEC)
        grad = ug.function(lambda x: ug.grad(lambda x: ug.sum(fn(x) * fn(x)))(x),
                           input_spec=SPEC)
        return np.asarray(forward(x)), np.asarray(grad(x))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("name", list(SLICES))
@pytest.mark.parametrize("target", TARGETS)
def test_slices_of_an_open_dim_agree_with_numpy(target, name, rows):
    x = np.arange(rows * 5, dtype=np.float32).reshape(rows, 5) - 7
    expected = eval("x" + name)  # NumPy's own slicing of the same index
    out, grad = _run(target, SLICES[name], x)
    np.testing.assert_array_equal(out, expected)
    want = np.zeros_like(x)
    picked = eval("want" + name)  # a view (basic indexing): the positions taken
    picked[...] = 2 * expected
    np.testing.assert_array_equal(grad, want)


@pytest.mark.parametrize("index, words", [
    (lambda x: x[-2:], "negative bound"),
    (lambda x: x[:-1], "negative bound"),
    (lambda x: x[0], "cannot be checked while tracing"),
])
@pytest.mark.parametrize("target", TARGETS)
def test_what_an_open_dim_cannot_take_is_refused_with_the_fix(target, index, words):
    t = Target.parse(target)
    x = np.ones((3, 5), np.float32)
    with ug.use_backend(t.backend, t.mode):
        fn = ug.function(index, input_spec=SPEC)
        if t.mode == "eager":  # eagerly the size is known: NumPy's answer
            np.testing.assert_array_equal(np.asarray(fn(x)), index(x))
            return
        with pytest.raises(IndexError, match=words) as caught:
            fn(x)
        assert "input_spec" in str(caught.value)
