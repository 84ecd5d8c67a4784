"""The benchmark workloads, each written once in unigraph the way a unigraph user writes it,
and the data they all share.

`make_data(name, quick)` draws every input and initial weight from one seeded NumPy
generator, so unigraph (on any target) and every native version start from identical
numbers. `UNIGRAPH[name](data)` returns `(function, inputs)`: the unigraph workload (layers
from `ug.nn`, `ug.optim.SGD`, a `@ug.function` step) and the NumPy arrays to call it with.
The native versions live in `idiomatic_<framework>.py` (what a user of that framework writes)
and `native_<framework>.py` (hand-tuned, the second column).

Weights are stored in unigraph's layouts: Linear `[in, out]`, Conv2D `[out, in, kh, kw]`; a
native version lays them out its own way once, outside the timing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from harness import aligned

import unigraph as ug

F = ug.nn.functional
SEED = 0


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "control" (scalar control flow), "compute" (tensor work) or "build"
    doc: str


WORKLOADS = {
    w.name: w
    for w in [
        Workload("counter", "control", "a=0, b=10; while a < b: a += 2, b += 1 (int64)"),
        Workload("cond", "control", "x + y if x > y else x - y on float32 scalars"),
        Workload("conv_n1", "compute", "relu(Conv2D 3->16, 3x3, pad 1) on [1,3,32,32]"),
        Workload("conv_n64", "compute", "relu(Conv2D 3->16, 3x3, pad 1) on [64,3,32,32]"),
        Workload("softmax_step", "compute", "one SGD step (lr 0.5): Linear 784->10, batch 100"),
        Workload("softmax_saturated", "compute",
                 "the same step on [0,1) inputs from saturated weights: ~12% of the gradient "
                 "entries are subnormal (issue 19 item 2)"),
        Workload("mlp_step", "compute", "one SGD step (lr 0.1): 784->256 relu->10, batch 128"),
        Workload("mlp_momentum", "compute",
                 "the same MLP step with Momentum (lr 0.1, momentum 0.9)"),
        Workload("mlp_adam", "compute", "the same MLP step with Adam (lr 1e-3)"),
        Workload("mlp_adam_fused", "compute",
                 "mlp_adam with Adam(fused=True): the framework's own Adam kernels where "
                 "the backend lowers them (torch), against the same native code"),
        Workload("build100", "build", "build 100 Linear(64,64)+relu layers, load the weights, "
                                      "first forward of a [32,64] batch"),
    ]
}
BUILD_DEPTH, QUICK_BUILD_DEPTH = 100, 4
# one model and data, three optimizers (Adam twice)
MLPS = ("mlp_step", "mlp_momentum", "mlp_adam", "mlp_adam_fused")


# -- shared data --------------------------------------------------------------------------
def _normal(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _batch(rng, n, features):
    # Inputs of scale 0.1 keep SGD at lr 0.5 stable over the thousands of timed steps on the
    # same batch (pixel intensities in [0, 1) would make softmax regression diverge).
    return {"x": _normal(rng, (n, features), 0.1),
            "y": rng.integers(0, 10, n).astype(np.int64)}


def _conv(rng, n):
    return {
        "x": _normal(rng, (n, 3, 32, 32), 1.0),
        "w": _normal(rng, (16, 3, 3, 3), np.sqrt(2 / 27)),
        "b": _normal(rng, (16,), 0.1),
    }


def _deep(rng, depth, width=64):
    data = {"x": _normal(rng, (32, width), 1.0)}
    for i in range(depth):
        data[f"w{i}"] = _normal(rng, (width, width), np.sqrt(2 / width))
        data[f"b{i}"] = _normal(rng, (width,), 0.01)
    return data


def make_data(name: str, quick: bool = False, seed: int = SEED) -> dict:
    """Inputs and initial weights of workload `name`, as NumPy arrays (float32, int64), each
    64-byte aligned (`harness.aligned`). `quick` (the smoke test): small batches and layers,
    a few layers instead of 100."""
    return {key: aligned(value) for key, value in _make_data(name, quick, seed).items()}


def _make_data(name: str, quick: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    features, hidden = (64, 32) if quick else (784, 256)
    if name == "counter":
        return {"a": np.asarray(0, np.int64), "b": np.asarray(10, np.int64)}
    if name == "cond":
        x, y = rng.standard_normal(2).astype(np.float32)
        return {"x": np.asarray(max(x, y)), "y": np.asarray(min(x, y))}  # the true branch
    if name == "conv_n1":
        return _conv(rng, 1)
    if name == "conv_n64":
        return _conv(rng, 2 if quick else 64)
    if name == "softmax_step":
        return {**_batch(rng, 16 if quick else 100, features),
                "w": _normal(rng, (features, 10), 0.01), "b": np.zeros(10, np.float32)}
    if name == "softmax_saturated":
        # Pixel-like inputs and large weights: every sample is classified with wide logit
        # margins, so softmax - onehot holds entries of exp(-90)..exp(-103), below float32's
        # smallest normal (1.2e-38). The regime holds over thousands of steps.
        x = rng.random((16 if quick else 100, features), dtype=np.float32)
        w = _normal(rng, (features, 10), 2.5)
        return {"x": x, "y": np.argmax(x @ w, axis=1).astype(np.int64), "w": w,
                "b": np.zeros(10, np.float32)}
    if name in MLPS:
        return {
            **_batch(rng, 16 if quick else 128, features),
            "w1": _normal(rng, (features, hidden), np.sqrt(2 / features)),
            "b1": np.zeros(hidden, np.float32),
            "w2": _normal(rng, (hidden, 10), np.sqrt(2 / hidden)),
            "b2": np.zeros(10, np.float32),
        }
    if name == "build100":
        return _deep(rng, QUICK_BUILD_DEPTH if quick else BUILD_DEPTH)
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


def depth_of(data: dict) -> int:
    """The number of layers of the build workload's data."""
    return sum(1 for key in data if key.startswith("w"))


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


def conv(data):
    out_channels, in_channels, kernel, _ = data["w"].shape
    layer = ug.nn.Conv2D(in_channels, out_channels, kernel, padding=1, act="relu")
    layer.load_state_dict({"weight": data["w"], "bias": data["b"]})

    @ug.function
    def forward(x):
        return layer(x)

    return forward, (data["x"],)


def _train_step(model, lr, optimizer=ug.optim.SGD, **options):
    """A unigraph user's training step (SGD unless told): loss, gradients of the model's
    parameters, update."""
    optimizer = optimizer(model.parameters(), lr=lr, **options)

    @ug.function
    def train_step(x, y):
        loss, grads = ug.value_and_grad(lambda: F.cross_entropy(model(x), y),
                                        wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    return train_step


def softmax_step(data):
    model = ug.nn.Linear(*data["w"].shape)
    model.load_state_dict({"weight": data["w"], "bias": data["b"]})
    return _train_step(model, 0.5), (data["x"], data["y"])


def _mlp(data):
    model = ug.nn.Sequential(ug.nn.Linear(*data["w1"].shape, act="relu"),
                             ug.nn.Linear(*data["w2"].shape))
    model.load_state_dict({"0.weight": data["w1"], "0.bias": data["b1"],
                           "1.weight": data["w2"], "1.bias": data["b2"]})
    return model


def mlp_step(data):
    return _train_step(_mlp(data), 0.1), (data["x"], data["y"])


def mlp_momentum(data):
    step = _train_step(_mlp(data), 0.1, ug.optim.Momentum, momentum=0.9)
    return step, (data["x"], data["y"])


def mlp_adam(data):
    return _train_step(_mlp(data), 1e-3, ug.optim.Adam), (data["x"], data["y"])


def mlp_adam_fused(data):
    return _train_step(_mlp(data), 1e-3, ug.optim.Adam, fused=True), (data["x"], data["y"])


def build(data):
    """Each call builds the model anew, loads its weights and runs it once (on a static
    target the first call traces, compiles and loads the parameters)."""
    depth = depth_of(data)
    width = data["w0"].shape[0]
    state = {}
    for i in range(depth):
        state[f"{i}.weight"], state[f"{i}.bias"] = data[f"w{i}"], data[f"b{i}"]

    def build_and_run(x):
        model = ug.nn.Sequential(*[ug.nn.Linear(width, width, act="relu")
                                   for _ in range(depth)])
        model.load_state_dict(state)
        return ug.function(model)(x)

    return build_and_run, (data["x"],)


UNIGRAPH = {
    "counter": counter,
    "cond": cond,
    "conv_n1": conv,
    "conv_n64": conv,
    "softmax_step": softmax_step,
    "softmax_saturated": softmax_step,
    "mlp_step": mlp_step,
    "mlp_momentum": mlp_momentum,
    "mlp_adam": mlp_adam,
    "mlp_adam_fused": mlp_adam_fused,
    "build100": build,
}
