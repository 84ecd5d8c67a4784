"""A float64 2-D convolution written from its definition (not by unigraph), for the conv tests.

>>> out = conv2d_reference(x, w, b, stride=(2, 1), pad=1)  # x NCHW, w OIHW, b [O] or None
"""

from __future__ import annotations

import numpy as np


def _pair(value) -> tuple:
    return (value, value) if np.isscalar(value) else tuple(value)


def conv2d_reference(x, w, b, stride, pad):
    """float64 conv2d by its definition: each output is a window of the zero-padded image
    times the weight, summed over channels and taps, plus the bias (none where `b` is None).
    `stride` and `pad` are one number or a (height, width) pair."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    (sh, sw), (ph, pw) = _pair(stride), _pair(pad)
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = padded[:, :, i * sh: i * sh + kh, j * sw: j * sw + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", window, w)
    return out if b is None else out + b.astype(np.float64)[None, :, None, None]
