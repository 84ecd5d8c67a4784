"""A conv's per-channel bias, batch of 1 and more, with the bias untracked (inference) and
differentiated, on all 9 targets against the float64 reference; and on paddle:eager the
route taken (`unigraph_paddle.images._add_channel_bias`: an untracked bias of a batch of 1
expanded to the result's shape, then a same-shape add; a tracked one broadcast)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from conv_reference import conv2d_reference

import unigraph as ug
from unigraph.config import Target

RNG = np.random.default_rng(1901)
W = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


def _image(batch):
    return RNG.standard_normal((batch, 3, 7, 6)).astype(np.float32)


def _conv(x, w, b):
    return ug.conv2d(x, w, b, padding=1)


def _bias_gradient(x, w, b):
    return ug.grad(lambda b: ug.sum(ug.conv2d(x, w, b, padding=1) * x[:, :1]))(b)


def _compiled(fn, target):
    return ug.function(fn) if Target.parse(target).mode != "eager" else fn


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("target", TARGETS)
def test_conv_with_bias_equals_the_reference(target, batch):
    x = _image(batch)
    out = run_on(target, _compiled(_conv, target), ug.tensor(x), ug.tensor(W), ug.tensor(B))
    np.testing.assert_allclose(out, conv2d_reference(x, W, B, 1, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("target", TARGETS)
def test_bias_gradient_equals_the_reference(target, batch):
    """d/db sum(conv(x, w, b) * x[:, :1]) = the sum of x[:, 0] over N, H, W, per channel."""
    x = _image(batch)
    got = run_on(target, _compiled(_bias_gradient, target), ug.tensor(x), ug.tensor(W),
                 ug.tensor(B))
    expected = np.full(5, x[:, 0].astype(np.float64).sum())
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_paddle_eager_batch_of_one_expands_an_untracked_bias(monkeypatch):
    pytest.importorskip("paddle")
    if "paddle:eager" not in TARGETS:
        pytest.skip("paddle is not loaded")
    from paddle import _C_ops

    expanded = []  # the conv results' shapes expanded to (other expands are not counted)
    real = _C_ops.expand

    def expand(x, shape):
        if list(shape)[1:] == [5, 7, 6]:
            expanded.append(list(shape))
        return real(x, shape)

    monkeypatch.setattr(_C_ops, "expand", expand)
    x1, x3 = _image(1), _image(3)
    with ug.use_backend("paddle", "eager"):
        one = _conv(ug.tensor(x1), ug.tensor(W), ug.tensor(B)).numpy()
        assert expanded == [[1, 5, 7, 6]]
        _conv(ug.tensor(x3), ug.tensor(W), ug.tensor(B))  # a batch of 3: rows, not expand
        _bias_gradient(ug.tensor(x1), ug.tensor(W), ug.tensor(B))  # tracked: broadcast
    assert expanded == [[1, 5, 7, 6]]
    np.testing.assert_allclose(one, conv2d_reference(x1, W, B, 1, 1), rtol=1e-5, atol=1e-5)
