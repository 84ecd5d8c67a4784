"""CNN programs through the TensorFlow graph modes' NHWC layout pass
(`backends/unigraph_tensorflow/layout.py`, issue 19 item 5), on all 9 targets.

The same programs run everywhere: conv -> bias -> relu -> pool -> conv -> per-channel scale
and shift -> tanh -> pool -> conv -> flatten -> linear, forward and with gradients; and a
conv whose output feeds a pool and several reductions. Forwards are compared with float64
NumPy written here, gradients with PyTorch's autograd in float64 on the same weights. The
last tests look at the TF graph itself: how many activation transposes it runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TARGETS, run_on
from tf_graphs import graph_ops

import unigraph as ug

F = torch.nn.functional
TF_GRAPH_TARGETS = ("tensorflow:static", "tensorflow:function")


def _cnn_inputs(seed=19):
    """x and the weights of `cnn`, float32 (what a user feeds)."""
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return [
        normal(2, 3, 8, 8),                                    # x
        normal(6, 3, 3, 3, scale=0.4), normal(6, scale=0.1),   # conv1 weight, bias
        normal(8, 6, 3, 3, scale=0.25),                        # conv2 weight (no bias)
        normal(8), normal(1, 8, 1, 1, scale=0.1),              # per-channel scale, shift
        normal(4, 8, 3, 3, scale=0.25), normal(4, scale=0.1),  # conv3 weight, bias
        normal(16, 5, scale=0.3), normal(5, scale=0.1),        # linear weight, bias
    ]


def cnn(x, w1, b1, w2, scale, shift, w3, b3, wl, bl):
    h = ug.relu(ug.conv2d(x, w1, b1, padding=1))
    h = ug.max_pool2d(h, 2)
    h = ug.conv2d(h, w2, padding=1)
    h = ug.tanh(h * ug.reshape(scale, (8, 1, 1)) + shift)  # a [C,1,1] and a [1,C,1,1]
    h = ug.avg_pool2d(h, 2)
    h = ug.relu(ug.conv2d(h, w3, b3, padding=1))
    return ug.matmul(ug.reshape(h, (2, -1)), wl) + bl


def branches(x, w, b):
    """One conv read by a pool and by reductions whose kept axes do and do not keep their
    order in NHWC (the pass carries the first kind, the second reads the NCHW view)."""
    h = ug.conv2d(x, w, b, padding=1)
    return (ug.max_pool2d(h, 2),
            ug.mean(h, axis=(0, 2, 3)),                    # per channel: [C]
            h - ug.mean(h, axis=(2, 3), keepdims=True),    # [N,C,1,1] broadcast back
            ug.sum(h, axis=1),                             # over channels: [N, H, W]
            ug.sum(h, axis=0))                             # [C, H, W]: not carried


# -- float64 references -------------------------------------------------------------------------


def _conv_ref(x, w, b=None):
    """Stride 1, padding 1 (w's kernel size, 3x3 in the CNN)."""
    windows = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), w.shape[2:], axis=(2, 3))
    out = np.einsum("nchwij,ocij->nohw", windows, w)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _pool_ref(x, reduce):
    n, c, h, w = x.shape
    return reduce(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def _cnn_ref(x, w1, b1, w2, scale, shift, w3, b3, wl, bl):
    h = _pool_ref(np.maximum(_conv_ref(x, w1, b1), 0), np.max)
    h = np.tanh(_conv_ref(h, w2) * scale.reshape(8, 1, 1) + shift)
    h = np.maximum(_conv_ref(_pool_ref(h, np.mean), w3, b3), 0)
    return h.reshape(2, -1) @ wl + bl


def _cnn_torch(x, w1, b1, w2, scale, shift, w3, b3, wl, bl):
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
    h = torch.tanh(F.conv2d(h, w2, padding=1) * scale.reshape(8, 1, 1) + shift)
    h = F.relu(F.conv2d(F.avg_pool2d(h, 2), w3, b3, padding=1))
    return h.reshape(2, -1) @ wl + bl


def _float64(arrays):
    return [a.astype(np.float64) for a in arrays]


def _close(got, want, what):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * scale, err_msg=what)


# -- on all 9 targets ----------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_cnn_forward_matches_float64(target):
    inputs = _cnn_inputs()
    got = run_on(target, ug.function(cnn), *inputs)
    _close(got, _cnn_ref(*_float64(inputs)), f"cnn on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_cnn_gradients_match_torch_float64(target):
    inputs = _cnn_inputs()
    weights = np.random.default_rng(5).standard_normal((2, 5)).astype(np.float32)

    def loss(*args):
        return ug.sum(cnn(*args) * weights)

    got = run_on(target, ug.grad(loss, argnums=tuple(range(len(inputs)))), *inputs)
    leaves = [torch.tensor(a, requires_grad=True) for a in _float64(inputs)]
    (_cnn_torch(*leaves) * torch.tensor(weights.astype(np.float64))).sum().backward()
    assert len(got) == len(leaves)
    for index, (g, leaf) in enumerate(zip(got, leaves)):
        _close(g, leaf.grad.numpy(), f"gradient {index} on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_conv_read_by_a_pool_and_reductions_matches_float64(target):
    x, w, b = _cnn_inputs()[:3]
    got = run_on(target, ug.function(branches), x, w, b)
    h = _conv_ref(*_float64([x, w, b]))
    want = [_pool_ref(h, np.max), h.mean(axis=(0, 2, 3)),
            h - h.mean(axis=(2, 3), keepdims=True), h.sum(axis=1), h.sum(axis=0)]
    assert [g.shape for g in got] == [v.shape for v in want]
    for index, (g, v) in enumerate(zip(got, want)):
        _close(g, v, f"output {index} on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_transposes_of_a_conv_output_compose(target):
    # An explicit transpose of a conv's output to NHWC and back, with a per-row operand
    # that is not per channel ([W]: it broadcasts over the last axis of the NCHW value).
    x, w, b = _cnn_inputs()[:3]
    row = np.linspace(-1.0, 1.0, 8, dtype=np.float32)

    def program(x, w, b, row):
        nhwc = ug.transpose(ug.conv2d(x, w, b, padding=1), (0, 2, 3, 1))
        back = ug.transpose(ug.relu(nhwc), (0, 3, 1, 2))
        return ug.max_pool2d(back * row, 2), nhwc

    pooled, nhwc = run_on(target, ug.function(program), x, w, b, row)
    h = _conv_ref(*_float64([x, w, b]))
    _close(pooled, _pool_ref(np.maximum(h, 0) * row, np.max), f"pooled on {target}")
    _close(nhwc, h.transpose(0, 2, 3, 1), f"nhwc on {target}")


# -- images whose C, H and W are equal (the pass once took their transpose for a reshape) --


def _max_pool_ref(x, kernel, stride, padding=(0, 0)):
    (ph, pw), (sh, sw) = padding, stride
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=(2, 3))
    return windows[:, :, ::sh, ::sw].max(axis=(4, 5))


@pytest.mark.parametrize("target", TARGETS)
def test_pool_of_a_padded_cube_image_matches_float64(target):
    # The second pool reads a [1, 6, 6, 6] image that is no view: it must be transposed to
    # NHWC (a reshape gave -FLT_MAX, a window of -inf padding, on the TF graph targets).
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 20)).astype(np.float32)

    def program(x):
        y = ug.max_pool2d(x, (3, 1), stride=(2, 1), padding=(1, 0))   # [1, 2, 3, 20]
        y = ug.pad(ug.reshape(y, (1, 6, 5, 4)), [(0, 0), (0, 0), (0, 1), (1, 1)],
                   value=-np.inf)                                      # [1, 6, 6, 6]
        return ug.max_pool2d(y, (2, 3), stride=(2, 1))

    got = run_on(target, ug.function(program), x)
    y = _max_pool_ref(x.astype(np.float64), (3, 1), (2, 1), (1, 0)).reshape(1, 6, 5, 4)
    y = np.pad(y, ((0, 0), (0, 0), (0, 1), (1, 1)), constant_values=-np.inf)
    _close(got, _max_pool_ref(y, (2, 3), (2, 1)), f"pool on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_conv_of_a_reshaped_cube_image_matches_float64(target):
    # Depth padding, a transpose and reshape, slices and a concat, then a conv of the
    # [4, 4, 4, 4] result (the shape of a causal conv's decode step in the ONNX node tests).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)

    def program(x, w):
        y = ug.pad(x, [(0, 0), (0, 0), (1, 1), (0, 0), (0, 0)])
        y = ug.reshape(ug.transpose(y, (0, 2, 1, 3, 4)), (5, 2, 4, 4))
        y = ug.concat([ug.slice(y, (0, 0, 0, 0), (4, 2, 4, 4)),
                       ug.slice(y, (1, 0, 0, 0), (5, 2, 4, 4))], axis=1)   # [4, 4, 4, 4]
        return ug.conv2d(y, w, None, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)

    got = run_on(target, ug.function(program), x, w)
    x64, w64 = _float64([x, w])
    y = np.pad(x64, ((0, 0), (0, 0), (1, 1), (0, 0), (0, 0)))
    y = y.transpose(0, 2, 1, 3, 4).reshape(5, 2, 4, 4)
    y = np.concatenate([y[0:4], y[1:5]], axis=1)
    _close(got, _conv_ref(y, w64), f"conv on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_cube_operands_of_a_conv_output_match_float64(target):
    # A conv's [1, 4, 4, 4] output (a view) plus a full [1, 4, 4, 4] operand (transposed),
    # a [4, 1, 1] and a [1, 4, 4] one (both reshaped: only size-1 axes move).
    rng = np.random.default_rng(3)
    x, w, full, per_channel, per_pixel = (
        rng.standard_normal(shape).astype(np.float32)
        for shape in [(1, 2, 4, 4), (4, 2, 3, 3), (1, 4, 4, 4), (4, 1, 1), (1, 4, 4)])

    def program(x, w, full, per_channel, per_pixel):
        h = ug.conv2d(x, w, padding=1)
        return ug.relu(h * full + per_channel - per_pixel)

    got = run_on(target, ug.function(program), x, w, full, per_channel, per_pixel)
    x64, w64, full64, c64, p64 = _float64([x, w, full, per_channel, per_pixel])
    want = np.maximum(_conv_ref(x64, w64) * full64 + c64 - p64, 0)
    _close(got, want, f"sum on {target}")


# -- the TF graph itself -------------------------------------------------------------------------


def _activation_transposes(target, fn, *args) -> list:
    """The Transpose ops between NCHW and NHWC that one run of `fn`'s TF graph executes
    (those its fetches depend on: a Session and a function body run no others); weight
    transposes to HWIO are not counted."""
    layouts = {(0, 2, 3, 1), (0, 3, 1, 2)}
    return [op for op in graph_ops(target, fn, *args)
            if op.type == "Transpose" and _perm(op) in layouts]


def _perm(op):
    import tensorflow as tf

    value = tf.get_static_value(op.inputs[1])
    return None if value is None else tuple(value.tolist())


@pytest.mark.parametrize("target", TF_GRAPH_TARGETS)
def test_a_conv_chain_pays_one_transpose_in_and_one_out(target):
    """A property of the TF graph-mode lowering, not of results (those are checked on all 9
    targets above), so it runs on the two TF graph targets only: the 3-conv CNN, with its
    pools, per-channel scale and activations, transposes its activation once into NHWC and
    once out (at the flatten); differentiated, its backward adds the mirror pair. Without
    the layout pass the forward alone had two per conv and pool (10)."""
    inputs = _cnn_inputs()
    assert len(_activation_transposes(target, cnn, *inputs)) == 2

    def loss(*args):
        return ug.sum(cnn(*args))

    gradients = ug.grad(loss, argnums=tuple(range(len(inputs))))
    assert len(_activation_transposes(target, gradients, *inputs)) <= 4
