"""Programs one framework once got wrong (issue 12 items 4, 9, 10), run on all 9 targets.

Each case is written once; its expected values are worked out by hand or with plain float64
NumPy written here, never taken from the code under test. The forward runs as a
`ug.function` (traced into each static target's own graph), and so does the gradient.

- A convolution or pooling over an empty batch (N = 0) has the shape its attrs say, in the
  data as well as in `Tensor.shape`, and its gradient is zeros of the parameters' shapes.
- An activation applied to softmax / log_softmax over a non-last axis runs (graph builders
  must not assume a constant permutation ahead of it).
- `matmul(transpose(a), b) + c` with c of shape [1, N] runs and differentiates (graph
  optimizers must not turn c into a bias they cannot take).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


def run(target: str, fn, *args) -> list:
    """`fn(*args)` as a ug.function on `target`, outputs as NumPy arrays."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(fn)(*args)
    outs = out if isinstance(out, tuple | list) else [out]
    return [np.asarray(o.numpy()) for o in outs]


def gradient_of(loss, count: int):
    """fn(*xs) -> (d loss / d xs[i] for i < count)."""
    return lambda *xs: ug.grad(loss, argnums=tuple(range(count)))(*xs)


def assert_close(got, want, what, tolerance=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tolerance, atol=tolerance,
                               err_msg=what)


def normal(shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


# -- convolution and pooling on an empty batch -------------------------------------------------

EMPTY = np.zeros((0, 4, 7, 7), np.float32)

# (conv2d keywords, weight shape, expected output shape): out = (7 + 2p - d(k-1) - 1) // s + 1.
CONVS = {
    "plain": ({"padding": 1, "stride": 2}, (6, 4, 3, 3), (0, 6, 4, 4)),
    "bias": ({"padding": 0}, (5, 4, 3, 3), (0, 5, 5, 5)),
    "groups": ({"padding": 1, "groups": 2}, (6, 2, 3, 3), (0, 6, 7, 7)),
    "dilated": ({"dilation": 2}, (3, 4, 3, 3), (0, 3, 3, 3)),
    "dilated-strided": ({"dilation": 2, "stride": 2, "padding": 1}, (3, 4, 3, 3), (0, 3, 3, 3)),
}


@pytest.mark.parametrize("case", sorted(CONVS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_on_an_empty_batch_has_its_declared_shape(target, case):
    attrs, weight_shape, want_shape = CONVS[case]
    w = normal(weight_shape, 0)
    bias = normal(weight_shape[:1], 1) if case == "bias" else None

    def conv(x, w):
        y = ug.conv2d(x, w, bias, **attrs)
        return y, ug.relu(y)  # an activation after the conv: TF graphs move it to NHWC

    for y in run(target, conv, EMPTY, w):
        assert_close(y, np.zeros(want_shape), f"conv2d {case} on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_gradient_on_an_empty_batch_is_zero(target):
    w, b = normal((6, 4, 3, 3), 2), normal((6,), 3)

    def loss(x, w, b):
        return ug.sum(ug.conv2d(x, w, b, padding=1, stride=2) * 3.0)

    gx, gw, gb = run(target, gradient_of(loss, 3), EMPTY, w, b)
    assert_close(gx, np.zeros(EMPTY.shape), f"d/dx on {target}")
    assert_close(gw, np.zeros(w.shape), f"d/dw on {target}")
    assert_close(gb, np.zeros(b.shape), f"d/db on {target}")


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("target", TARGETS)
def test_pool_on_an_empty_batch_has_its_declared_shape(target, pool):
    def pooled(x):
        y = getattr(ug, pool)(x, 3, stride=2, padding=1)  # (7 + 2 - 3) // 2 + 1 = 4
        return y, ug.grad(lambda v: ug.sum(getattr(ug, pool)(v, 3, 2, 1)))(x)

    y, gx = run(target, pooled, EMPTY)
    assert_close(y, np.zeros((0, 4, 4, 4)), f"{pool} on {target}")
    assert_close(gx, np.zeros(EMPTY.shape), f"d {pool} / dx on {target}")


# -- an activation after softmax over a non-last axis ------------------------------------------


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


ACTIVATIONS = {
    "relu": (ug.relu, lambda v: np.maximum(v, 0.0)),
    "sigmoid": (ug.sigmoid, lambda v: 1.0 / (1.0 + np.exp(-v))),
    "tanh": (ug.tanh, np.tanh),
}


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("target", TARGETS)
def test_activation_after_softmax_over_a_leading_axis(target, activation):
    act, np_act = ACTIVATIONS[activation]
    x = normal((3, 4, 2), 4)
    x64 = x.astype(np.float64)

    def program(x):
        return act(ug.softmax(x, axis=0)), act(ug.log_softmax(x, axis=1))

    soft, log_soft = run(target, program, x)
    assert_close(soft, np_act(np_softmax(x64, 0)), f"{activation}(softmax) on {target}")
    assert_close(log_soft, np_act(np.log(np_softmax(x64, 1))),
                 f"{activation}(log_softmax) on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_through_relu_after_softmax_over_a_leading_axis(target):
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    # softmax over axis 0 is positive, so relu passes it: d/dx sum(s * r) = s * (r - sum(s*r)).
    r = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    s = np_softmax(x.astype(np.float64), 0)
    want = s * (r - (s * r).sum(axis=0, keepdims=True))

    def loss(x):
        return ug.sum(ug.relu(ug.softmax(x, axis=0)) * r)

    (got,) = run(target, gradient_of(loss, 1), x)
    assert_close(got, want, f"gradient on {target}")


# -- matmul(transpose(a), b) + c with c of shape [1, N] ----------------------------------------

BIAS_ADDS = {
    "matmul-plus-row": lambda a, b, c: ug.matmul(ug.transpose(a), b) + c,
    "row-plus-matmul": lambda a, b, c: c + ug.matmul(ug.transpose(a), b),
    "relu-of-matmul-plus-row": lambda a, b, c: ug.relu(ug.matmul(ug.transpose(a), b) + c),
}


@pytest.mark.parametrize("form", sorted(BIAS_ADDS))
@pytest.mark.parametrize("target", TARGETS)
def test_transposed_matmul_plus_a_row(target, form):
    a, b, c = normal((3, 2), 5), normal((3, 4), 6), normal((1, 4), 7)
    r = normal((2, 4), 8)  # the loss weights each output element
    fn = BIAS_ADDS[form]
    a64, b64, c64, r64 = (v.astype(np.float64) for v in (a, b, c, r))
    pre = a64.T @ b64 + c64
    relu = form.startswith("relu")
    want = np.maximum(pre, 0) if relu else pre
    g = r64 * (pre > 0) if relu else r64  # d loss / d pre

    def forward_and_gradients(a, b, c):
        grads = ug.grad(lambda a, b, c: ug.sum(fn(a, b, c) * r), argnums=(0, 1, 2))(a, b, c)
        return (fn(a, b, c), *grads)

    out, ga, gb, gc = run(target, forward_and_gradients, a, b, c)
    assert_close(out, want, f"{form} on {target}")
    assert_close(ga, b64 @ g.T, f"d/da of {form} on {target}")  # pre = a.T b: d/da = b g.T
    assert_close(gb, a64 @ g, f"d/db of {form} on {target}")
    assert_close(gc, g.sum(axis=0, keepdims=True), f"d/dc of {form} on {target}")


# -- tie-splitting gradients inside control flow ------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_tie_gradients_inside_a_branch_inside_a_loop(target):
    # `y` comes from outside the loop and the branch; maximum ties at elements 0 and 3 split
    # the gradient 0.5/0.5, and the pool's gradient goes to the first 3 of y (element 2).
    x = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    y = np.array([1.0, 0.0, 3.0, 3.0], np.float32)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)

    def loss(x, y):
        def body(k, a):
            peak = ug.reshape(ug.max_pool2d(ug.reshape(y, (1, 1, 2, 2)), 2, 1), ())
            return k + 1, ug.cond(ug.sum(a) > 0, lambda: ug.maximum(a, y) + peak,
                                  lambda: ug.minimum(a, y))

        _, out = ug.while_loop(lambda k, a: k < 1, body, (ug.tensor(0), x * 1.0))
        return ug.sum(out * w)

    gx, gy = run(target, gradient_of(loss, 2), x, y)
    assert_close(gx, w * [0.5, 1.0, 0.0, 0.5], f"d/dx on {target}")
    assert_close(gy, w * [0.5, 0.0, 1.0, 0.5] + [0.0, 0.0, w.sum(), 0.0], f"d/dy on {target}")
