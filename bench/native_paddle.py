"""The workloads hand-written in PaddlePaddle (`create_parameter` weights, `x @ w + b`; the
second column of bench/run.py where `idiomatic_paddle` uses `paddle.nn` layers instead):

* `eager`: dygraph tensors, Python control flow, `backward()`
  and `paddle.optimizer.SGD` (update `p <- p - lr * grad`, unigraph's SGD formula);
* `static`: a `paddle.static.Program` built by hand under
  `program_guard`: `paddle.static.data` inputs, parameters initialised from the shared
  NumPy values, `paddle.static.nn.while_loop` / `cond`, `SGD.minimize`, run by a
  long-lived `Executor`, one `exe.run` per call.

Static mode is process-wide in Paddle. Each Program is built between
`paddle.enable_static()` and `paddle.disable_static()`, so dygraph is back on afterwards;
a run needs static mode, which it gets from Paddle's own `_dygraph_guard(None)` (it swaps
the dygraph tracer out for the call, ~1 us). A program that lives in static mode throughout
would not even pay that.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
from paddle.base.framework import _dygraph_guard

_MODELS = {"softmax_step": (("w", "b"), 0.5),
           "mlp_step": (("w1", "b1", "w2", "b2"), 0.1)}


def _logits(x, params):
    if len(params) == 2:
        w, b = params
        return x @ w + b
    w1, b1, w2, b2 = params
    return F.relu(x @ w1 + b1) @ w2 + b2


def _conv_relu(x, w, b):
    return F.relu(F.conv2d(x, w, b, padding=1))


# -- dygraph ------------------------------------------------------------------------------
def _eager_counter(data):
    a0, b0 = paddle.to_tensor(data["a"]), paddle.to_tensor(data["b"])

    def run():
        a, b = a0, b0
        while a < b:
            a, b = a + 2, b + 1
        return a, b

    return run


def _eager_cond(data):
    x, y = paddle.to_tensor(data["x"]), paddle.to_tensor(data["y"])

    def run():
        return x + y if x > y else x - y

    return run


def _eager_conv2d(data):
    x, w, b = (paddle.to_tensor(data[n]) for n in ("x", "w", "b"))
    return lambda: _conv_relu(x, w, b)


def _parameter(value):
    return paddle.create_parameter(
        list(value.shape), str(value.dtype),
        default_initializer=paddle.nn.initializer.Assign(value))


def _eager_model(name, data):
    names, lr = _MODELS[name]
    x, y = paddle.to_tensor(data["x"]), paddle.to_tensor(data["y"])
    params = [_parameter(data[n]) for n in names]
    optimizer = paddle.optimizer.SGD(learning_rate=lr, parameters=params)

    def step():
        loss = F.cross_entropy(_logits(x, params), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return loss

    return step


# -- Program + Executor -------------------------------------------------------------------
def _program(build):
    """Build a Program with `build()` -> (fetch_list, feed dict); return a callable running
    one `exe.run` with a long-lived Executor and its own Scope."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    paddle.enable_static()
    try:
        with paddle.static.program_guard(main, startup):
            fetch, feed = build()
    finally:
        paddle.disable_static()
    place = paddle.CPUPlace()
    executor, scope = paddle.static.Executor(place), paddle.static.Scope()
    with _dygraph_guard(None):
        executor.run(startup, scope=scope)

    def run():
        with _dygraph_guard(None):
            return executor.run(main, feed=feed, fetch_list=fetch, scope=scope)

    return run


def _data(name, value):
    return paddle.static.data(name, list(value.shape), str(value.dtype))


def _static_counter(data):
    def build():
        a, b = _data("a", data["a"]), _data("b", data["b"])
        out = paddle.static.nn.while_loop(lambda a, b: a < b, lambda a, b: [a + 2, b + 1],
                                          [a, b])
        return out, {"a": data["a"], "b": data["b"]}

    return _program(build)


def _static_cond(data):
    def build():
        x, y = _data("x", data["x"]), _data("y", data["y"])
        out = paddle.static.nn.cond(x > y, lambda: x + y, lambda: x - y)
        return [out], {"x": data["x"], "y": data["y"]}

    return _program(build)


def _static_conv2d(data):
    def build():
        x = _data("x", data["x"])
        w, b = _parameter(data["w"]), _parameter(data["b"])
        return [_conv_relu(x, w, b)], {"x": data["x"]}

    return _program(build)


def _static_model(name, data):
    names, lr = _MODELS[name]

    def build():
        x, y = _data("x", data["x"]), _data("y", data["y"])
        params = [_parameter(data[n]) for n in names]
        loss = F.cross_entropy(_logits(x, params), y)
        feed = {"x": data["x"], "y": data["y"]}
        paddle.optimizer.SGD(learning_rate=lr).minimize(loss)
        return [loss], feed

    run = _program(build)
    return lambda: run()[0]


_EAGER = {
    "counter": _eager_counter,
    "cond": _eager_cond,
    "conv2d": _eager_conv2d,
    **{name: (lambda data, name=name: _eager_model(name, data)) for name in _MODELS},
}
_STATIC = {
    "counter": _static_counter,
    "cond": _static_cond,
    "conv2d": _static_conv2d,
    **{name: (lambda data, name=name: _static_model(name, data)) for name in _MODELS},
}
BUILDERS = {
    **{(name, "eager"): build for name, build in _EAGER.items()},
    **{(name, "static"): build for name, build in _STATIC.items()},
}
