"""The workloads as a NumPy user writes them: the baseline of `numpy:eager` and `numpy:static`.

Hand-written NumPy with hand-derived gradients is both the idiomatic and the hand-tuned
version, so the step and convolution builders are `native_numpy`'s (no second column); the
build workload is here (copy the weights into a list of arrays and run the forward pass
once), and the MLP step with Momentum and with Adam (slots updated in place).
"""

from __future__ import annotations

import native_numpy
import numpy as np
from native_numpy import _mlp_loss_and_grads


def build(data):
    depth = sum(1 for key in data if key.startswith("w"))
    x = data["x"]

    def build_and_run():
        layers = [(data[f"w{i}"].copy(), data[f"b{i}"].copy()) for i in range(depth)]
        h = x
        for w, b in layers:
            h = np.maximum(h @ w + b, 0)
        return h

    return build_and_run


def _mlp_params(data):
    return [data[k].copy() for k in ("w1", "b1", "w2", "b2")]


def mlp_momentum(data):
    """v = 0.9 v + g; p -= 0.1 v, in place (ug.optim.Momentum's formula)."""
    x, y = data["x"], data["y"]
    params = _mlp_params(data)
    velocities = [np.zeros_like(p) for p in params]
    lr, mu = np.float32(0.1), np.float32(0.9)

    def run():
        loss, grads = _mlp_loss_and_grads(x, y, *params)
        for param, grad, velocity in zip(params, grads, velocities):
            velocity *= mu
            velocity += grad
            param -= lr * velocity
        return loss

    return run


def mlp_adam(data):
    """Adam as ug.optim.Adam documents it (eps added to sqrt(v_hat)), moments in place."""
    x, y = data["x"], data["y"]
    params = _mlp_params(data)
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    lr, b1, b2, eps = np.float32(1e-3), 0.9, 0.999, np.float32(1e-8)
    step = [0]

    def run():
        loss, grads = _mlp_loss_and_grads(x, y, *params)
        step[0] += 1
        c1, c2 = np.float32(1 - b1 ** step[0]), np.float32(1 - b2 ** step[0])
        for param, grad, (m, v) in zip(params, grads, moments):
            m *= np.float32(b1)
            m += np.float32(1 - b1) * grad
            v *= np.float32(b2)
            v += np.float32(1 - b2) * grad * grad
            param -= lr * (m / c1) / (np.sqrt(v / c2) + eps)
        return loss

    return run


_PLAIN = {
    "counter": native_numpy.counter,
    "cond": native_numpy.cond,
    "conv_n1": native_numpy.conv2d,
    "conv_n64": native_numpy.conv2d,
    "softmax_step": native_numpy.softmax_step,
    "softmax_saturated": native_numpy.softmax_step,
    "mlp_step": native_numpy.mlp_step,
    "mlp_momentum": mlp_momentum,
    "mlp_adam": mlp_adam,
    "build100": build,
}
# Plain NumPy has one style; it is the baseline of both numpy targets.
BUILDERS = {(name, mode): build for name, build in _PLAIN.items() for mode in ("eager", "static")}
