"""The workloads hand-written in plain NumPy: the baseline of `numpy:eager` and `numpy:static`
(hand-written NumPy is also what a NumPy user writes: `idiomatic_numpy` reuses these).

Written as a competent NumPy user would: vectorised, a sliding-window view and one einsum for
the convolution, the backward pass of the MLP derived by hand, in-place SGD updates.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def counter(data):
    a0, b0 = data["a"], data["b"]

    def run():
        a, b = a0, b0
        while a < b:
            a, b = a + 2, b + 1
        return a, b

    return run


def cond(data):
    x, y = data["x"], data["y"]

    def run():
        return x + y if x > y else x - y

    return run


def conv2d(data):
    x, w, b = data["x"], data["w"], data["b"]

    def run():
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = sliding_window_view(padded, (3, 3), axis=(2, 3))  # [N, C, H, W, 3, 3]
        out = np.einsum("nchwij,ocij->nohw", windows, w, optimize=True)
        return np.maximum(out + b[:, None, None], 0)

    return run


def _softmax_xent(logits, y):
    """Mean cross-entropy and its gradient with respect to the logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = np.mean(np.log(total[:, 0]) - shifted[rows, y])
    d_logits = exp / total
    d_logits[rows, y] -= 1
    return loss, d_logits / len(y)


def softmax_step(data):
    x, y = data["x"], data["y"]
    w, b = data["w"].copy(), data["b"].copy()

    def run():
        loss, d_logits = _softmax_xent(x @ w + b, y)
        w[...] -= np.float32(0.5) * (x.T @ d_logits)
        b[...] -= np.float32(0.5) * d_logits.sum(axis=0)
        return loss

    return run


def _mlp_loss_and_grads(x, y, w1, b1, w2, b2):
    pre = x @ w1 + b1
    hidden = np.maximum(pre, 0)
    loss, d_logits = _softmax_xent(hidden @ w2 + b2, y)
    d_hidden = (d_logits @ w2.T) * (pre > 0)
    grads = [x.T @ d_hidden, d_hidden.sum(axis=0), hidden.T @ d_logits, d_logits.sum(axis=0)]
    return loss, grads


def mlp_step(data):
    x, y = data["x"], data["y"]
    params = [data[k].copy() for k in ("w1", "b1", "w2", "b2")]

    def run():
        loss, grads = _mlp_loss_and_grads(x, y, *params)
        for param, grad in zip(params, grads):
            param -= np.float32(0.1) * grad
        return loss

    return run


_PLAIN = {
    "counter": counter,
    "cond": cond,
    "conv2d": conv2d,
    "softmax_step": softmax_step,
    "mlp_step": mlp_step,
}
# Plain NumPy has one style; it is the baseline of both numpy targets.
BUILDERS = {(name, mode): build for name, build in _PLAIN.items() for mode in ("eager", "static")}
