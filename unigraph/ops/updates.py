"""Optimizers' fused updates: one call for a whole update of one parameter, which a backend
may lower as its framework's own optimizer kernels (`ug.optim.Adam(fused=True)`).

    adam_update (param, grad, m, v, lr, step ; beta1, beta2, eps) -> (param, m, v)

param, grad, m, v: one shape, one float dtype; lr: a float 0-d tensor, the parameter's
learning rate (lr * lr_scale, not cast to param's dtype); step: a float 0-d tensor, this
update's number t (1 for the first). Both are float64 as the optimizer keeps them, but any
float dtype is taken (`ug.check_training` casts optimizer state to the checked dtype).
The outputs are the new param, m and v (of param's shape and dtype); the inputs are never
written. The meaning is Adam's documented formula (`ug.optim.Adam`):

    m <- beta1 * m + (1 - beta1) * g
    v <- beta2 * v + (1 - beta2) * g * g
    p <- p - lr * (m / (1 - beta1 ** t)) / (sqrt(v / (1 - beta2 ** t)) + eps)

The reference below is that formula as the records compute it, op after op (each rounded
in the parameter's dtype; a float16 parameter's in float32, p, m and v rounded to float16
once): the bits of `Adam(fused=False)` on every target. A backend's
lowering (a `lowerings["adam_update"]` entry) computes the same algebra with its
framework's own kernels, whose rounding differs (torch: `lerp_`, `addcmul_`, `addcdiv_`,
the bias corrections as Python floats; Paddle: its `adam_` kernel; TensorFlow's graph modes:
`ResourceApplyAdam`), within the checker's budgets. These are not op records (`OPS`, the
consistency suite): a graph holds an `adam_update` node only where it was traced for a
backend and mode that lower it (`in_place.lowers`); everywhere else the optimizer records
the formula's ops (numpy, tensorflow:eager).

>>> p, m, v = ADAM_UPDATE.reference(p, g, m, v, np.float64(1e-3), np.float64(1.0),
...                                 beta1=0.9, beta2=0.999, eps=1e-8)
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import fmt, is_float, normal, require_float
from unigraph.ops.base import OpDef, Sample, TensorSpec


def _adam_update_infer(param, grad, m, v, lr, step, *, beta1, beta2, eps):
    require_float("adam_update", "param", param)
    for name, spec in (("grad", grad), ("m", m), ("v", v)):
        if spec.dtype != param.dtype or tuple(spec.shape) != tuple(param.shape):
            raise ShapeError(f"adam_update: {name} {fmt(spec)} must have param's shape and "
                             f"dtype, {fmt(param)}")
    for name, spec in (("lr", lr), ("step", step)):
        if not is_float(spec.dtype) or tuple(spec.shape) != ():
            raise ShapeError(f"adam_update: {name} {fmt(spec)} must be a float scalar (0-d)")
    out = TensorSpec(param.shape, param.dtype)
    return (out, out, out)


def _adam_update_reference(param, grad, m, v, lr, step, *, beta1, beta2, eps):
    from unigraph.ops.base import OPS

    add, sub, mul, div, sqrt, pow_ = (OPS[name].reference for name in
                                      ("add", "sub", "mul", "div", "sqrt", "pow"))
    dtype = param.dtype
    if dtype == np.float16:  # in float32, each result rounded once (`ug.optim.Adam`)
        wide = (x.astype(np.float32) for x in (param, grad, m, v))
        return tuple(x.astype(np.float16) for x in _adam_update_reference(
            *wide, lr, step, beta1=beta1, beta2=beta2, eps=eps))

    def number(x):  # a Python number meeting a tensor of `dtype` (a weak scalar)
        return np.asarray(x, dtype)

    def correction(beta):  # cast(1 - beta ** t, dtype), in t's dtype (float64) first
        return sub(np.asarray(1.0, step.dtype), pow_(np.asarray(beta, step.dtype),
                                                     step)).astype(dtype)

    m = add(mul(m, number(beta1)), mul(grad, number(1.0 - beta1)))
    v = add(mul(v, number(beta2)), mul(mul(grad, grad), number(1.0 - beta2)))
    denominator = add(sqrt(div(v, correction(beta2))), number(eps))
    delta = div(mul(div(m, correction(beta1)), np.asarray(lr).astype(dtype)), denominator)
    return sub(param, delta), m, v


def _adam_update_samples(rng):
    shape = (3, 4)
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    return [
        Sample((normal(rng, shape), normal(rng, shape), np.zeros(shape), np.zeros(shape),
                np.float64(1e-3), np.float64(1.0)), attrs),
        Sample((normal(rng, shape), normal(rng, shape), 0.1 * normal(rng, shape),
                np.abs(0.01 * normal(rng, shape)), np.float64(1e-2), np.float64(5.0)), attrs),
    ]


ADAM_UPDATE = OpDef(
    name="adam_update",
    infer=_adam_update_infer,
    reference=_adam_update_reference,
    vjp=None,
    doc="One Adam update of one parameter: (param, grad, m, v, lr, step ; beta1, beta2, "
        "eps) -> (param, m, v), the formula of `ug.optim.Adam` (see the module).",
    samples=_adam_update_samples,
)

# name -> definition of every fused update (`unigraph.in_place.fused_update` calls them).
FUSED_UPDATES = {ADAM_UPDATE.name: ADAM_UPDATE}

# adam_update's inputs by position: those its outputs replace, in output order (param, m,
# v), and those it only reads (grad, lr, step).
ADAM_WRITTEN = (0, 2, 3)
ADAM_READ = (1, 4, 5)
# name -> the positions of the inputs that each fused update's outputs replace, in order.
WRITTEN_INPUTS = {ADAM_UPDATE.name: ADAM_WRITTEN}


def adam_updates_in_place(graph) -> list:
    """The top-level `adam_update` nodes of `graph` that a backend may run as one kernel
    writing into param, m and v (torch:static's in-place path, TensorFlow's
    `ResourceApplyAdam`): param, m and v are parameters of the graph, each updated with the
    node's matching output, which nothing else reads; none of them an output or another
    update's value, and grad, lr and step none of them. (A read of an old value is fine: it
    happens before the update.)"""
    uses: dict = {}
    reads = [v for node in graph.nodes for v in node.inputs] + list(graph.outputs)
    for value in reads + [new for _, new in graph.updates]:
        uses[value.id] = uses.get(value.id, 0) + 1
    outputs = {value.id for value in graph.outputs}
    update_of = {new.id: param for param, new in graph.updates}
    found = []
    for node in graph.nodes:
        if node.op != ADAM_UPDATE.name:
            continue
        written = [node.inputs[position] for position in ADAM_WRITTEN]
        ids = {value.id for value in written}
        if (len(ids) == 3
                and all(update_of.get(out.id) is value and uses.get(out.id) == 1
                        for out, value in zip(node.outputs, written))
                and not ids & (outputs | set(update_of))
                and not ids & {node.inputs[position].id for position in ADAM_READ}):
            found.append(node)
    return found
