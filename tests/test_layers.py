"""The layers people expect (issue 14 part 2) on all 9 targets: LayerNorm, GroupNorm,
Embedding, AdaptiveAvgPool2D, Conv1D, MaxPool1D, AvgPool1D, ConvTranspose2D, and the pooling
options (ceil_mode, count_include_pad, asymmetric padding, dilation). Each layer's forward is
compared with a float64 NumPy loop written here, and its forward and gradients (input and
parameters) with PyTorch's own layer holding the same weights, in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import INFERENCE_TARGETS, TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

RNG = np.random.default_rng(1414)
NN = torch.nn


def _randomise(layer, torch_layer):
    """Random float64 weights in the ug layer, copied into the torch layer (same order)."""
    for param, twin in zip(layer.trainable_parameters(), torch_layer.parameters(),
                           strict=True):
        values = RNG.standard_normal(param.shape)
        param.set_value(values)
        with torch.no_grad():
            twin.copy_(torch.tensor(values))


# -- float64 NumPy loops: the forward references --------------------------------------------------
def _norm_ref(x, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)


def _layer_norm_ref(layer, x):
    w, b = (p.numpy() for p in layer.trainable_parameters())
    return _norm_ref(x, tuple(range(x.ndim - w.ndim, x.ndim))) * w + b


def _group_norm_ref(layer, x):
    w, b = (p.numpy() for p in layer.trainable_parameters())
    n, c = x.shape[:2]
    grouped = _norm_ref(x.reshape(n, layer.num_groups, -1), (2,)).reshape(x.shape)
    return grouped * w.reshape(1, c, 1, 1) + b.reshape(1, c, 1, 1)


def _embedding_ref(layer, ids):
    table = layer.weight.numpy()
    out = np.stack([table[i] for i in ids.ravel()]).reshape(ids.shape + (table.shape[1],))
    return out * (ids != layer.padding_idx)[..., None]


def _adaptive_ref(size):
    def reference(layer, x):
        n, c, h, w = x.shape
        oh, ow = size
        out = np.zeros((n, c, oh, ow))
        for i in range(oh):
            for j in range(ow):
                rows = slice(math.floor(i * h / oh), math.ceil((i + 1) * h / oh))
                cols = slice(math.floor(j * w / ow), math.ceil((j + 1) * w / ow))
                out[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
        return out

    return reference


def _taps(size, out_len, k, s, before, after, d, counted_pad):
    """Per output position: the input taps inside the image, and the taps a mean counts."""
    result = []
    for i in range(out_len):
        taps = [i * s - before + a * d for a in range(k)]
        inside = [t for t in taps if 0 <= t < size]
        low, high = (-before, size + after) if counted_pad else (0, size)
        result.append((inside, sum(low <= t < high for t in taps)))
    return result


def _out_len(size, k, s, before, after, d, ceil_mode):
    span = size + before + after - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    return out - 1 if ceil_mode and (out - 1) * s >= size + before else out


def _pool_ref(x, kernel, stride, pads, dilation=(1, 1), ceil_mode=False, mode="max",
              include=True):
    """2-D pooling by loops, PyTorch's rules; pads ((top, bottom), (left, right))."""
    n, c, h, w = x.shape
    dims = [(size, _out_len(size, kernel[k], stride[k], *pads[k], dilation[k], ceil_mode))
            for k, size in enumerate((h, w))]
    rows, cols = (_taps(size, out, kernel[k], stride[k], *pads[k], dilation[k], include)
                  for k, (size, out) in enumerate(dims))
    out = np.zeros((n, c, dims[0][1], dims[1][1]))
    for i, (r_in, r_count) in enumerate(rows):
        for j, (c_in, c_count) in enumerate(cols):
            window = x[:, :, r_in][:, :, :, c_in]
            if mode == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                out[:, :, i, j] = window.sum(axis=(2, 3)) / (r_count * c_count)
    return out


def _conv1d_ref(layer, x):
    w, b = (p.numpy() for p in layer.trainable_parameters())
    s, p, d, g = layer.stride, layer.padding, layer.dilation, layer.groups
    xp = np.pad(x, ((0, 0), (0, 0), (p, p)))
    o, cg, k = w.shape
    length = (xp.shape[2] - d * (k - 1) - 1) // s + 1
    out = np.zeros((x.shape[0], o, length))
    for oc in range(o):
        group = oc // (o // g)
        for pos in range(length):
            taps = xp[:, group * cg:(group + 1) * cg, pos * s: pos * s + d * (k - 1) + 1: d]
            out[:, oc, pos] = (taps * w[oc]).sum(axis=(1, 2)) + b[oc]
    return out


def _conv_transpose_ref(layer, x):
    w, b = (p.numpy() for p in layer.trainable_parameters())
    (sh, sw), (ph, pw) = layer.stride, layer.padding
    (dh, dw), (oph, opw), g = layer.dilation, layer.output_padding, layer.groups
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    full = np.zeros((n, og * g, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    for ci in range(c):
        group = ci // (c // g)
        for y in range(h):
            for xx in range(wd):
                for i in range(kh):
                    for j in range(kw):
                        full[:, group * og:(group + 1) * og, y * sh + i * dh,
                             xx * sw + j * dw] += x[:, ci, y, xx][:, None] * w[ci, :, i, j]
    out = full[:, :, ph: full.shape[2] - ph, pw: full.shape[3] - pw]
    return out + b.reshape(1, -1, 1, 1)


def _pads_of(padding):
    return tuple((p, p) if isinstance(p, int) else tuple(p) for p in padding)


def _pool1d_ref(mode, k, s, p, d=1, ceil_mode=False, include=True):
    def reference(layer, x):
        pads = ((0, 0), (p, p))
        return _pool_ref(x[:, :, None], (1, k), (1, s), pads, (1, d), ceil_mode, mode,
                         include)[:, :, 0]

    return reference


def _pool2d_ref(mode, k, s, padding, d=(1, 1), ceil_mode=False, include=True):
    return lambda layer, x: _pool_ref(x, k, s, _pads_of(padding), d, ceil_mode, mode, include)


# -- torch counterparts for what torch has no layer for (asymmetric padding) -------------------
class _TorchAsymmetric(NN.Module):
    """torch's pool over x padded as ((top, bottom), (left, right)): -inf for max; for avg,
    zeros with the count of cells each window counts (padding counted or not)."""

    def __init__(self, mode, kernel, stride, pads, include=True):
        super().__init__()
        self.mode, self.kernel, self.stride, self.include = mode, kernel, stride, include
        (t, b), (left, r) = pads
        self.widths = (left, r, t, b)

    def forward(self, x):
        if self.mode == "max":
            padded = NN.functional.pad(x, self.widths, value=-math.inf)
            return NN.functional.max_pool2d(padded, self.kernel, self.stride)
        total = NN.functional.avg_pool2d(NN.functional.pad(x, self.widths), self.kernel,
                                         self.stride)
        # 1 at each cell a window counts: the padding too, or only the input.
        counted = NN.functional.pad(torch.ones_like(x[:1, :1]), self.widths,
                                    value=1.0 if self.include else 0.0)
        return total / NN.functional.avg_pool2d(counted, self.kernel, self.stride)


# -- the cases: (ug layer, torch layer, input, NumPy reference) ----------------------------------
def _x(*shape):
    return RNG.standard_normal(shape)


CASES = {
    "layer_norm": (lambda: ug.nn.LayerNorm((4, 5), dtype="float64"),
                   lambda: NN.LayerNorm((4, 5), dtype=torch.float64), _x(2, 3, 4, 5),
                   _layer_norm_ref),
    "group_norm": (lambda: ug.nn.GroupNorm(2, 4, dtype="float64"),
                   lambda: NN.GroupNorm(2, 4, dtype=torch.float64), _x(2, 4, 3, 3),
                   _group_norm_ref),
    "embedding": (lambda: ug.nn.Embedding(7, 3, padding_idx=0, dtype="float64"),
                  lambda: NN.Embedding(7, 3, padding_idx=0, dtype=torch.float64),
                  np.array([[1, 0, 6, 1], [3, 3, 0, 2]]), _embedding_ref),
    "adaptive_3x2": (lambda: ug.nn.AdaptiveAvgPool2D((3, 2)),
                     lambda: NN.AdaptiveAvgPool2d((3, 2)), _x(2, 3, 7, 5),
                     _adaptive_ref((3, 2))),
    "adaptive_global": (lambda: ug.nn.AdaptiveAvgPool2D(1), lambda: NN.AdaptiveAvgPool2d(1),
                        _x(2, 3, 4, 5), _adaptive_ref((1, 1))),
    "adaptive_divisible": (lambda: ug.nn.AdaptiveAvgPool2D((None, 2)),
                           lambda: NN.AdaptiveAvgPool2d((None, 2)), _x(1, 2, 3, 6),
                           _adaptive_ref((3, 2))),
    "conv1d": (lambda: ug.nn.Conv1D(4, 6, 3, stride=2, padding=2, dilation=2, groups=2,
                                    dtype="float64"),
               lambda: NN.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2,
                                 dtype=torch.float64), _x(2, 4, 11), _conv1d_ref),
    "max_pool1d": (lambda: ug.nn.MaxPool1D(3, 2, 1, dilation=2, ceil_mode=True),
                   lambda: NN.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True), _x(2, 3, 10),
                   _pool1d_ref("max", 3, 2, 1, 2, True)),
    "avg_pool1d": (lambda: ug.nn.AvgPool1D(3, 2, 1, ceil_mode=True, count_include_pad=False),
                   lambda: NN.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                   _x(2, 3, 8), _pool1d_ref("avg", 3, 2, 1, 1, True, False)),
    "max_pool2d_options": (
        lambda: ug.nn.MaxPool2D(3, 2, 1, dilation=(2, 1), ceil_mode=True),
        lambda: NN.MaxPool2d(3, 2, 1, dilation=(2, 1), ceil_mode=True), _x(2, 2, 9, 8),
        _pool2d_ref("max", (3, 3), (2, 2), (1, 1), (2, 1), True)),
    "max_pool2d_asymmetric": (
        lambda: ug.nn.MaxPool2D((2, 3), (2, 2), ((1, 0), (0, 1))),
        lambda: _TorchAsymmetric("max", (2, 3), (2, 2), ((1, 0), (0, 1))), _x(1, 2, 6, 7),
        _pool2d_ref("max", (2, 3), (2, 2), ((1, 0), (0, 1)))),
    "avg_pool2d_ceil_counted": (
        lambda: ug.nn.AvgPool2D(3, 2, 1, ceil_mode=True),
        lambda: NN.AvgPool2d(3, 2, 1, ceil_mode=True), _x(2, 2, 6, 8),
        _pool2d_ref("avg", (3, 3), (2, 2), (1, 1), ceil_mode=True)),
    "avg_pool2d_ceil_uncounted": (
        lambda: ug.nn.AvgPool2D((3, 2), (2, 2), (1, 1), ceil_mode=True,
                                count_include_pad=False),
        lambda: NN.AvgPool2d((3, 2), (2, 2), (1, 1), ceil_mode=True, count_include_pad=False),
        _x(1, 3, 8, 7), _pool2d_ref("avg", (3, 2), (2, 2), (1, 1), ceil_mode=True,
                                    include=False)),
    "avg_pool2d_asymmetric": (
        lambda: ug.nn.AvgPool2D(3, 2, ((1, 0), (1, 1)), count_include_pad=False),
        lambda: _TorchAsymmetric("avg", (3, 3), (2, 2), ((1, 0), (1, 1)), include=False),
        _x(1, 2, 7, 6), _pool2d_ref("avg", (3, 3), (2, 2), ((1, 0), (1, 1)), include=False)),
    "conv_transpose2d": (
        lambda: ug.nn.ConvTranspose2D(4, 6, (3, 2), stride=(2, 1), padding=(1, 0),
                                      output_padding=(1, 1), dilation=(1, 2), groups=2,
                                      dtype="float64"),
        lambda: NN.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0),
                                   output_padding=(1, 1), dilation=(1, 2), groups=2,
                                   dtype=torch.float64), _x(2, 4, 3, 4), _conv_transpose_ref),
}


def _torch_forward_and_grads(torch_layer, x, r):
    integer = x.dtype.kind in "iu"
    inp = torch.tensor(x) if integer else torch.tensor(x, requires_grad=True)
    out = torch_layer(inp)
    (out * torch.tensor(r)).sum().backward()
    grads = [] if integer else [inp.grad.numpy()]
    return [out.detach().numpy(), *grads, *(p.grad.numpy() for p in torch_layer.parameters())]


def _ug_forward_and_grads(target, layer, x, r):
    params = layer.trainable_parameters()
    integer = x.dtype.kind in "iu"

    def loss(inp):
        return ug.sum(layer(inp) * r)

    @ug.function
    def run(inp):
        param_grads = ug.value_and_grad(lambda: loss(inp), wrt=params)()[1] if params else []
        input_grad = [] if integer else [ug.grad(loss)(inp)]
        return [layer(inp), *input_grad, *param_grads]

    return run_on(target, run, x)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_layer_against_numpy_and_torch(target, name):
    make, make_torch, x, reference = CASES[name]
    layer, torch_layer = make(), make_torch()
    _randomise(layer, torch_layer)
    if name == "embedding":  # the padding row is zero, as both layers make it and keep it
        layer.weight.set_value(layer.weight.numpy() * (np.arange(7) != 0)[:, None])
        with torch.no_grad():
            torch_layer.weight[0] = 0.0
    with torch.no_grad():
        shape = tuple(torch_layer(torch.tensor(x)).shape)
    r = np.random.default_rng(7).standard_normal(shape)
    want = _torch_forward_and_grads(torch_layer, x, r)
    got = _ug_forward_and_grads(target, layer, x, r)
    np.testing.assert_allclose(reference(layer, x), want[0], rtol=1e-10, atol=1e-12,
                               err_msg="the NumPy loop and torch disagree")
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (index, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10,
                                   err_msg=f"{name} on {target}: output/gradient {index}")


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_layer_forward_on_inference_targets(target, name):
    """The ONNX route (onnxruntime): each layer's forward, in float64, against torch's."""
    make, make_torch, x, _ = CASES[name]
    layer, torch_layer = make(), make_torch()
    _randomise(layer, torch_layer)
    with torch.no_grad():
        want = torch_layer(torch.tensor(x)).numpy()
    if name == "embedding":
        want = want * (x != 0)[..., None]  # ug's padding positions give zeros
    got = run_on(target, ug.function(lambda inp: layer(inp)), x)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10, err_msg=f"{name} on {target}")


# -- errors in the user's terms -----------------------------------------------------------------
def test_pool_padding_over_half_the_kernel_is_refused():
    with pytest.raises(ShapeError, match="kernel // 2"):
        ug.max_pool2d(np.zeros((1, 1, 4, 4)), 2, padding=((0, 2), (0, 0)))


def test_conv_transpose_output_padding_limit_is_named():
    with pytest.raises(ShapeError, match="output_padding"):
        ug.conv_transpose2d(np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 3, 3)), stride=2,
                            output_padding=2)


def test_layer_norm_shape_mismatch_names_the_shapes():
    with pytest.raises(ShapeError, match=r"normalized_shape \[4\].*\[2, 5\]"):
        ug.nn.LayerNorm(4)(np.zeros((2, 5), np.float32))


def test_group_norm_channels_must_split_into_groups():
    with pytest.raises(ValueError, match="multiple of num_groups"):
        ug.nn.GroupNorm(3, 4)


def test_embedding_refuses_float_ids():
    with pytest.raises(ShapeError, match="integers"):
        ug.nn.Embedding(4, 2)(np.array([0.0, 1.0]))
