"""conv2d and the pools where `input_spec` leaves dims open (sizes known only when the
program runs), on all 9 targets, forward and gradient, with an empty batch and a full one,
against numpy:eager in float64.

TF's graph targets (tensorflow:static, tensorflow:function) raised raw errors here (found
by the random-program tester with open dims): the zeros they return for an empty batch
were built from the static channel count and kernel size (`None values not supported`,
`NoneType - int`), and a dilated strided conv wrote the zeros into its filter with static
sizes; those are now read when the graph runs where the graph does not know them.
paddle:static's float64 avg_pool2d with the channels open raised Paddle's ValueError.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

CONVS = {
    "plain": {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1},
    "grouped, dilated, strided": {"stride": (2, 1), "padding": (1, 0), "dilation": (2, 1),
                                  "groups": 2},
}
OPEN = {  # which dims of (x, w, bias) the spec leaves open
    "every dim": ((0, 1, 2, 3), (0, 1, 2, 3), (0,)),
    "the filter's": ((), (0, 1, 2, 3), (0,)),
    "x's channels": ((1,), (), ()),
}


def _spec(arrays, opened):
    return [ug.Spec(tuple(None if axis in axes else d for axis, d in enumerate(a.shape)),
                    str(a.dtype)) for a, axes in zip(arrays, opened)]


def _run(fn, arrays, opened, target, tolerance=1e-4):
    """fn(*arrays) and the gradient of a weighted sum of it, on `target` with the spec and
    on numpy:eager in float64 (no spec); asserts they agree."""

    def loss(*xs):
        out = fn(*xs)
        return ug.sum(out * out)

    def both(spec):
        forward = ug.function(fn, input_spec=spec)
        grad = ug.function(lambda *xs: ug.grad(loss, argnums=tuple(range(len(xs))))(*xs),
                           input_spec=spec)
        return forward, grad

    wide = [a.astype(np.float64) for a in arrays]
    with ug.use_backend("numpy", "eager"):
        forward, grad = both(_spec(wide, opened))
        expected = [forward(*wide).numpy()] + [g.numpy() for g in grad(*wide)]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward, grad = both(_spec(arrays, opened))
        got = [forward(*arrays).numpy()] + [g.numpy() for g in grad(*arrays)]
    for name, a, e in zip(["output"] + [f"grad {k}" for k in range(len(arrays))], got,
                          expected):
        assert a.shape == e.shape, name
        np.testing.assert_allclose(a, e, rtol=tolerance, atol=tolerance, err_msg=name)


@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_with_open_dims(target, conv, opened, batch):
    attrs = CONVS[conv]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, 2, 5, 4)).astype(np.float32)
    w = rng.normal(size=(4, 2 // attrs["groups"], 2, 3)).astype(np.float32)
    bias = rng.normal(size=(4,)).astype(np.float32)
    _run(lambda x, w, b: ug.conv2d(x, w, b, **attrs), [x, w, bias], OPEN[opened], target)


POOLS = {"every dim": (0, 1, 2, 3), "the channels": (1,)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("opened", list(POOLS))
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("target", TARGETS)
def test_pools_with_open_dims(target, op, opened, batch, dtype):
    """Also paddle:static's float64 avg_pool2d (a depthwise conv of ones, whose groups are
    the channels) with the channels open: it raised Paddle's ValueError ('All elements in
    shape must be positive')."""
    x = np.random.default_rng(1).normal(size=(batch, 3, 4, 3)).astype(dtype)
    pool = getattr(ug, op)
    _run(lambda x: pool(x, (2, 2), stride=(1, 2), padding=(1, 0)), [x], [POOLS[opened]],
         target)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("padding", [(0, 0), (1, 0)])
@pytest.mark.parametrize("target", TARGETS)
def test_avg_pool2d_leaving_out_the_padding_with_the_image_open(target, padding, dtype):
    """count_include_pad=False with the height and width open: paddle:static built the
    mask of counted cells as paddle.ones([1, 1, -1, -1]) and raised Paddle's ValueError
    ('All elements in shape must be positive'; random-program seed 15002, float16)."""
    x = np.random.default_rng(3).normal(size=(2, 3, 5, 4)).astype(dtype)
    tolerance = 2e-2 if dtype == "float16" else 1e-4
    _run(lambda x: ug.avg_pool2d(x, (3, 2), stride=(2, 1), padding=padding,
                                 count_include_pad=False), [x], [(0, 1, 2, 3)], target,
         tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("target", TARGETS)
def test_pools_of_an_empty_batch_with_the_height_open(target, op, dtype):
    """paddle:static's max_pool2d reshaped its result to [0, 3, -1, 4], which Paddle
    refuses (raw ValueError: 'size must be divisible by known capacity'; seed 5006)."""
    x = np.zeros((0, 3, 4, 3), dtype)
    pool = getattr(ug, op)
    _run(lambda x: pool(x, (3, 2), stride=(2, 1), padding=(0, 1)), [x], [(2,)], target)


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_with_open_dims_carried_by_a_while_loop(target):
    """A loop carrying a conv's output, which the IR knows [None, None, 1, 2]: TF's graph
    targets raised TF's raw ValueError ('enters the loop with shape (None, None, 1, 2), but
    has shape (None, None, None, 2) after one iteration'): the empty-batch route read the
    kept sizes when the graph runs, and the loop body's outputs did not take the IR's
    shapes."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 2, 3, 6)).astype(np.float32)
    w = rng.normal(size=(4, 1, 2, 3)).astype(np.float32)

    def program(x, w):
        out = ug.conv2d(x, w, stride=(2, 2), padding=(0, 1), dilation=(2, 2), groups=2)

        def body(k, v):
            return k + 1, ug.tanh(v) + out

        return ug.while_loop(lambda k, v: k < 3, body, (ug.tensor(0), out))[1]

    _run(program, [x, w], [(0,), (0,)], target)
