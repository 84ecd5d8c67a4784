"""The workloads as a PaddlePaddle user writes them:

* `eager` (paddle:eager): dygraph with `paddle.nn.Linear` / `nn.Conv2D` layers loaded with
  `set_state_dict`, `F.cross_entropy`, `loss.backward()`, `paddle.optimizer.SGD` (`Momentum`,
  `Adam` in `mlp_momentum`, `mlp_adam`; `step()`, `clear_grad()`), inference under
  `paddle.no_grad()`;
* `static` (paddle:static): a `paddle.static.Program` built under `program_guard` with the
  same `paddle.nn` layers, their weights given by `ParamAttr(initializer=Assign(...))`,
  `SGD(lr).minimize(loss)`, a long-lived `Executor`, one `exe.run` per call.

`paddle.nn.Linear` stores its weight `[in, out]`, as unigraph does. The counter, cond and
static conv are `native_paddle`'s hand-written code (it is already what a Paddle user
writes), so those rows have no second column. Static runs enter static mode per call
through Paddle's `_dygraph_guard(None)` (~1 us, see `native_paddle`), because this process
also runs dygraph.
"""

from __future__ import annotations

import native_paddle
import paddle
import paddle.nn.functional as F
from native_paddle import _data, _program
from paddle import nn

_HAND = native_paddle.BUILDERS


def _loaded(layer, state):
    layer.set_state_dict({key: paddle.to_tensor(value) for key, value in state.items()})
    return layer


def _assigned(value):
    return paddle.ParamAttr(initializer=nn.initializer.Assign(value))


def _depth(data):
    return sum(1 for key in data if key.startswith("w"))


# -- dygraph ------------------------------------------------------------------------------
def _eager_conv(data):
    out_channels, in_channels, kernel, _ = data["w"].shape
    layer = _loaded(nn.Conv2D(in_channels, out_channels, kernel, padding=1),
                    {"weight": data["w"], "bias": data["b"]})
    x = paddle.to_tensor(data["x"])

    def run():
        with paddle.no_grad():
            return F.relu(layer(x))

    return run


# The optimizer of each MLP workload, as ug.optim's formulas: Paddle's Momentum is
# v = mu v + g, p -= lr v; its Adam adds eps * sqrt(1 - beta2**t) to sqrt(v) with lr scaled
# by sqrt(1 - beta2**t) / (1 - beta1**t), which is eps added to sqrt(v_hat).
_OPTIMIZERS = {
    "mlp_step": (0.1, paddle.optimizer.SGD, {}),
    "mlp_momentum": (0.1, paddle.optimizer.Momentum, {"momentum": 0.9}),
    "mlp_adam": (1e-3, paddle.optimizer.Adam, {"epsilon": 1e-8}),
}


def _eager_train_step(model, data, lr, optimizer=paddle.optimizer.SGD, options=None):
    x, y = paddle.to_tensor(data["x"]), paddle.to_tensor(data["y"])
    optimizer = optimizer(learning_rate=lr, parameters=model.parameters(), **(options or {}))

    def run():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return loss

    return run


def _eager_softmax(data):
    model = _loaded(nn.Linear(*data["w"].shape), {"weight": data["w"], "bias": data["b"]})
    return _eager_train_step(model, data, 0.5)


def _eager_mlp(name):
    def build(data):
        model = nn.Sequential(nn.Linear(*data["w1"].shape), nn.ReLU(),
                              nn.Linear(*data["w2"].shape))
        _loaded(model, {"0.weight": data["w1"], "0.bias": data["b1"],
                        "2.weight": data["w2"], "2.bias": data["b2"]})
        return _eager_train_step(model, data, *_OPTIMIZERS[name])

    return build


def _eager_build(data):
    depth, width = _depth(data), data["w0"].shape[0]
    state = {}
    for i in range(depth):
        state[f"{2 * i}.weight"], state[f"{2 * i}.bias"] = data[f"w{i}"], data[f"b{i}"]
    x = paddle.to_tensor(data["x"])

    def build_and_run():
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        model = _loaded(nn.Sequential(*layers), state)
        with paddle.no_grad():
            return model(x)

    return build_and_run


# -- Program + Executor -------------------------------------------------------------------
def _linear(weight, bias):
    return nn.Linear(*weight.shape, weight_attr=_assigned(weight), bias_attr=_assigned(bias))


def _static_step(data, logits_of, lr, optimizer=paddle.optimizer.SGD, options=None):
    def build():
        x, y = _data("x", data["x"]), _data("y", data["y"])
        loss = F.cross_entropy(logits_of(x), y)
        optimizer(learning_rate=lr, **(options or {})).minimize(loss)
        return [loss], {"x": data["x"], "y": data["y"]}

    run = _program(build)
    return lambda: run()[0]


def _static_softmax(data):
    return _static_step(data, lambda x: _linear(data["w"], data["b"])(x), 0.5)


def _static_mlp(name):
    def build(data):
        def logits_of(x):
            hidden = F.relu(_linear(data["w1"], data["b1"])(x))
            return _linear(data["w2"], data["b2"])(hidden)

        return _static_step(data, logits_of, *_OPTIMIZERS[name])

    return build


def _static_build(data):
    depth = _depth(data)

    def build():
        h = _data("x", data["x"])
        for i in range(depth):
            h = F.relu(_linear(data[f"w{i}"], data[f"b{i}"])(h))
        return [h], {"x": data["x"]}

    return lambda: _program(build)()[0]


_EAGER = {
    "counter": _HAND[("counter", "eager")],
    "cond": _HAND[("cond", "eager")],
    "conv_n1": _eager_conv,
    "conv_n64": _eager_conv,
    "softmax_step": _eager_softmax,
    "softmax_saturated": _eager_softmax,
    **{name: _eager_mlp(name) for name in _OPTIMIZERS},
    "build100": _eager_build,
}
_STATIC = {
    "counter": _HAND[("counter", "static")],
    "cond": _HAND[("cond", "static")],
    "conv_n1": _HAND[("conv2d", "static")],
    "conv_n64": _HAND[("conv2d", "static")],
    "softmax_step": _static_softmax,
    "softmax_saturated": _static_softmax,
    **{name: _static_mlp(name) for name in _OPTIMIZERS},
    "build100": _static_build,
}
BUILDERS = {
    **{(name, "eager"): build for name, build in _EAGER.items()},
    **{(name, "static"): build for name, build in _STATIC.items()},
}
