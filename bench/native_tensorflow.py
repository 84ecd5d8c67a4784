"""The workloads hand-written in TensorFlow, in each style a TF user writes (the TF1 steps
use `tf.compat.v1.gradients` and assign ops where `idiomatic_tensorflow` uses
`GradientDescentOptimizer`; the rest is reused there as the idiomatic code):

* `eager` (baseline of tensorflow:eager): TF2 eager tensors, Python control flow,
  `tf.GradientTape`, `Variable.assign_sub`;
* `function` (tensorflow:function): the same code in a hand-written `tf.function`, with
  `tf.while_loop` / `tf.cond`, called with tensors (one trace, then reused);
* `static` (tensorflow:static): a `tf.compat.v1.Graph` built by hand inside
  `with graph.as_default()` (TF2 behaviour stays on): placeholders, variables,
  `tf.while_loop` / `tf.cond`, `tf.compat.v1.gradients` and assign ops, and one
  `Session.run` per call on a long-lived Session.

The convolution is written the TF way, NHWC (TF's CPU Conv2D has no NCHW kernel): the
input and weights are laid out NHWC/HWIO once, outside the timing, and the result is
compared after transposing back (`run.to_reference`). unigraph takes NCHW and transposes
inside its lowering, so the conv2d ratio includes what those transposes cost.
"""

from __future__ import annotations

import numpy as np
from harness import aligned

from unigraph.backend import import_framework

# tensorflow 2.21 imported before paddlepaddle 3.3.1 crashes the process: paddle goes first.
tf = import_framework("tensorflow", ("paddle",))


def _nhwc(data):
    x = aligned(data["x"].transpose(0, 2, 3, 1))
    w = aligned(data["w"].transpose(2, 3, 1, 0))  # [O, C, KH, KW] -> HWIO
    return x, w, data["b"]


def _to_nchw(result):
    return np.asarray(result).transpose(0, 3, 1, 2)


def _conv_relu(x, w, b):
    return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, strides=1, padding="SAME"), b))


def _xent(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))


def _mlp_logits(x, w1, b1, w2, b2):
    return tf.nn.relu(x @ w1 + b1) @ w2 + b2


def _softmax_logits(x, w, b):
    return x @ w + b


_MODELS = {"softmax_step": (_softmax_logits, ("w", "b"), 0.5),
           "mlp_step": (_mlp_logits, ("w1", "b1", "w2", "b2"), 0.1)}


# -- eager and tf.function ----------------------------------------------------------------
def _eager_counter(data, compiled):
    a0, b0 = tf.constant(data["a"]), tf.constant(data["b"])

    def loop(a, b):
        while a < b:
            a, b = a + 2, b + 1
        return a, b

    def loop_graph(a, b):
        return tf.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

    fn = tf.function(loop_graph) if compiled else loop
    return lambda: fn(a0, b0)


def _eager_cond(data, compiled):
    x, y = tf.constant(data["x"]), tf.constant(data["y"])

    def branch(x, y):
        return x + y if x > y else x - y

    def branch_graph(x, y):
        return tf.cond(x > y, lambda: x + y, lambda: x - y)

    fn = tf.function(branch_graph) if compiled else branch
    return lambda: fn(x, y)


def _eager_conv2d(data, compiled):
    x, w, b = (tf.constant(a) for a in _nhwc(data))
    fn = tf.function(_conv_relu) if compiled else _conv_relu

    def run():
        return fn(x, w, b)

    run.to_reference = _to_nchw
    return run


def _eager_model(name, data, compiled):
    logits_fn, names, lr = _MODELS[name]
    x, y = tf.constant(data["x"]), tf.constant(data["y"])
    params = [tf.Variable(data[n]) for n in names]

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = _xent(logits_fn(x, *params), y)
        grads = tape.gradient(loss, params)
        for param, grad in zip(params, grads):
            param.assign_sub(lr * grad)
        return loss

    fn = tf.function(step) if compiled else step
    return lambda: fn(x, y)


def _eager_style(compiled):
    def model(name):
        return lambda data: _eager_model(name, data, compiled)

    return {
        "counter": lambda data: _eager_counter(data, compiled),
        "cond": lambda data: _eager_cond(data, compiled),
        "conv2d": lambda data: _eager_conv2d(data, compiled),
        **{name: model(name) for name in _MODELS},
    }


# -- tf.compat.v1 Graph + Session ---------------------------------------------------------
def _session(build):
    """Build a graph with `build()` -> (fetches, feed_dict of placeholder -> value); return
    a callable running one Session.run on a long-lived Session."""
    graph = tf.Graph()
    with graph.as_default():
        fetches, feeds = build()
        init = tf.compat.v1.global_variables_initializer()
    session = tf.compat.v1.Session(graph=graph)
    session.run(init)

    def run():
        return session.run(fetches, feeds)

    run.session = session
    return run


def _placeholder(value):
    return tf.compat.v1.placeholder(tf.as_dtype(value.dtype), value.shape)


def _static_counter(data):
    def build():
        a, b = _placeholder(data["a"]), _placeholder(data["b"])
        out = tf.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
        return out, {a: data["a"], b: data["b"]}

    return _session(build)


def _static_cond(data):
    def build():
        x, y = _placeholder(data["x"]), _placeholder(data["y"])
        return tf.cond(x > y, lambda: x + y, lambda: x - y), {x: data["x"], y: data["y"]}

    return _session(build)


def _static_conv2d(data):
    x_value, w_value, b_value = _nhwc(data)

    def build():
        x = _placeholder(x_value)
        w, b = tf.compat.v1.Variable(w_value), tf.compat.v1.Variable(b_value)
        return _conv_relu(x, w, b), {x: x_value}

    run = _session(build)
    run.to_reference = _to_nchw
    return run


def _static_model(name, data):
    logits_fn, names, lr = _MODELS[name]

    def build():
        x, y = _placeholder(data["x"]), _placeholder(data["y"])
        params = [tf.compat.v1.Variable(data[n]) for n in names]
        loss = _xent(logits_fn(x, *params), y)
        grads = tf.compat.v1.gradients(loss, params)
        feeds = {x: data["x"], y: data["y"]}
        update = tf.group(*[p.assign_sub(lr * g) for p, g in zip(params, grads)])
        return (loss, update), feeds

    run = _session(build)
    return lambda: run()[0]


_STATIC = {
    "counter": _static_counter,
    "cond": _static_cond,
    "conv2d": _static_conv2d,
    **{name: (lambda data, name=name: _static_model(name, data)) for name in _MODELS},
}

BUILDERS = {
    **{(name, "eager"): build for name, build in _eager_style(compiled=False).items()},
    **{(name, "function"): build for name, build in _eager_style(compiled=True).items()},
    **{(name, "static"): build for name, build in _STATIC.items()},
}
