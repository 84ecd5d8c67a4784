"""Pooling ops over NCHW images: max_pool2d and avg_pool2d, with PyTorch's options.

Every option reduces to one geometry (`pool_geometry`): explicit padding on each side of
each spatial dim, plus, with `ceil_mode`, extra cells after the bottom/right padding so that
a last partial window exists. A max pool reads padding (and the extra cells) as -inf. An avg
pool sums with zeros there and divides each window by the number of cells it COUNTS: the
input and, with `count_include_pad`, the declared padding, never the ceil-mode extra cells
(PyTorch's rule). Backends lower the same geometry: explicit pad, a VALID native pool, and
a divisor pooled from a mask of ones where the divisor is not kh * kw everywhere.

`padding` is a pair (ph, pw), both sides alike, or ((top, bottom), (left, right)).
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import (
    accumulator,
    distinct,
    fmt,
    grad_for,
    normal,
    require_float,
    require_rank,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register
from unigraph.ops.nn import _check_pairs, _scatter_windows, _windows


def pool_pads(padding) -> tuple:
    """((top, bottom), (left, right)) of a pool's `padding` attr."""
    if isinstance(padding[0], tuple | list):
        return tuple((int(a), int(b)) for a, b in padding)
    return tuple((int(p), int(p)) for p in padding)


def _extent(size, kernel, stride, pads, dilation, ceil_mode):
    """(output length, extra end cells) along one spatial dim of length `size`."""
    window = dilation * (kernel - 1) + 1
    span = size + pads[0] + pads[1] - window
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + pads[0]:
            out -= 1  # PyTorch's rule: the last window starts inside the input or its padding
    else:
        out = span // stride + 1
    return out, max(0, (out - 1) * stride + window - (size + pads[0] + pads[1]))


def pool_geometry(hw, kernel, stride, padding, dilation=(1, 1), ceil_mode=False) -> tuple:
    """((oh, ow), ((top, bottom), (left, right)), (extra_h, extra_w)) for an image of spatial
    size `hw`: the output size, the declared padding and the ceil-mode cells after it.

    >>> pool_geometry((5, 5), (2, 2), (2, 2), (0, 0), ceil_mode=True)
    ((3, 3), ((0, 0), (0, 0)), (1, 1))
    """
    pads = pool_pads(padding)
    sizes, extra = [], []
    for k in range(2):
        out, more = _extent(hw[k], kernel[k], stride[k], pads[k], dilation[k], ceil_mode)
        sizes.append(out)
        extra.append(more)
    return tuple(sizes), pads, tuple(extra)


def _pool_infer(op, options):
    def infer(x, *, kernel, stride, padding, **attrs):
        unknown = set(attrs) - set(options)
        if unknown:
            raise ShapeError(f"{op}: unknown option(s) {sorted(unknown)}; it takes "
                             f"kernel, stride, padding, {', '.join(options)}")
        require_rank(op, "x", x, 4, "NCHW")
        require_float(op, "x", x)
        dilation = attrs.get("dilation", (1, 1))
        _check_pairs(op, kernel=kernel, stride=stride, dilation=dilation)
        pads = pool_pads(padding)
        if any(min(p) < 0 or max(p) > k // 2 for p, k in zip(pads, kernel, strict=True)):
            # A window made only of padding has no maximum (and PyTorch and Paddle refuse it).
            raise ShapeError(
                f"{op}: padding {padding} is more than half the kernel {kernel} (or negative) "
                f"for x {fmt(x)} (use 0 <= padding <= kernel // 2 on every side)"
            )
        spatial = []
        for k in range(2):
            size = x.shape[2 + k]
            window = dilation[k] * (kernel[k] - 1) + 1
            if size is None:
                if attrs.get("ceil_mode"):
                    raise ShapeError(f"{op}: ceil_mode needs the image size, but x is "
                                     f"{fmt(x)} (give the spatial dims a fixed size)")
                spatial.append(None)
                continue
            if size + sum(pads[k]) < window:
                raise ShapeError(
                    f"{op}: the window ({window} along dim {2 + k}) is bigger than the padded "
                    f"input: x is {fmt(x)}, padded to {size + sum(pads[k])} (use a smaller "
                    "kernel or dilation, or more padding)"
                )
            spatial.append(_extent(size, kernel[k], stride[k], pads[k], dilation[k],
                                   attrs.get("ceil_mode", False))[0])
        return TensorSpec((x.shape[0], x.shape[1], *spatial), x.dtype)

    return infer


def _padded(x, pads, extra, value):
    (t, b), (left, r) = pads
    widths = ((0, 0), (0, 0), (t, b + extra[0]), (left, r + extra[1]))
    return np.pad(x, widths, constant_values=value)


def _crop(dxp, pads, shape):
    (t, _), (left, _) = pads
    return dxp[:, :, t: t + shape[2], left: left + shape[3]]


def _max_pool_reference(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    _, pads, extra = pool_geometry(x.shape[2:], kernel, stride, padding, dilation, ceil_mode)
    win = _windows(_padded(x, pads, extra, -np.inf), kernel, stride, dilation)
    return win.max(axis=(-2, -1)).astype(x.dtype, copy=False)


def _max_pool_vjp(g, inputs, out, *, kernel, stride, padding, dilation=(1, 1),
                  ceil_mode=False):
    (x,) = inputs
    _, pads, extra = pool_geometry(x.shape[2:], kernel, stride, padding, dilation, ceil_mode)
    xp = _padded(x, pads, extra, -np.inf)
    win = _windows(xp, kernel, stride, dilation)
    # The first maximum of each window, in row-major order inside the window, gets it all.
    first = win.reshape(win.shape[:4] + (kernel[0] * kernel[1],)).argmax(axis=-1)
    n, c, oy, ox = np.indices(g.shape, sparse=True)
    rows = oy * stride[0] + (first // kernel[1]) * dilation[0]
    cols = ox * stride[1] + (first % kernel[1]) * dilation[1]
    dxp = np.zeros_like(xp)
    np.add.at(dxp, (n, c, rows, cols), g)  # overlapping windows may pick one element twice
    return [grad_for(_crop(dxp, pads, x.shape), x)]


def _pool_ties():
    """Overlapping 2x2 windows over ties (a plateau of 1s, two 2s) and over NaNs after +inf:
    the gradient goes to the first maximum of each window, a NaN counting as the maximum."""
    return np.array([[[[1.0, 1.0, 0.0, 2.0],
                       [1.0, 1.0, 2.0, -1.0],
                       [np.inf, 0.5, np.nan, np.nan]]]])


def _pool_attrs(kernel, stride, padding=(0, 0), **options):
    return {"kernel": kernel, "stride": stride, "padding": padding, **options}


register(OpDef(
    name="max_pool2d",
    infer=_pool_infer("max_pool2d", ("dilation", "ceil_mode")),
    reference=_max_pool_reference,
    vjp=_max_pool_vjp,
    doc="Maximum over each kh x kw window of NCHW x, padded with -inf (padding <= kernel // "
        "2 on each side; a pair (ph, pw) or ((top, bottom), (left, right))). Options: "
        "dilation (window taps dilation apart) and ceil_mode (a last partial window, as "
        "PyTorch: one that starts inside the input or its padding). NaN propagates: a "
        "window holding a NaN gives NaN. The gradient of each window goes only to its FIRST "
        "maximal element in row-major order, not shared among ties, a NaN counting as the "
        "maximum (as argmax); overlapping windows add up.",
    example="ug.max_pool2d([[[[1.0, 5.0, 2.0, nan]]]], (1, 2))  # [[[[5.0, nan]]]]",
    samples=lambda rng: [
        Sample((distinct(rng, (1, 2, 4, 6)),), _pool_attrs((2, 2), (2, 2))),
        Sample((distinct(rng, (2, 1, 5, 6)),), _pool_attrs((3, 3), (2, 1), (1, 1))),
        Sample((distinct(rng, (1, 2, 7, 6)),), _pool_attrs(
            (3, 2), (2, 2), ((1, 0), (0, 1)), dilation=(2, 1), ceil_mode=True)),
        Sample((_pool_ties(),), _pool_attrs((2, 2), (1, 1)), at_kink=True),
    ],
))


def avg_divisor(hw, kernel, stride, pads, extra, count_include_pad) -> np.ndarray:
    """[OH, OW] float64 count of the cells each avg pool window of an image of spatial size
    `hw` averages over (see the module doc); `pads` and `extra` as `pool_geometry` gives."""
    (t, b), (left, r) = pads
    if count_include_pad:
        counted = np.ones((hw[0] + t + b, hw[1] + left + r))
        mask = np.pad(counted, ((0, extra[0]), (0, extra[1])))
    else:
        mask = np.pad(np.ones(tuple(hw)), ((t, b + extra[0]), (left, r + extra[1])))
    return _windows(mask[None, None], kernel, stride).sum(axis=(-2, -1))[0, 0]


def _avg_pool_reference(x, *, kernel, stride, padding, ceil_mode=False,
                        count_include_pad=True):
    _, pads, extra = pool_geometry(x.shape[2:], kernel, stride, padding, (1, 1), ceil_mode)
    win = _windows(_padded(x, pads, extra, 0), kernel, stride)
    divisor = avg_divisor(x.shape[2:], kernel, stride, pads, extra, count_include_pad)
    total = win.sum(axis=(-2, -1), dtype=accumulator(x.dtype))  # float16: in float32
    return (total / divisor).astype(x.dtype, copy=False)


def _avg_pool_vjp(g, inputs, out, *, kernel, stride, padding, ceil_mode=False,
                  count_include_pad=True):
    (x,) = inputs
    _, pads, extra = pool_geometry(x.shape[2:], kernel, stride, padding, (1, 1), ceil_mode)
    xp = _padded(x, pads, extra, 0)
    share = g / avg_divisor(x.shape[2:], kernel, stride, pads, extra, count_include_pad)
    spread = np.broadcast_to(share[..., None, None], g.shape + tuple(kernel))
    dxp = _scatter_windows(np.zeros_like(xp), spread, stride)
    return [grad_for(_crop(dxp, pads, x.shape), x)]


register(OpDef(
    name="avg_pool2d",
    infer=_pool_infer("avg_pool2d", ("ceil_mode", "count_include_pad")),
    reference=_avg_pool_reference,
    vjp=_avg_pool_vjp,
    doc="Mean over each kh x kw window of NCHW x, padded with zeros (a pair (ph, pw) or "
        "((top, bottom), (left, right)), each side <= kernel // 2). With count_include_pad "
        "(the default) the padding counts: a window divides by kh * kw, also at the border; "
        "without it, by the number of input cells it covers. ceil_mode adds a last partial "
        "window (as PyTorch), whose cells past the padding never count. (TensorFlow's SAME "
        "pooling and Paddle's exclusive=True divide as count_include_pad=False does.) float16 "
        "windows are summed in float32, the mean rounded once.",
    example="ug.avg_pool2d([[[[1.0, 2.0, 3.0, 5.0]]]], (1, 2))  # [[[[1.5, 4.0]]]]",
    samples=lambda rng: [
        Sample((normal(rng, (1, 2, 4, 6)),), _pool_attrs((2, 2), (2, 2))),
        Sample((normal(rng, (2, 1, 5, 6)),), _pool_attrs((3, 3), (2, 1), (1, 1))),
        Sample((normal(rng, (1, 2, 5, 7)),), _pool_attrs(
            (2, 3), (2, 2), ((1, 0), (1, 1)), ceil_mode=True, count_include_pad=False)),
        Sample((normal(rng, (1, 1, 6, 5)),), _pool_attrs(
            (3, 2), (2, 2), (1, 1), ceil_mode=True)),
    ],
))
