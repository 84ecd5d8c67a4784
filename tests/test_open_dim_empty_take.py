"""`ug.take` (and `ug.tile`, a take per repeated axis) along a known axis of a tensor with
another dim left open by input_spec, which is 0 when the program runs (found by the random
tester, seed 12002: `ug.tile` of an avg_pool2d of an empty batch). paddle:static raised a
raw error (its gather of an empty x makes a tensor with no memory, which reshape refuses)
or could not reshape (a 0 in Paddle's reshape means "x's own dim", and a -1 of size 0
cannot be inferred). Forward and gradient, empty and not, on every target.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug

INDICES = np.array([0, 2, 2, 4])


@pytest.mark.parametrize("spec_shape", [(None, 3, 1, 5), (0, 3, None, 5), (None, 3, None, 5),
                                        (None, None, None, None)])
@pytest.mark.parametrize("target", TARGETS)
def test_take_and_tile_of_an_empty_tensor_with_an_open_dim(target, spec_shape):
    spec = [ug.Spec(spec_shape, "float32")]
    cases = [np.zeros((0, 3, 1, 5), np.float32)]
    if spec_shape[0] is None:
        cases.append(np.arange(30, dtype=np.float32).reshape(2, 3, 1, 5))
    with ug.use_backend(*target.split(":")):
        @ug.function(input_spec=spec)
        def tiled(x):
            return ug.tile(x, (1, 1, 2))

        def loss(x):
            return ug.sum(ug.take(x, INDICES, axis=3) * 2.0)

        @ug.function(input_spec=spec)
        def grad(x):
            return ug.grad(loss)(x)

        for x in cases:
            np.testing.assert_array_equal(tiled(x).numpy(), np.tile(x, (1, 1, 2)))
            expected = np.zeros_like(x)
            np.add.at(expected, (slice(None), slice(None), slice(None), INDICES), 2.0)
            np.testing.assert_array_equal(grad(x).numpy(), expected)


@pytest.mark.parametrize("stated", [(0, 3, None, 10), (0, None, None, 10), (None, 3, 1, 10)])
@pytest.mark.parametrize("target", TARGETS)
def test_ensure_shape_of_an_empty_tensor_keeps_its_open_dims(target, stated):
    """ug.ensure_shape stating a 0 beside a dim it leaves open (seed 12002, after an
    avg_pool2d and a tile): paddle:static's reshape made the open dim 0 too ([0, 3, 0, 10]
    where the reference has [0, 3, 1, 10])."""
    x = np.zeros((0, 3, 1, 10), np.float32)
    with ug.use_backend(*target.split(":")):
        @ug.function(input_spec=[ug.Spec((None, None, None, None), "float32")])
        def stated_shape(x):
            return ug.ensure_shape(x * 2.0, stated) + 1.0

        def loss(x):
            return ug.sum(stated_shape(x))

        @ug.function(input_spec=[ug.Spec((None, None, None, None), "float32")])
        def grad(x):
            return ug.grad(loss)(x)

        assert stated_shape(x).shape == (0, 3, 1, 10)
        assert grad(x).shape == (0, 3, 1, 10)
