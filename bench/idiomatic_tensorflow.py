"""The workloads as a TensorFlow user writes them, in each of TF's styles:

* `eager` (baseline of tensorflow:eager): TF2 eager tensors, Python control flow,
  `tf.Variable`s, `tf.GradientTape` and optimizer-free `Variable.assign_sub` updates
  (Momentum's and Adam's slots in `tf.Variable`s, their formulas written out);
* `function` (tensorflow:function): the same Keras-free TF2 code in a `tf.function`, with
  `tf.while_loop` / `tf.cond`;
* `static` (tensorflow:static): TF1 code in a `tf.compat.v1.Graph`: placeholders,
  `tf.compat.v1.get_variable` variables (what `tf.compat.v1.layers` makes) initialised from
  the weights, `tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss)`
  (`MomentumOptimizer`, `AdamOptimizer` in `mlp_momentum`, `mlp_adam`), one
  `Session.run` per call on a long-lived Session.

Convolutions are NHWC, TF's layout (its CPU Conv2D has no NCHW kernel): unigraph takes
NCHW, so the transposes its lowering adds show in the ratio. Where the idiomatic code is
the hand-written code of `native_tensorflow` (eager and tf.function throughout, the TF1
counter, cond and conv), that builder is reused, and the table has no second column.
"""

from __future__ import annotations

import native_tensorflow
from native_tensorflow import _placeholder, _session, _xent, tf

_HAND = native_tensorflow.BUILDERS


def _dense_variables(data, names):
    """TF1 variables the way `tf.compat.v1.layers.dense` names them, from the weights."""
    return [tf.compat.v1.get_variable(name, initializer=data[name]) for name in names]


def _static_step(data, names, logits_fn, lr, optimizer=None):
    optimizer = optimizer or tf.compat.v1.train.GradientDescentOptimizer

    def build():
        x, y = _placeholder(data["x"]), _placeholder(data["y"])
        params = _dense_variables(data, names)
        loss = _xent(logits_fn(x, *params), y)
        train = optimizer(lr).minimize(loss)
        return (loss, train), {x: data["x"], y: data["y"]}

    run = _session(build)
    return lambda: run()[0]


def _static_softmax(data):
    return _static_step(data, ("w", "b"), native_tensorflow._softmax_logits, 0.5)


def _static_mlp(data, lr=0.1, optimizer=None):
    return _static_step(data, ("w1", "b1", "w2", "b2"), native_tensorflow._mlp_logits, lr,
                        optimizer)


# TF1's MomentumOptimizer is ug.optim.Momentum's formula (accum = mu accum + g, p -= lr
# accum). Its AdamOptimizer adds eps to sqrt(v) before bias correction (eps-hat), where
# ug.optim.Adam adds it to sqrt(v_hat): they differ by O(eps) = 1e-8 relative; TF1 has no
# option for the other form.
def _static_mlp_momentum(data):
    return _static_mlp(data, 0.1, lambda lr: tf.compat.v1.train.MomentumOptimizer(lr, 0.9))


def _static_mlp_adam(data):
    return _static_mlp(data, 1e-3,
                       lambda lr: tf.compat.v1.train.AdamOptimizer(lr, epsilon=1e-8))


# -- TF2 without Keras: the optimizers written out, slots in tf.Variables ------------------
def _momentum_update(params, grads, slots, step):
    for param, grad, velocity in zip(params, grads, slots):
        velocity.assign(0.9 * velocity + grad)
        param.assign_sub(0.1 * velocity)


def _adam_update(params, grads, slots, step):
    t = tf.cast(step.assign_add(1), tf.float32)
    c1, c2 = 1.0 - 0.9**t, 1.0 - 0.999**t
    for param, grad, (m, v) in zip(params, grads, slots):
        m.assign(0.9 * m + 0.1 * grad)
        v.assign(0.999 * v + 0.001 * grad * grad)
        param.assign_sub(1e-3 * (m / c1) / (tf.sqrt(v / c2) + 1e-8))


def _eager_mlp(data, update, slots_per_param, compiled):
    """The MLP step with `update(params, grads, slots, step)` (ug.optim's formulas)."""
    x, y = tf.constant(data["x"]), tf.constant(data["y"])
    params = [tf.Variable(data[n]) for n in ("w1", "b1", "w2", "b2")]
    slots = [tuple(tf.Variable(tf.zeros_like(p)) for _ in range(slots_per_param))
             for p in params]
    slots = [s[0] if slots_per_param == 1 else s for s in slots]
    step = tf.Variable(0, dtype=tf.int64)

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = _xent(native_tensorflow._mlp_logits(x, *params), y)
        update(params, tape.gradient(loss, params), slots, step)
        return loss

    fn = tf.function(train_step) if compiled else train_step
    return lambda: fn(x, y)


def _eager_optimizers(mode):
    compiled = mode == "function"
    return {("mlp_momentum", mode): lambda data: _eager_mlp(data, _momentum_update, 1, compiled),
            ("mlp_adam", mode): lambda data: _eager_mlp(data, _adam_update, 2, compiled)}


def _depth(data):
    return sum(1 for key in data if key.startswith("w"))


def _forward(h, params):
    for w, b in params:
        h = tf.nn.relu(h @ w + b)
    return h


def _static_build(data):
    depth = _depth(data)

    def build_and_run():
        graph = tf.Graph()
        with graph.as_default():
            x = _placeholder(data["x"])
            params = []
            for i in range(depth):
                with tf.compat.v1.variable_scope(f"dense_{i}"):
                    params.append((tf.compat.v1.get_variable("kernel", initializer=data[f"w{i}"]),
                                   tf.compat.v1.get_variable("bias", initializer=data[f"b{i}"])))
            out = _forward(x, params)
            init = tf.compat.v1.global_variables_initializer()
        session = tf.compat.v1.Session(graph=graph)  # kept open, as a user's is
        session.run(init)
        return session.run(out, {x: data["x"]})

    return build_and_run


def _eager_build(data, compiled):
    depth, x = _depth(data), tf.constant(data["x"])

    def build_and_run():
        params = [(tf.Variable(data[f"w{i}"]), tf.Variable(data[f"b{i}"]))
                  for i in range(depth)]
        forward = tf.function(_forward) if compiled else _forward
        return forward(x, params)

    return build_and_run


def _reused(mode, names):
    """The hand-written builders that are also the idiomatic code of `mode`."""
    hand_name = {"conv_n1": "conv2d", "conv_n64": "conv2d", "softmax_saturated": "softmax_step"}
    return {(name, mode): _HAND[(hand_name.get(name, name), mode)] for name in names}


_EAGER_STYLE = ("counter", "cond", "conv_n1", "conv_n64", "softmax_step", "softmax_saturated",
                "mlp_step")
BUILDERS = {
    **_reused("eager", _EAGER_STYLE),
    ("build100", "eager"): lambda data: _eager_build(data, compiled=False),
    **_eager_optimizers("eager"),
    **_eager_optimizers("function"),
    **_reused("function", _EAGER_STYLE),
    ("build100", "function"): lambda data: _eager_build(data, compiled=True),
    **_reused("static", ("counter", "cond", "conv_n1", "conv_n64")),
    ("softmax_step", "static"): _static_softmax,
    ("softmax_saturated", "static"): _static_softmax,
    ("mlp_step", "static"): _static_mlp,
    ("mlp_momentum", "static"): _static_mlp_momentum,
    ("mlp_adam", "static"): _static_mlp_adam,
    ("build100", "static"): _static_build,
}
