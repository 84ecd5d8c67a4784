"""ug.squeeze(x) (no axis) of a tensor with a dim left open by `input_spec`, on all 9
targets.

Eagerly every size-1 dim goes; a trace cannot tell whether an open dim will be 1, and
the result's rank must be known. The static targets squeezed only the dims known to be 1
and returned a value of another shape than eagerly ([1, 2, 3, 2, 2] where eager gave
[2, 3, 2, 2]: found by the random-program tester with open dims). Now a trace refuses it
with a ShapeError naming the line and the fix (name the axes); eager targets, which know
every size, run it as before.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

X = np.arange(6, dtype=np.float32).reshape(1, 3, 2) - 2.5


def _stacked(x):
    return ug.squeeze(ug.stack([x, x], axis=3))  # [1, 3, 2, 2] -> [3, 2, 2]


@pytest.mark.parametrize("target", TARGETS)
def test_squeeze_without_axes_of_an_open_dim_is_refused_while_tracing(target):
    t = Target.parse(target)
    expected = np.squeeze(np.stack([X, X], axis=3))
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(_stacked, input_spec=[ug.Spec((None, 3, 2), "float32")])
        if t.mode == "eager":  # the sizes are known: as NumPy
            np.testing.assert_array_equal(forward(X).numpy(), expected)
            return
        with pytest.raises(ShapeError, match=r"ug\.squeeze at .*test_open_dim_squeeze\.py:"
                                             r"\d+: .*axis 0 .*ug\.squeeze\(x, axis=\.\.\.\)"):
            forward(X)


@pytest.mark.parametrize("target", TARGETS)
def test_squeeze_of_known_dims_or_named_axes_runs_with_open_dims(target):
    """Every dim known: as before. Axes named: the open dim stays, whatever its size."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        known = ug.function(_stacked)
        np.testing.assert_array_equal(known(X).numpy(), np.squeeze(np.stack([X, X], axis=3)))
        named = ug.function(lambda x: ug.squeeze(x[:, :1], axis=1),
                            input_spec=[ug.Spec((None, 3, 2), "float32")])
        grad = ug.function(lambda x: ug.grad(lambda x: ug.sum(ug.squeeze(x[:, :1], axis=1)
                                                              * 3.0))(x),
                           input_spec=[ug.Spec((None, 3, 2), "float32")])
        for rows in (1, 4):
            x = np.arange(rows * 6, dtype=np.float32).reshape(rows, 3, 2)
            np.testing.assert_array_equal(named(x).numpy(), x[:, 0])
            want = np.zeros_like(x)
            want[:, 0] = 3.0
            np.testing.assert_array_equal(grad(x).numpy(), want)
