"""ug.conv2d's arguments: stride, padding, dilation and groups normalised once per distinct
form (cached, `unigraph.api.nn_ops._conv_attrs`), tensors of one float dtype passed on
without promotion, everything else promoted as before; malformed arguments refused with
unigraph's error naming the user's line, on every call. All 9 targets, against a float64
reference written from the definition (tests/conv_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from conv_reference import conv2d_reference

import unigraph as ug
from unigraph.api import nn_ops
from unigraph.config import Target
from unigraph.errors import ShapeError

RNG = np.random.default_rng(19)
X = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
RTOL, ATOL = 1e-5, 1e-5

# The same geometry (stride (2, 1), padding 1) written in every form the op takes.
FORMS = [
    {"stride": (2, 1), "padding": 1},
    {"stride": [2, 1], "padding": (1, 1)},  # a list: unhashable, normalised every call
    {"stride": (np.int64(2), 1), "padding": np.int64(1), "dilation": np.int32(1)},
    {"stride": (2, 1), "padding": [1, 1], "dilation": (1, 1), "groups": np.int64(1)},
    {"stride": (2.0, 1.0), "padding": np.array([1, 1]), "groups": 1.0},  # integral values
]


def _forms(x, w, b):
    # Each form twice: the second call of a form reads the cached attrs.
    return [ug.conv2d(x, w, b, **form) for form in FORMS for _ in range(2)]


@pytest.mark.parametrize("target", TARGETS)
def test_every_argument_form_gives_the_reference(target):
    fn = ug.function(_forms) if Target.parse(target).mode != "eager" else _forms
    outs = run_on(target, fn, ug.tensor(X), ug.tensor(W), ug.tensor(B))
    expected = conv2d_reference(X, W, B, (2, 1), 1)
    assert len(outs) == 2 * len(FORMS)
    for out in outs:
        assert out.dtype == np.float32 and out.shape == expected.shape
        np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


def _layer_twice(layer, x):
    return layer(x), layer(x)


@pytest.mark.parametrize("target", TARGETS)
def test_a_layer_normalises_its_arguments_once(target, monkeypatch):
    """Conv2D calls ug.conv2d with the same stride/padding/dilation/groups every step: only
    the first call normalises them, and tensors of one float dtype skip promotion."""
    pairs, promotions = [], []
    real_pair, real_promote = nn_ops._pair, nn_ops._promote
    monkeypatch.setattr(nn_ops, "_conv_attrs_cache", {})
    monkeypatch.setattr(nn_ops, "_pair", lambda *a: pairs.append(a) or real_pair(*a))
    monkeypatch.setattr(nn_ops, "_promote",
                        lambda *a, **k: promotions.append(a) or real_promote(*a, **k))
    layer = ug.nn.Conv2D(3, 4, 3, stride=(2, 1), padding=1, act="relu")
    layer.load_state_dict({"weight": W, "bias": B})
    fn = ug.function(_layer_twice) if Target.parse(target).mode != "eager" else _layer_twice
    first, second = run_on(target, fn, layer, ug.tensor(X))
    expected = np.maximum(conv2d_reference(X, W, B, (2, 1), 1), 0)
    np.testing.assert_allclose(first, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(first, second)
    assert len(pairs) == 3  # stride, padding, dilation: once, for the first call
    assert promotions == []
    # A NumPy input is not a tensor of the layer's dtype: it goes through promotion.
    run_on(target, lambda: layer(X))
    assert len(promotions) == 1 and len(pairs) == 3


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_operands_are_still_promoted(target):
    w64 = W.astype(np.float64)

    def mixed(x, w, b):
        return ug.conv2d(x, w, b, stride=(2, 1), padding=1)

    fn = ug.function(mixed) if Target.parse(target).mode != "eager" else mixed
    # float32 x with a float64 weight: float64; an int image: float64 (to_float)
    wide = run_on(target, fn, ug.tensor(X), ug.tensor(w64), ug.tensor(B))
    assert wide.dtype == np.float64
    np.testing.assert_allclose(wide, conv2d_reference(X, w64, B, (2, 1), 1), rtol=1e-12)
    ints = (X * 4).astype(np.int32)
    out = run_on(target, fn, ug.tensor(ints), ug.tensor(w64), ug.tensor(B.astype(np.float64)))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, conv2d_reference(ints, w64, B, (2, 1), 1), rtol=1e-12)


def _grads(x, w, b, c):
    def loss(x, w, b):
        return ug.sum(ug.conv2d(x, w, b, stride=(2, 1), padding=1) * c)

    return ug.grad(loss, argnums=(0, 1, 2))(x, w, b)


def _reference_grads(x, w, c, stride, pad):
    """Gradients of sum(c * conv2d(x, w, b)) from the definition, in float64: each output
    (n, o, i, j) adds c[n, o, i, j] * window to dw and c * w to the window's dx."""
    x, w, c = (a.astype(np.float64) for a in (x, w, c))
    (sh, sw), (ph, pw) = stride, pad
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    dx, dw = np.zeros_like(padded), np.zeros_like(w)
    kh, kw = w.shape[2:]
    for i in range(c.shape[2]):
        for j in range(c.shape[3]):
            rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
            dw += np.einsum("no,nchw->ochw", c[:, :, i, j], padded[:, :, rows, cols])
            dx[:, :, rows, cols] += np.einsum("no,ochw->nchw", c[:, :, i, j], w)
    return dx[:, :, ph: ph + x.shape[2], pw: pw + x.shape[3]], dw, c.sum(axis=(0, 2, 3))


@pytest.mark.parametrize("target", TARGETS)
def test_gradients_through_the_cached_attrs(target):
    """Two gradient runs of one form (the second reads the cached attrs, which the NumPy
    engine's tape and the static graphs keep): both equal the reference."""
    c = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)
    fn = ug.function(_grads) if Target.parse(target).mode != "eager" else _grads
    args = (ug.tensor(X), ug.tensor(W), ug.tensor(B), ug.tensor(c))
    expected = _reference_grads(X, W, c, (2, 1), (1, 1))
    for _ in range(2):
        for got, want in zip(run_on(target, fn, *args), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _bad_call(x, w, items):
    return ug.conv2d(x, w, **dict(items))  # the line the error names


BAD_LINE = f"test_conv_arguments.py:{_bad_call.__code__.co_firstlineno + 1}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kwargs, shown", [
    ({"stride": 1.0}, "stride is 1.0"),
    ({"stride": (1, 2, 3)}, "stride is (1, 2, 3)"),
    ({"padding": "same"}, "padding is 'same'"),
    ({"dilation": (1, None)}, "dilation is (1, None)"),
    ({"groups": "two"}, "groups is 'two'"),
    ({"padding": (1, 1.5)}, "padding is (1, 1.5)"),  # was truncated to (1, 1)
    ({"groups": 1.5}, "groups is 1.5"),
], ids=["float-stride", "three-strides", "padding-string", "none-dilation", "groups-string",
        "fractional-padding", "fractional-groups"])
def test_malformed_arguments_name_the_users_line(target, kwargs, shown):
    fn = ug.function(_bad_call, static_argnums=2) if Target.parse(target).mode != "eager" \
        else _bad_call
    for _ in range(2):  # a refused form is never cached: the second call refuses too
        with pytest.raises(ShapeError) as error:
            run_on(target, fn, ug.tensor(X), ug.tensor(W), tuple(kwargs.items()))
        message = str(error.value)
        assert message.startswith(f"conv2d: {shown}; pass an int")
        assert BAD_LINE in message
