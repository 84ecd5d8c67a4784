"""GroupNorm and Dropout inside a `@ug.function` whose input_spec leaves a dim open (found
by the random tester's training draws, an open batch dim):

* `F.group_norm` / `ug.nn.GroupNorm` refused any open dim ("needs every dim known", no
  fix named): it now takes one (the batch dim, or one of H, W), the same reshapes with that
  size left to the run; two open dims are refused naming the fix;
* `F.dropout` / `ug.nn.Dropout` (and any `ug.random` draw) of a shape with an open dim
  raised a raw TypeError (`int(None)`) on every static target: it was then refused naming
  the layer, the user's line and the fix; now a static run draws the call's sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug

X = np.random.default_rng(5).normal(size=(2, 4, 3, 3)).astype(np.float32)
W = np.linspace(0.5, 1.5, 4).astype(np.float32)
B = np.linspace(-0.5, 0.5, 4).astype(np.float32)
COTANGENT = np.cos(np.arange(X.size)).reshape(X.shape)


def _group_norm64(x, w, b):
    x = x.astype(np.float64).reshape(2, 2, -1)
    y = (x - x.mean(axis=2, keepdims=True)) / np.sqrt(x.var(axis=2, keepdims=True) + 1e-5)
    return y.reshape(X.shape) * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1)


def _numeric_grad(x):
    """d sum(group_norm(x) * COTANGENT) / dx by central differences in float64."""
    x = x.astype(np.float64)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = 1e-6
        up = np.sum(_group_norm64(x + step, W, B) * COTANGENT)
        down = np.sum(_group_norm64(x - step, W, B) * COTANGENT)
        grad[index] = (up - down) / 2e-6
    return grad


@pytest.mark.parametrize("open_shape", [(None, 4, 3, 3), (2, 4, None, 3)])
@pytest.mark.parametrize("target", TARGETS)
def test_group_norm_takes_one_open_dim(target, open_shape):
    """Forward and gradient, with the batch dim or H open: as with every dim known."""
    spec = [ug.Spec(open_shape, "float32")]
    with ug.use_backend(*target.split(":")):
        layer = ug.nn.GroupNorm(2, 4)
        layer.weight.set_value(W)
        layer.bias.set_value(B)

        @ug.function(input_spec=spec)
        def forward(x):
            return layer(x)

        def loss(x):
            return ug.sum(layer(x) * COTANGENT.astype(np.float32))

        @ug.function(input_spec=spec)
        def grad(x):
            return ug.grad(loss)(x)

        np.testing.assert_allclose(forward(X).numpy(), _group_norm64(X, W, B), rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(grad(X).numpy(), _numeric_grad(X), rtol=1e-3, atol=1e-4)


STATIC = [t for t in TARGETS if not t.endswith(":eager")]


@pytest.mark.parametrize("target", TARGETS)
def test_group_norm_with_two_open_dims_is_refused_naming_the_fix(target):
    spec = [ug.Spec((None, 4, None, 3), "float32")]
    with ug.use_backend(*target.split(":")):
        @ug.function(input_spec=spec)
        def forward(x):
            return ug.nn.functional.group_norm(x, 2)

        if target not in STATIC:  # eager: the call is checked against the spec, and runs
            np.testing.assert_allclose(forward(X).numpy(), _group_norm64(
                X, np.ones(4, np.float32), np.zeros(4, np.float32)), rtol=1e-4, atol=1e-5)
            return
        with pytest.raises(ug.ShapeError) as error:
            forward(X)
    message = str(error.value)
    assert "group_norm" in message and "test_open_dim_norm_dropout.py" in message, message
    assert "give all but one of those dims a size in input_spec" in message, message


@pytest.mark.parametrize("draw", ["layer", "uniform"])
@pytest.mark.parametrize("target", TARGETS)
def test_dropout_of_an_open_dim_draws_the_calls_sizes(target, draw):
    """Once refused on static targets (see tests/test_open_dim_random_draws.py): now every
    target draws the call's sizes, the generator's numbers."""
    spec = [ug.Spec((None, 4, 3, 3), "float32")]
    with ug.use_backend(*target.split(":")):
        dropout = ug.nn.Dropout(0.25)

        @ug.function(input_spec=spec)
        def forward(x):
            if draw == "layer":
                return dropout(x)
            return x * ug.random.uniform(x.shape, "float32")

        ug.manual_seed(0)
        got = forward(X).numpy()
    draws = np.random.default_rng(0).random(X.shape).astype(np.float32)
    expected = X * (draws >= 0.25) / np.float32(0.75) if draw == "layer" else X * draws
    np.testing.assert_allclose(got, expected, rtol=1e-6)
