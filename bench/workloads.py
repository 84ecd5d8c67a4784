"""The benchmark workloads, each written once in unigraph, and the data they all share.

`make_data(name)` draws every input and initial weight from one seeded NumPy generator,
so unigraph (on any target) and every hand-written native version start from identical
numbers. `UNIGRAPH[name](data)` returns `(function, inputs)`: a `@ug.function` whose
parameters were created from `data`, and the NumPy arrays to call it with. The native
versions live in `native_<framework>.py`, one builder per workload and style.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import unigraph as ug

SEED = 0


@dataclass(frozen=True)
class Workload:
    name: str
    compute: bool  # a compute workload (static goal 1.10x) rather than control-flow overhead
    doc: str


WORKLOADS = {
    w.name: w
    for w in [
        Workload("counter", False, "a=0, b=10; while a < b: a += 2, b += 1 (ug.while_loop)"),
        Workload("cond", False, "x + y if x > y else x - y on float32 scalars (ug.cond)"),
        Workload("conv2d", True, "relu(conv2d([64,3,32,32], [16,3,3,3], bias [16], pad 1))"),
        Workload("softmax_step", True, "softmax regression 784->10, batch 100, SGD lr 0.5"),
        Workload("mlp_step", True, "MLP 784->256->10 relu, batch 128, SGD lr 0.1"),
        Workload("mlp_grad", True, "the same MLP: loss and gradients only, no update"),
    ]
}


# -- shared data --------------------------------------------------------------------------
def _normal(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _batch(rng, n):
    # Inputs of scale 0.1 keep SGD at lr 0.5 stable over the thousands of timed steps on the
    # same batch (pixel intensities in [0, 1) would make softmax regression diverge).
    return {"x": _normal(rng, (n, 784), 0.1), "y": rng.integers(0, 10, n).astype(np.int64)}


def _mlp(rng, n):
    return {
        **_batch(rng, n),
        "w1": _normal(rng, (784, 256), np.sqrt(2 / 784)),
        "b1": np.zeros(256, np.float32),
        "w2": _normal(rng, (256, 10), np.sqrt(2 / 256)),
        "b2": np.zeros(10, np.float32),
    }


def make_data(name: str, seed: int = SEED) -> dict:
    """Inputs and initial weights of workload `name`, as NumPy arrays (float32, int64)."""
    rng = np.random.default_rng(seed)
    if name == "counter":
        return {"a": np.asarray(0, np.int64), "b": np.asarray(10, np.int64)}
    if name == "cond":
        x, y = rng.standard_normal(2).astype(np.float32)
        return {"x": np.asarray(max(x, y)), "y": np.asarray(min(x, y))}  # the true branch
    if name == "conv2d":
        return {
            "x": _normal(rng, (64, 3, 32, 32), 1.0),
            "w": _normal(rng, (16, 3, 3, 3), np.sqrt(2 / 27)),
            "b": _normal(rng, (16,), 0.1),
        }
    if name == "softmax_step":
        return {**_batch(rng, 100), "w": _normal(rng, (784, 10), 0.01),
                "b": np.zeros(10, np.float32)}
    if name in ("mlp_step", "mlp_grad"):
        return _mlp(rng, 128)
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


# -- the workloads, in unigraph -----------------------------------------------------------
def counter(data):
    @ug.function
    def counter_loop(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

    return counter_loop, (data["a"], data["b"])


def cond(data):
    @ug.function
    def add_or_sub(x, y):
        return ug.cond(x > y, lambda: x + y, lambda: x - y)

    return add_or_sub, (data["x"], data["y"])


def conv2d(data):
    w = ug.Parameter(data["w"], name="w")
    b = ug.Parameter(data["b"], name="b")

    @ug.function
    def conv_relu(x):
        return ug.relu(ug.conv2d(x, w, b, padding=1))

    return conv_relu, (data["x"],)


def _sgd_step(loss_fn, params, lr):
    """One `@ug.function` training step: loss, gradients, and `p <- p - lr * grad`."""
    loss_and_grads = ug.value_and_grad(loss_fn, wrt=params)

    @ug.function
    def train_step(x, y):
        loss, grads = loss_and_grads(x, y)
        for param, grad in zip(params, grads):
            ug.assign(param, param - lr * grad)
        return loss

    return train_step


def softmax_step(data):
    w = ug.Parameter(data["w"], name="w")
    b = ug.Parameter(data["b"], name="b")

    def loss_fn(x, y):
        return ug.mean(ug.sparse_softmax_cross_entropy(x @ w + b, y))

    return _sgd_step(loss_fn, [w, b], 0.5), (data["x"], data["y"])


def _mlp_loss(data):
    params = [ug.Parameter(data[k], name=k) for k in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = params

    def loss_fn(x, y):
        hidden = ug.relu(x @ w1 + b1)
        return ug.mean(ug.sparse_softmax_cross_entropy(hidden @ w2 + b2, y))

    return loss_fn, params


def mlp_step(data):
    loss_fn, params = _mlp_loss(data)
    return _sgd_step(loss_fn, params, 0.1), (data["x"], data["y"])


def mlp_grad(data):
    loss_fn, params = _mlp_loss(data)
    loss_and_grads = ug.value_and_grad(loss_fn, wrt=params)

    @ug.function
    def forward_backward(x, y):
        loss, grads = loss_and_grads(x, y)
        return loss, grads

    return forward_backward, (data["x"], data["y"])


UNIGRAPH = {
    "counter": counter,
    "cond": cond,
    "conv2d": conv2d,
    "softmax_step": softmax_step,
    "mlp_step": mlp_step,
    "mlp_grad": mlp_grad,
}
