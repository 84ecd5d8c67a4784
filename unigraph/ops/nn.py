"""Neural-network ops: activations, softmax, conv2d, conv_transpose2d, cross-entropy.

Images are NCHW. conv2d (and the pools, in `pooling.py`) are written with NumPy window views
(`sliding_window_view`): a [N, C, OH, OW, KH, KW] view of the padded input, one window per
output position, contracted with the kernel or reduced. conv_transpose2d is their adjoint:
each input position scatters into its window of the output (`_scatter_windows`).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from unigraph.errors import ShapeError
from unigraph.index_checks import check_indices
from unigraph.ops._util import (
    ACCUMULATING_TOLERANCE,
    check_axis,
    dims_conflict,
    fmt,
    grad_for,
    merge_dim,
    nonzero,
    normal,
    require_float,
    require_int,
    require_rank,
    require_same_dtype,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _float_unary(name, compute, grad, doc, samples, tolerance=None, example=""):
    """An op f(x, **attrs) of a float x; grad(g, x, out, **attrs) -> dx."""

    def infer(x, **attrs):
        require_float(name, "x", x)
        if "axis" in attrs:
            check_axis(name, x, attrs["axis"])
        return x

    def reference(x, **attrs):
        return np.asarray(compute(x, **attrs)).astype(x.dtype, copy=False)

    def vjp(g, inputs, out, **attrs):
        return [grad_for(grad(g, inputs[0], out, **attrs), inputs[0])]

    register(OpDef(name, infer, reference, vjp, doc, samples, tolerance=tolerance or {},
                   example=example))


def _activation_samples(make):
    return lambda rng: [Sample((make(rng, (3, 4)),)), Sample((make(rng, (2, 1, 5)) * 3,))]


def _relu_samples(rng):
    at_kink = np.array([[-1.0, 0.0, 2.0], [np.nan, -np.inf, 0.5]])
    return _activation_samples(nonzero)(rng) + [Sample((at_kink,), at_kink=True)]


def _sigmoid(x):
    # exp of -|x| only, so large |x| never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_float_unary(
    "relu", lambda x: np.maximum(x, 0),
    # g * mask, not np.where: ten times faster here; a NaN cotangent at x <= 0 stays NaN.
    lambda g, x, out: g * (x > 0),
    "max(x, 0) for floats; NaN stays NaN; relu(-0.0) is a zero of either sign. Gradient 1 "
    "where x > 0, else 0: 0 at x == 0 and at NaN.",
    _relu_samples,
    example="ug.relu([-1.0, 0.0, 2.0, nan])  # [0.0, 0.0, 2.0, nan]",
)
_float_unary(
    "sigmoid", _sigmoid, lambda g, x, out: g * out * (1 - out),
    "1 / (1 + exp(-x)), computed without overflow for large |x|. Gradient s * (1 - s).",
    _activation_samples(normal),
    example="ug.sigmoid([0.0, 1000.0])  # [0.5, 1.0]",
)
_float_unary(
    "tanh", np.tanh, lambda g, x, out: g * (1 - out * out),
    "Hyperbolic tangent. Gradient 1 - tanh(x)**2.",
    _activation_samples(normal),
    example="ug.tanh([0.0, 100.0])  # [0.0, 1.0]",
)


def _shifted(x, axis):
    """x - max(x): exp of it never overflows. A row holding +inf (or only -inf) becomes NaN
    here (inf - inf), and so does the whole row of the result: the documented answer."""
    if x.size == 0:  # np.max refuses an empty axis; an empty input has an empty result
        return x.copy()
    with np.errstate(invalid="ignore"):
        return x - np.max(x, axis=axis, keepdims=True)


def _in_float32(fn):
    """`fn` of a float16 x computed in float32 and rounded once: NumPy's float16 sum along a
    non-last axis rounds every partial sum (softmax of 5,000 rows down axis 0: 139 ulps)."""
    def wide(x, *, axis):
        if x.dtype == np.float16:
            return fn(x.astype(np.float32), axis=axis).astype(np.float16)
        return fn(x, axis=axis)

    return wide


@_in_float32
def _softmax(x, *, axis):
    e = np.exp(_shifted(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)


@_in_float32
def _log_softmax(x, *, axis):
    shifted = _shifted(x, axis)
    if x.size == 0:  # (the log of a sum over an empty axis is log(0): a warning, no values)
        return shifted
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _grad_in_float32(grad):
    """`grad(g, x, out)` of float16 cotangent and output computed in float32 and rounded
    once, as the forward is: its float16 sum along `axis` rounded every partial sum
    (log_softmax's gradient down axis 0 of 4,096 rows: 34 times the checker's float16
    budget; softmax's 1,498 ulps where the frameworks are within 2)."""
    def wide(g, x, out, *, axis):
        if out.dtype == np.float16:
            wide_g, wide_out = g.astype(np.float32), out.astype(np.float32)
            return grad(wide_g, x, wide_out, axis=axis).astype(np.float16)
        return grad(g, x, out, axis=axis)

    return wide


@_grad_in_float32
def _softmax_grad(g, x, out, *, axis):
    return out * (g - np.sum(g * out, axis=axis, keepdims=True))


@_grad_in_float32
def _log_softmax_grad(g, x, out, *, axis):
    return g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)


def _axis_samples(rng):
    # Large logits must not saturate (log_softmax([1000, 0]) is [0, -1000]); a row holding
    # +inf is NaN, its gradient too.
    extreme = np.array([[1000.0, 0.0, -5.0], [np.inf, 1.0, 0.0], [-np.inf, 0.0, 1.0]])
    return [
        Sample((normal(rng, (3, 4)),), {"axis": 1}),
        Sample((normal(rng, (2, 3, 4)) * 3,), {"axis": 0}),
        Sample((extreme,), {"axis": 1}, at_kink=True),
    ]


_float_unary(
    "softmax", _softmax, _softmax_grad,
    "exp(x) / sum(exp(x)) along `axis`, computed as exp(x - max) / sum(exp(x - max)), so "
    "large values do not overflow. A row holding +inf (or only -inf) is NaN throughout "
    "(inf - inf), and so is its gradient; -inf elements of a finite row give 0. float16 "
    "runs in float32, rounded once.",
    _axis_samples, tolerance=ACCUMULATING_TOLERANCE,
    example="ug.softmax([[1000.0, 1000.0], [inf, 0.0]])  # [[0.5, 0.5], [nan, nan]]",
)
_float_unary(
    "log_softmax", _log_softmax, _log_softmax_grad,
    "x - log(sum(exp(x))) along `axis`, computed as (x - max) - log(sum(exp(x - max))): "
    "no saturation, log_softmax([1000, 0]) = [0, -1000]. A row holding +inf (or only -inf) "
    "is NaN throughout, and so is its gradient. float16 runs in float32, rounded once.",
    _axis_samples, tolerance=ACCUMULATING_TOLERANCE,
    example="ug.log_softmax([1000.0, 0.0])  # [0.0, -1000.0]",
)


# --- conv2d and pooling ---------------------------------------------------------------------


def _check_pairs(op, **pairs):
    """Each attr is a pair of ints: stride and dilation >= 1, padding and kernel as named."""
    lowest = {"stride": 1, "dilation": 1, "kernel": 1, "padding": 0}
    for name, pair in pairs.items():
        ok = len(pair) == 2 and all(isinstance(v, (int, np.integer)) for v in pair)
        if not ok or min(pair) < lowest[name]:
            raise ShapeError(f"{op}: {name} is {pair!r}; pass two ints >= {lowest[name]}")


def _out_size(op, x, dim, window, stride, padding):
    """Output length along spatial `dim` (2 or 3) of x; None if that dim is unknown."""
    size = x.shape[dim]
    if size is None:
        return None
    if size + 2 * padding < window:
        raise ShapeError(
            f"{op}: the window ({window} along dim {dim}) is bigger than the padded input: "
            f"x is {fmt(x)}, padded to {size + 2 * padding} (use a smaller kernel or dilation, "
            "or more padding)"
        )
    return (size + 2 * padding - window) // stride + 1


def _pad(x, padding, value):
    ph, pw = padding
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _windows(xp, kernel, stride, dilation=(1, 1)):
    """[N, C, OH, OW, KH, KW] view of the padded input xp: one window per output position."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    spans = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    view = sliding_window_view(xp, spans, axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


def _scatter_windows(dxp, contributions, stride, dilation=(1, 1)):
    """Add contributions [N, C, OH, OW, KH, KW] back onto the padded input positions their
    windows read: the adjoint of `_windows`. One strided add per kernel offset."""
    _, _, oh, ow, kh, kw = contributions.shape
    (sh, sw), (dh, dw) = stride, dilation
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            dxp[:, :, rows, cols] += contributions[:, :, :, :, i, j]
    return dxp


def _crop(dxp, padding, shape):
    ph, pw = padding
    return dxp[:, :, ph: ph + shape[2], pw: pw + shape[3]]


def _conv2d_infer(x, w, bias=None, *, stride, padding, dilation, groups):
    require_rank("conv2d", "x", x, 4, "NCHW")
    require_rank("conv2d", "w", w, 4, "[O, C/groups, KH, KW]")
    require_float("conv2d", "x", x)
    named = {"x": x, "w": w} if bias is None else {"x": x, "w": w, "bias": bias}
    dtype = require_same_dtype("conv2d", named)
    if bias is not None:
        _check_bias(x, w, bias)
    _check_pairs("conv2d", stride=stride, padding=padding, dilation=dilation)
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ShapeError(f"conv2d: groups is {groups!r}; pass an int >= 1")
    in_channels = None if w.shape[1] is None else w.shape[1] * groups
    if dims_conflict(x.shape[1], in_channels):
        raise ShapeError(
            f"conv2d: x has {x.shape[1]} channels but w expects {in_channels} "
            f"(w.shape[1] * groups = {w.shape[1]} * {groups}): x is {fmt(x)}, w is {fmt(w)} "
            "(w must be [O, C/groups, KH, KW] for NCHW x)"
        )
    if w.shape[0] is not None and w.shape[0] % groups:
        raise ShapeError(
            f"conv2d: w is {fmt(w)}, but its {w.shape[0]} output channels do not split into "
            f"{groups} groups (O must be a multiple of groups)"
        )
    spatial = []
    for k in range(2):
        kernel = w.shape[2 + k]
        window = None if kernel is None else dilation[k] * (kernel - 1) + 1
        if window is None:
            spatial.append(None)
        else:
            spatial.append(_out_size("conv2d", x, 2 + k, window, stride[k], padding[k]))
    channels = w.shape[0] if bias is None else merge_dim(w.shape[0], bias.shape[0])
    return TensorSpec((x.shape[0], channels, *spatial), dtype)


def _check_bias(x, w, bias):
    """bias is [O]: one value per output channel (w.shape[0])."""
    if len(bias.shape) != 1 or dims_conflict(bias.shape[0], w.shape[0]):
        channels = "O" if w.shape[0] is None else w.shape[0]
        raise ShapeError(
            f"conv2d: bias is {fmt(bias)}, but w is {fmt(w)}, so bias must be [{channels}]: "
            f"one value per output channel (x is {fmt(x)}; pass a 1-D bias of length "
            f"{channels}, or add a bias of another shape after the conv)"
        )


def _grouped(x, w, groups):
    """x windows [N, C, ...] -> [N, G, C/G, ...]; w [O, ...] -> [G, O/G, ...]."""
    return (
        x.reshape((x.shape[0], groups, x.shape[1] // groups) + x.shape[2:]),
        w.reshape((groups, w.shape[0] // groups) + w.shape[1:]),
    )


def _conv2d_reference(x, w, bias=None, *, stride, padding, dilation, groups):
    win = _windows(_pad(x, padding, 0), w.shape[2:], stride, dilation)
    if groups == 1:  # one GEMM over [N, OH, OW] x [C, KH, KW]: BLAS, much faster than einsum
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # [N, OH, OW, O]
        if bias is not None:
            out += bias  # in place while the channels are last: one contiguous pass
        return out.transpose(0, 3, 1, 2).astype(x.dtype, copy=False)
    win_g, w_g = _grouped(win, w, groups)
    out = np.einsum("ngcyxij,gocij->ngoyx", win_g, w_g, optimize=True)
    n, _, _, oh, ow = out.shape
    out = out.reshape(n, w.shape[0], oh, ow)
    if bias is not None:
        out = out + bias[:, None, None]
    return out.astype(x.dtype, copy=False)


def _conv2d_vjp(g, inputs, out, *, stride, padding, dilation, groups, needs=None):
    x, w = inputs[:2]
    needs = needs or (True,) * len(inputs)
    xp = _pad(x, padding, 0)
    win_g, w_g = _grouped(_windows(xp, w.shape[2:], stride, dilation), w, groups)
    n, o, oh, ow = g.shape
    g_g = g.reshape(n, groups, o // groups, oh, ow)
    dx = dw = None
    if needs[1]:
        dw = np.einsum("ngcyxij,ngoyx->gocij", win_g, g_g, optimize=True).reshape(w.shape)
        dw = grad_for(dw, w)
    if needs[0]:
        dwin = np.einsum("ngoyx,gocij->ngcyxij", g_g, w_g, optimize=True)
        dwin = dwin.reshape((n, x.shape[1]) + dwin.shape[3:])
        dxp = _scatter_windows(np.zeros_like(xp), dwin, stride, dilation)
        dx = grad_for(_crop(dxp, padding, x.shape), x)
    if len(inputs) == 2:
        return [dx, dw]
    bias = inputs[2]
    return [dx, dw, grad_for(g.sum(axis=(0, 2, 3)), bias) if needs[2] else None]


def _conv2d_attrs(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


register(OpDef(
    name="conv2d",
    infer=_conv2d_infer,
    reference=_conv2d_reference,
    vjp=_conv2d_vjp,
    partial_vjp=True,
    doc="2-D cross-correlation (no kernel flip, as in every framework) of NCHW x with "
        "w [O, C/groups, KH, KW]: out[n, o, y, x] = sum over c, i, j of "
        "xpad[n, g*C/G + c, y*sh + i*dh, x*sw + j*dw] * w[o, c, i, j], where g is o's group. "
        "Symmetric zero padding. Optional third input bias [O] (ONNX Conv): "
        "out[n, o, y, x] += bias[o], so a backend can use its fused conv + bias kernel; "
        "its gradient is g summed over N, H and W.",
    example="ug.conv2d([[[[1.0, 2.0, 3.0]]]], [[[[1.0, -1.0]]]])  # [[[[-1.0, -1.0]]]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3, 5, 5)), normal(rng, (4, 3, 3, 3))), _conv2d_attrs()),
        Sample(
            (normal(rng, (1, 4, 6, 5)), normal(rng, (6, 2, 3, 2))),
            _conv2d_attrs(stride=(2, 1), padding=(1, 2), groups=2),
        ),
        Sample(
            (normal(rng, (1, 2, 7, 7)), normal(rng, (2, 1, 3, 3))),
            _conv2d_attrs(stride=(1, 2), padding=(2, 1), dilation=(2, 2), groups=2),
        ),
        # With bias, on the plain route: the one TF fuses into _FusedConv2D (BiasAdd on
        # NHWC), as do torch and Paddle in their kernels.
        Sample(
            (normal(rng, (2, 3, 5, 5)), normal(rng, (4, 3, 3, 3)), normal(rng, (4,))),
            _conv2d_attrs(stride=(1, 2), padding=(1, 1)),
        ),
    ],
    tolerance=ACCUMULATING_TOLERANCE,  # each output sums C/groups * KH * KW products
))


# --- conv_transpose2d -----------------------------------------------------------------------


def _conv_transpose2d_infer(x, w, bias=None, *, stride, padding, output_padding, dilation,
                            groups):
    op = "conv_transpose2d"
    require_rank(op, "x", x, 4, "NCHW")
    require_rank(op, "w", w, 4, "[C, O/groups, KH, KW]")
    require_float(op, "x", x)
    named = {"x": x, "w": w} if bias is None else {"x": x, "w": w, "bias": bias}
    dtype = require_same_dtype(op, named)
    _check_pairs(op, stride=stride, padding=padding, dilation=dilation)
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ShapeError(f"{op}: groups is {groups!r}; pass an int >= 1")
    if dims_conflict(x.shape[1], w.shape[0]):
        raise ShapeError(
            f"{op}: x has {x.shape[1]} channels but w expects {w.shape[0]}: x is {fmt(x)}, "
            f"w is {fmt(w)} (w must be [C, O/groups, KH, KW] for NCHW x: the transpose of "
            "the conv2d weight it undoes)"
        )
    if w.shape[0] is not None and w.shape[0] % groups:
        raise ShapeError(f"{op}: w is {fmt(w)}, but its {w.shape[0]} input channels do not "
                         f"split into {groups} groups (C must be a multiple of groups)")
    for k in range(2):
        extra = output_padding[k]
        if not isinstance(extra, (int, np.integer)) or not 0 <= extra < max(stride[k],
                                                                             dilation[k]):
            raise ShapeError(
                f"{op}: output_padding {tuple(output_padding)} must be ints >= 0 and smaller "
                f"than the stride {tuple(stride)} or the dilation {tuple(dilation)} (PyTorch's "
                "limit: more would add rows no input reaches)"
            )
    spatial = []
    for k in range(2):
        size, kernel = x.shape[2 + k], w.shape[2 + k]
        if size is None or kernel is None:
            spatial.append(None)
            continue
        out = ((size - 1) * stride[k] - 2 * padding[k] + dilation[k] * (kernel - 1)
               + output_padding[k] + 1)
        if out < 1:
            raise ShapeError(f"{op}: padding {tuple(padding)} crops away the whole output "
                             f"for x {fmt(x)} and w {fmt(w)} (use less padding)")
        spatial.append(out)
    out_channels = None if w.shape[1] is None else w.shape[1] * groups
    if bias is not None:
        if len(bias.shape) != 1 or dims_conflict(bias.shape[0], out_channels):
            raise ShapeError(f"{op}: bias is {fmt(bias)}, but w is {fmt(w)} with {groups} "
                             f"group(s), so bias must be [{out_channels}]")
        out_channels = merge_dim(out_channels, bias.shape[0])
    return TensorSpec((x.shape[0], out_channels, *spatial), dtype)


def _full_size(x, w, stride, dilation, output_padding):
    """The uncropped output size: every position some input reaches, plus output_padding."""
    return tuple((x.shape[2 + k] - 1) * stride[k] + dilation[k] * (w.shape[2 + k] - 1) + 1
                 + output_padding[k] for k in range(2))


def _conv_transpose2d_reference(x, w, bias=None, *, stride, padding, output_padding,
                                dilation, groups):
    n, channels, h, wd = x.shape
    x_g = x.reshape(n, groups, channels // groups, h, wd)
    w_g = w.reshape((groups, channels // groups) + w.shape[1:])
    # Each input position spreads x * w over its kernel window of the output (the adjoint
    # of conv2d's window read): contributions [N, O, H, W, KH, KW].
    parts = np.einsum("ngcyx,gcoij->ngoyxij", x_g, w_g, optimize=True)
    parts = parts.reshape((n, groups * w.shape[1]) + parts.shape[3:])
    full = np.zeros((n, parts.shape[1]) + _full_size(x, w, stride, dilation, output_padding),
                    dtype=np.result_type(x, w))
    full = _scatter_windows(full, parts, stride, dilation)
    (ph, pw) = padding
    out = full[:, :, ph: full.shape[2] - ph, pw: full.shape[3] - pw]
    if bias is not None:
        out = out + bias[:, None, None]
    return out.astype(x.dtype, copy=False)


def _conv_transpose2d_vjp(g, inputs, out, *, stride, padding, output_padding, dilation,
                          groups, needs=None):
    x, w = inputs[:2]
    needs = needs or (True,) * len(inputs)
    n, channels, h, wd = x.shape
    # The output's gradient, uncropped, read through the same windows: a conv2d of it.
    win = _windows(_pad(g, padding, 0), w.shape[2:], stride, dilation)[:, :, :h, :wd]
    win_g = win.reshape((n, groups, win.shape[1] // groups) + win.shape[2:])
    w_g = w.reshape((groups, channels // groups) + w.shape[1:])
    grads = [None] * len(inputs)
    if needs[0]:
        dx = np.einsum("ngoyxij,gcoij->ngcyx", win_g, w_g, optimize=True)
        grads[0] = grad_for(dx.reshape(x.shape), x)
    if needs[1]:
        x_g = x.reshape(n, groups, channels // groups, h, wd)
        dw = np.einsum("ngcyx,ngoyxij->gcoij", x_g, win_g, optimize=True)
        grads[1] = grad_for(dw.reshape(w.shape), w)
    if len(inputs) == 3 and needs[2]:
        grads[2] = grad_for(g.sum(axis=(0, 2, 3)), inputs[2])
    return grads


def _conv_transpose2d_attrs(stride=(1, 1), padding=(0, 0), output_padding=(0, 0),
                            dilation=(1, 1), groups=1):
    return {"stride": stride, "padding": padding, "output_padding": output_padding,
            "dilation": dilation, "groups": groups}


register(OpDef(
    name="conv_transpose2d",
    infer=_conv_transpose2d_infer,
    reference=_conv_transpose2d_reference,
    vjp=_conv_transpose2d_vjp,
    partial_vjp=True,
    doc="Transposed 2-D convolution (the gradient of conv2d with respect to its input; "
        "'deconvolution') of NCHW x by w [C, O/groups, KH, KW]: each input position "
        "x[n, c, y, x] adds x * w[c, o, i, j] at output (y*sh + i*dh - ph, x*sw + j*dw - pw). "
        "Output size (H - 1) * sh - 2 * ph + dh * (KH - 1) + output_padding + 1: padding "
        "crops both sides, output_padding (< stride or dilation) adds rows at the end. "
        "Optional bias [O], as conv2d's. PyTorch's ConvTranspose2d.",
    example="ug.conv_transpose2d([[[[1.0, 2.0]]]], [[[[1.0, -1.0]]]])  # [[[[1.0, 1.0, -2.0]]]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3, 4, 4)), normal(rng, (3, 2, 3, 3))),
               _conv_transpose2d_attrs(stride=(2, 2), padding=(1, 1))),
        Sample((normal(rng, (1, 4, 3, 5)), normal(rng, (4, 3, 2, 3)), normal(rng, (6,))),
               _conv_transpose2d_attrs(stride=(2, 3), padding=(0, 1), output_padding=(1, 2),
                                       groups=2)),
        Sample((normal(rng, (1, 2, 4, 3)), normal(rng, (2, 2, 3, 2))),
               _conv_transpose2d_attrs(stride=(1, 2), padding=(2, 0), dilation=(2, 2),
                                       output_padding=(1, 1))),
    ],
    tolerance=ACCUMULATING_TOLERANCE,
))


def _cross_entropy_infer(logits, labels):
    op = "sparse_softmax_cross_entropy"
    require_rank(op, "logits", logits, 2, "[N, C]")
    require_rank(op, "labels", labels, 1, "[N]")
    require_float(op, "logits", logits)
    require_int(op, "labels", labels)
    if dims_conflict(logits.shape[0], labels.shape[0]):
        raise ShapeError(
            f"{op}: logits is {fmt(logits)} but labels is {fmt(labels)} (one label per row)"
        )
    return TensorSpec((merge_dim(logits.shape[0], labels.shape[0]),), logits.dtype)


def _cross_entropy_reference(logits, labels):
    check_indices("sparse_softmax_cross_entropy", labels, logits.shape[1])
    log_p = _log_softmax(logits, axis=1)
    return (-log_p[np.arange(len(labels)), labels]).astype(logits.dtype, copy=False)


def _cross_entropy_vjp(g, inputs, out):
    logits, labels = inputs
    d_logits = _softmax(logits, axis=1)
    d_logits[np.arange(len(labels)), labels] -= 1
    return [grad_for(d_logits * g[:, None], logits), None]


register(OpDef(
    name="sparse_softmax_cross_entropy",
    infer=_cross_entropy_infer,
    reference=_cross_entropy_reference,
    vjp=_cross_entropy_vjp,
    doc="Per-row loss -log_softmax(logits)[n, labels[n]], shape [N], no reduction (take "
        "the mean yourself). Labels must lie in [0, C): any other is an IndexOutOfRangeError "
        "on every target. Gradient softmax - one_hot(labels) "
        "for logits; labels have none.",
    example="ug.sparse_softmax_cross_entropy([[1000.0, 0.0]], [1])  # [1000.0]",
    samples=lambda rng: [
        Sample((normal(rng, (4, 3)), np.array([0, 2, 1, 2]))),
        Sample((normal(rng, (2, 5)) * 3, np.array([4, 0], dtype=np.int32))),
        # Large logits must not saturate: the loss of [1000, 0] with label 1 is 1000.
        Sample((np.array([[1000.0, 0.0], [0.0, -1000.0]]), np.array([1, 1]))),
    ],
    tolerance=ACCUMULATING_TOLERANCE,
    differentiable_inputs=(0,),
))
