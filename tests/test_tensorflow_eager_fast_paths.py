"""tensorflow:eager's cheaper lowerings (issue 19): raw ops fed integer operands made once
(`backends/unigraph_tensorflow/int_operands.py`), cross-entropy through TF's op itself with a
host label check, and a forward conv + bias as one fused NCHW op (`nchw_conv.py`).

The programs run on all 9 targets against float64 NumPy written here (each twice, so that
the second call reuses what the first made); the last tests look at how TF ran them.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from conv_reference import conv2d_reference
from train_steps import sgd_cross_entropy_step

import unigraph as ug

F = ug.nn.functional


# -- values, on every target ------------------------------------------------------------------
@ug.function
def shapes_and_axes(x):
    return (ug.reshape(x, (3, 8)), ug.transpose(x, (2, 0, 1)), ug.sum(x, axis=(0, 2)),
            ug.mean(x), ug.max(x, axis=1, keepdims=True), F.softmax(x, axis=2))


@pytest.mark.parametrize("target", TARGETS)
def test_axes_shapes_and_permutations(target):
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    e = np.exp(x - x.max(axis=2, keepdims=True))
    expected = [x.reshape(3, 8), x.transpose(2, 0, 1), x.sum(axis=(0, 2), dtype=np.float64),
                x.mean(dtype=np.float64), x.max(axis=1, keepdims=True),
                e / e.sum(axis=2, keepdims=True)]
    for _ in range(2):
        out = run_on(target, shapes_and_axes, x)
        assert len(out) == len(expected)
        for got, want in zip(out, expected):
            assert got.shape == np.shape(want)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _softmax_regression(n=6, features=5, classes=4, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, features)).astype(np.float32),
            rng.integers(0, classes, n).astype(np.int64),
            (rng.standard_normal((features, classes)) * 0.3).astype(np.float32),
            (rng.standard_normal(classes) * 0.1).astype(np.float32))


def _step_reference(x, y, w, b, lr):
    """One SGD step of mean softmax cross-entropy, in float64, by hand: the loss, and the
    weights after the step (gradient (softmax - onehot) / n through x @ w + b)."""
    x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    logits = x @ w + b
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = -np.log(p[rows, y]).mean()
    g = p.copy()
    g[rows, y] -= 1
    g /= len(y)
    return loss, w - lr * (x.T @ g), b - lr * g.sum(axis=0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_cross_entropy_training_step(target):
    """Loss and updated weights of two SGD steps against the float64 hand computation."""
    x, y, w, b = _softmax_regression()
    with ug.use_backend(*target.split(":")):
        model = ug.nn.Linear(*w.shape)
        model.load_state_dict({"weight": w, "bias": b})
        step = sgd_cross_entropy_step(model, 0.5)
        for _ in range(2):
            loss = step(x, y)
            want_loss, w, b = _step_reference(x, y, w, b, 0.5)
            np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
            state = model.state_dict()
            np.testing.assert_allclose(np.asarray(state["weight"]), w, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.asarray(state["bias"]), b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_a_bad_label_is_refused_naming_it(target):
    x, y, w, b = _softmax_regression()
    y[2] = 4  # 4 classes: labels lie in [0, 4)

    @ug.function
    def loss(logits, labels):
        return F.cross_entropy(logits, labels)

    with pytest.raises(ug.IndexOutOfRangeError, match="4"):
        run_on(target, loss, x @ w + b, y)


def _conv_inputs(seed=4):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, 3, 7, 8)).astype(np.float32),
            (rng.standard_normal((5, 3, 3, 2)) * 0.3).astype(np.float32),
            (rng.standard_normal(5) * 0.1).astype(np.float32))


@ug.function
def strided_conv_with_bias(x, w, b):
    return ug.conv2d(x, w, b, stride=(2, 1), padding=(1, 0))


@pytest.mark.parametrize("target", TARGETS)
def test_a_strided_unevenly_padded_conv_with_bias(target):
    x, w, b = _conv_inputs()
    expected = conv2d_reference(x, w, b, (2, 1), (1, 0))
    for _ in range(2):
        out = run_on(target, strided_conv_with_bias, x, w, b)
        assert out.shape == expected.shape
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


# -- how TensorFlow ran them ------------------------------------------------------------------
def _tf_modules():
    from unigraph.plugins import get_backend

    get_backend("tensorflow").load()  # imports tensorflow after paddle
    from unigraph_tensorflow import int_operands, lowerings, nchw_conv

    return int_operands, lowerings, nchw_conv


def test_an_int_operand_is_made_once_eagerly_and_left_to_graphs():
    int_operands, _, _ = _tf_modules()
    import tensorflow as tf

    first = int_operands.int_operand((1, 0))
    assert first is int_operands.int_operand((1, 0))
    assert first is int_operands.int_operand([np.int64(1), np.int64(0)])
    assert first.dtype == tf.int32 and first.numpy().tolist() == [1, 0]
    assert int_operands.int_operand((2 ** 40,)).dtype == tf.int64
    assert int_operands.int_operand(()).shape == (0,)
    seen = []

    @tf.function
    def in_a_trace():
        seen.append(int_operands.int_operand((1, 0)))
        return tf.constant(0)

    in_a_trace()
    assert seen == [(1, 0)]  # a graph makes its own Const, never captures an eager tensor


def test_eager_cross_entropy_skips_tf_nn_wrapper(monkeypatch):
    """Eagerly TF's op runs without tf.nn's wrapper; values as through the wrapper."""
    _, lowerings, _ = _tf_modules()
    import tensorflow as tf

    x, y, w, b = _softmax_regression()
    logits = tf.constant(x @ w + b)
    through_wrapper = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant(y), logits=logits).numpy()
    monkeypatch.setattr(tf.nn, "sparse_softmax_cross_entropy_with_logits", None)
    direct = lowerings.sparse_softmax_cross_entropy(logits, tf.constant(y)).numpy()
    np.testing.assert_array_equal(direct, through_wrapper)


def test_an_eager_forward_conv_with_bias_is_one_fused_op(monkeypatch):
    """Where the probe found it, an eager forward conv with a bias runs `_FusedConv2D`, bit
    for bit the values of Conv2D + BiasAdd; without a bias, or under a gradient, it does not."""
    _, _, nchw_conv = _tf_modules()
    import tensorflow as tf

    x, w, b = _conv_inputs()
    calls = []
    fused = nchw_conv.fused_conv2d_nchw
    monkeypatch.setattr(nchw_conv, "fused_conv2d_nchw",
                        lambda *a, **k: calls.append(1) or fused(*a, **k))
    out = run_on("tensorflow:eager", strided_conv_with_bias, x, w, b)
    assert len(calls) == (1 if nchw_conv.fused_supported() else 0)
    run_on("tensorflow:eager", ug.function(lambda x, w: ug.conv2d(x, w, padding=1)), x, w)
    run_on("tensorflow:eager", ug.function(ug.grad(
        lambda x, w, b: ug.sum(ug.conv2d(x, w, b, padding=1)), argnums=(1,))), x, w, b)
    assert len(calls) == (1 if nchw_conv.fused_supported() else 0)
    if nchw_conv.fused_supported():
        unfused = nchw_conv.conv2d_nchw(tf.constant(x), tf.transpose(w, (2, 3, 1, 0)),
                                        tf.constant(b), stride=(2, 1), padding=(1, 0))
        np.testing.assert_array_equal(out, unfused.numpy())
