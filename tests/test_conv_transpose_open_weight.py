"""conv_transpose2d where `input_spec` leaves the weight's dims open, or the channels of one
operand only, and of an empty batch next to another conv_transpose2d: on all 9 targets,
forward and gradient, against numpy:eager in float64 (and onnxruntime:static forward).

Found by the random-program tester once it drew conv_transpose2d:
* paddle:static gave an output of another size, silently, where output_padding is not
  below the stride (its crop read the kernel's size -1 while building), and raised a raw
  ValueError where the weight's input channels were open and x's known (or the reverse);
* onnxruntime:static raised a raw TypeError writing a float64 conv_transpose2d (its conv
  form) whose weight's channels or kernel size were open: now a BackendError naming the
  line and the fix, a documented open-dim limit;
* TensorFlow's gradient w.r.t. an empty batch's x had the uncropped output's shape (TF's
  Conv2D hands back its input for N = 0), on every TF target.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import INFERENCE_TARGETS, TARGETS
from test_open_dim_images import _run

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import BackendError

RNG = np.random.default_rng(5)
X = RNG.normal(size=(2, 4, 3, 5)).astype(np.float32)
W = RNG.normal(size=(4, 1, 3, 2)).astype(np.float32)
B = RNG.normal(size=(2,)).astype(np.float32)
ATTRS = {  # output_padding below the stride, and not (below the dilation only)
    "small output_padding": {"stride": (2, 1), "padding": (1, 0), "output_padding": (1, 0),
                             "groups": 2},
    "output_padding >= stride": {"stride": (1, 1), "padding": (1, 1), "dilation": (2, 1),
                                 "output_padding": (1, 0), "groups": 2},
}
OPEN = {  # which dims of (x, w, bias) the spec leaves open
    "kernel height": ((), (2,), ()),
    "kernel width": ((), (3,), ()),
    "weight's channels": ((), (0,), ()),
    "x's channels": ((1,), (), ()),
    "the weight's every dim": ((), (0, 1, 2, 3), ()),
}


def conv(attrs):
    return lambda x, w, b: ug.conv_transpose2d(x, w, b, **attrs)


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("attrs", list(ATTRS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose2d_with_an_open_weight(target, attrs, opened):
    _run(conv(ATTRS[attrs]), [X, W, B], OPEN[opened], target)


@pytest.mark.parametrize("opened", ["weight's channels", "x's channels"])
@pytest.mark.parametrize("attrs", list(ATTRS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose2d_of_an_empty_batch_with_one_side_channels_open(target, attrs, opened):
    """paddle:static gave (0, 2, 0, 0) or raised a raw ValueError ('negative dimensions')
    for an empty batch with x's channels open: the reshape giving them the weight's count
    kept the other dims by reshape's 0, which Paddle reads as a size 0 of a tensor with no
    elements (random tester seed 9001)."""
    _run(conv(ATTRS[attrs]), [X[:0], W, B], OPEN[opened], target)


def _forward(target, attrs, arrays, opened):
    spec = [ug.Spec(tuple(None if axis in axes else d for axis, d in enumerate(a.shape)),
                    str(a.dtype)) for a, axes in zip(arrays, opened)]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return ug.function(conv(attrs), input_spec=spec)(*arrays).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("attrs", list(ATTRS))
@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_onnxruntime_conv_transpose2d_with_an_open_weight(target, attrs, opened, dtype):
    """Where ORT runs its own ConvTranspose (float32, output_padding below the stride) the
    result agrees; its conv form needs the channels and kernel: refused, naming both."""
    arrays = [a.astype(dtype) for a in (X, W, B)]
    with ug.use_backend("numpy", "eager"):
        want = conv(ATTRS[attrs])(*(a.astype(np.float64) for a in arrays)).numpy()
    native = dtype == "float32" and attrs == "small output_padding"
    if native or opened in ("x's channels", "weight's channels"):  # (one operand knows)
        got = _forward(target, ATTRS[attrs], arrays, OPEN[opened])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        return
    with pytest.raises(BackendError, match=r"conv_transpose2d at .*test_conv_transpose_"
                       r"open_weight.py:\d+: .*needs the weight's channels and kernel size"
                       r".*give those dims sizes in the spec"):
        _forward(target, ATTRS[attrs], arrays, OPEN[opened])


@pytest.mark.parametrize("opened", ["kernel height", "the weight's every dim", "x's every dim"])
@pytest.mark.parametrize("attrs", list(ATTRS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_output_meets_a_value_of_its_shape(target, attrs, opened):
    """paddle:static gave the output sizes computed from the kernel's -1 rows (a Program
    shape [2, 2, 2, 5] where the run's is [2, 2, 6, 5]), or x's (a height of 0), so a
    product with an array of its true shape was refused while building (random tester,
    seeds 8002 and 9001)."""
    with ug.use_backend("numpy", "eager"):
        shape = conv(ATTRS[attrs])(X, W, B).shape
    weights = np.cos(np.arange(np.prod(shape))).reshape(shape).astype(np.float32)
    opened = OPEN[opened] if opened in OPEN else ((0, 1, 2, 3), (), ())
    _run(lambda x, w, b: conv(ATTRS[attrs])(x, w, b) * weights, [X, W, B], opened, target)


def two_convs(x, w, y, v):
    return ug.conv_transpose2d(x, w, padding=(0, 1)), ug.conv_transpose2d(y, v)


@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_of_two_conv_transposes_of_empty_batches(target):
    x = np.zeros((0, 1, 3, 3), np.float32)
    w = np.array([[[[0.832, 1.262]]]], np.float32)
    v = np.array([[[[1.676]]]], np.float32)

    def loss(*args):
        a, b = two_convs(*args)
        return ug.sum(a * 1.5) + ug.sum(b * 1.5)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        outs = [o.numpy() for o in ug.function(two_convs)(x, w, x, v)]
        grads = [g.numpy() for g in ug.function(ug.grad(loss, argnums=(0, 1, 2, 3)))(
            x, w, x, v)]
    assert [o.shape for o in outs] == [(0, 1, 3, 2), (0, 1, 3, 3)]
    assert [g.shape for g in grads] == [x.shape, w.shape, x.shape, v.shape]
    for g in grads:
        np.testing.assert_array_equal(g, np.zeros_like(g))
