"""`ug.ensure_size(x, minimum, axis)`: x unchanged when its dims `axis` hold at least
`minimum` elements; else a ShapeError, while tracing where the sizes are known and, where
input_spec leaves one open, when the program runs (before it), on every target."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug

X = np.arange(12, dtype=np.float32).reshape(4, 3)


@pytest.mark.parametrize("target", TARGETS)
def test_open_dim_checked_when_the_program_runs(target):
    with ug.use_backend(*target.split(":")):

        @ug.function(input_spec=[ug.Spec((None, 3), "float32")])
        def f(x):
            return ug.ensure_size(x, 3, axis=0) * 2.0

        np.testing.assert_array_equal(f(X[:3]).numpy(), X[:3] * 2)
        with pytest.raises(ug.ShapeError, match=r"ug.ensure_size at .*test_ensure_size.py:\d+: "
                           r"the tensor's axes \[0\] must hold at least 3 elements, got an "
                           r"input of shape \[2, 3\]"):
            f(X[:2])
        np.testing.assert_array_equal(f(X).numpy(), X * 2)


@pytest.mark.parametrize("target", TARGETS)
def test_known_sizes_checked_while_tracing_and_gradient_passes_through(target):
    with ug.use_backend(*target.split(":")):

        @ug.function
        def too_few(x):
            return ug.ensure_size(x, 13, message="need 13")

        with pytest.raises(ug.ShapeError, match=r"need 13, got an input of shape \[4, 3\]"):
            too_few(X)

        def loss(x):
            return ug.sum(ug.ensure_size(x, 12) * x)

        grad = ug.function(ug.grad(loss))(X)
        np.testing.assert_array_equal(grad.numpy(), 2 * X)
