"""The workloads as a NumPy user writes them: the baseline of `numpy:eager` and `numpy:static`.

Hand-written NumPy with hand-derived gradients is both the idiomatic and the hand-tuned
version, so the step and convolution builders are `native_numpy`'s (no second column); the
build workload is here: copy the weights into a list of arrays and run the forward pass once.
"""

from __future__ import annotations

import native_numpy
import numpy as np


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


_PLAIN = {
    "counter": native_numpy.counter,
    "cond": native_numpy.cond,
    "conv_n1": native_numpy.conv2d,
    "conv_n64": native_numpy.conv2d,
    "softmax_step": native_numpy.softmax_step,
    "softmax_saturated": native_numpy.softmax_step,
    "mlp_step": native_numpy.mlp_step,
    "build100": build,
}
# Plain NumPy has one style; it is the baseline of both numpy targets.
BUILDERS = {(name, mode): build for name, build in _PLAIN.items() for mode in ("eager", "static")}
