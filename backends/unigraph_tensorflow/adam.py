"""`adam_update` (`ug.optim.Adam(fused=True)`) in TensorFlow's graph modes.

A compiled step updates each parameter and its moments with TF's own fused kernel,
`ResourceApplyAdam` (what `tf.compat.v1.train.AdamOptimizer` runs), on the variables that
hold them in tensorflow:static and tensorflow:function: one op a parameter, where the
formula is about 13 (`written_by_adam` says which updates; the executables build the op with
`apply_adam` in place of their assigns). TF's kernel adds its epsilon to sqrt(v) and scales
lr by sqrt(1 - beta2 ** t) / (1 - beta1 ** t) (eps-hat); given beta powers of 0, the rate
lr * sqrt(c2) / c1 and the epsilon eps * sqrt(c2) (c = 1 - beta ** t, in float64) it computes
`ug.optim.Adam`'s formula, lr * (m / c1) / (sqrt(v / c2) + eps), rounded its way.

Where something else reads a value the node writes (a step returning the new moment) and
for the values the checker reads node by node, the node is the formula in TF ops
(`adam_update`). Eager TF has no lowering (its parameters are tensors, not variables): it
runs the formula.
"""

from __future__ import annotations

import tensorflow as tf

from unigraph.ops.updates import adam_updates_in_place

raw = tf.raw_ops


def adam_update(param, grad, m, v, lr, step, *, beta1, beta2, eps):
    """The formula of `unigraph.ops.updates.adam_update`, op by op in param's dtype (its
    reference's order): (new param, new m, new v). float16: in float32, each result rounded
    to float16 once (`ug.optim.Adam`)."""
    dtype = param.dtype
    if dtype == tf.float16:
        wide = (tf.cast(x, tf.float32) for x in (param, grad, m, v))
        return tuple(tf.cast(x, dtype) for x in adam_update(
            *wide, lr, step, beta1=beta1, beta2=beta2, eps=eps))

    def correction(beta):  # cast(1 - beta ** t, dtype), in t's dtype first
        return tf.cast(1.0 - tf.pow(tf.constant(beta, step.dtype), step), dtype)

    m = m * tf.constant(beta1, dtype) + grad * tf.constant(1.0 - beta1, dtype)
    v = v * tf.constant(beta2, dtype) + grad * grad * tf.constant(1.0 - beta2, dtype)
    denominator = tf.sqrt(v / correction(beta2)) + tf.constant(eps, dtype)
    delta = m / correction(beta1) * tf.cast(lr, dtype) / denominator
    return param - delta, m, v


def apply_adam(param, m, v, grad, lr, step, *, beta1, beta2, eps):
    """The op writing one Adam update into the resource variables `param`, `m` and `v`
    (TF's `ResourceApplyAdam`), from the gradient `grad` and the 0-d float `lr` and `step`
    (t, 1 for the first update), with the rate and epsilon that make TF's eps-hat form
    the documented one (see the module)."""
    dtype = grad.dtype
    t = tf.cast(step, tf.float64)
    root = tf.sqrt(1.0 - tf.pow(tf.constant(beta2, tf.float64), t))
    rate = tf.cast(lr, tf.float64) * root / (1.0 - tf.pow(tf.constant(beta1, tf.float64), t))
    zero = tf.zeros((), dtype)
    return raw.ResourceApplyAdam(
        var=param.handle, m=m.handle, v=v.handle, beta1_power=zero, beta2_power=zero,
        lr=tf.cast(rate, dtype), beta1=tf.constant(beta1, dtype),
        beta2=tf.constant(beta2, dtype), epsilon=tf.cast(eps * root, dtype), grad=grad,
        use_locking=False, use_nesterov=False)


def written_by_adam(graph) -> tuple[list, set]:
    """(the top-level `adam_update` nodes of `graph` that can write into their variables,
    the ids of the values they write): `unigraph.ops.updates.adam_updates_in_place`; a read
    of an old value is fine, TF's kernel copies a buffer a read holds. Their updates are
    `apply_adam` ops (on the node's `ADAM_WRITTEN` and `ADAM_READ` inputs), not assigns.
    Not a float16 one: ResourceApplyAdam runs in float16, where eps (1e-8) is 0 and a zero
    v gives NaN; the formula runs in float32 instead (`adam_update`)."""
    nodes = [node for node in adam_updates_in_place(graph)
             if node.inputs[0].dtype != "float16"]
    return nodes, {out.id for node in nodes for out in node.outputs}
