"""How many terms an op sums into one output element: the length its rounding error grows
with, so that the checker's budget can grow with it (see `unigraph.checking.compare`).

The rule: an op's budget (rtol, atol), its record's `tolerance` (or the dtype default),
holds for sums of up to `REFERENCE_TERMS` terms; a node that sums `n` more gets

    rtol * sqrt(n / REFERENCE_TERMS),   atol * n / REFERENCE_TERMS

The relative part: rounding errors of a float sum of n terms behave like a random walk, so
with high probability the error relative to the sum grows like sqrt(n) times the unit
roundoff, not the worst-case n (Higham and Mary, "A new approach to probabilistic rounding
error analysis", SIAM J. Sci. Comput. 41(5), 2019). The absolute part covers the elements
that cancel to near zero (a weight gradient summing positive activations times cotangents
of both signs): there the error is that of the partial sums, as large as the terms, and the
bound is the deterministic n times the unit roundoff. A conv whose weight gradient sums 4096
positions in float32 gets 4x its rtol and 16x its atol; a bug that changes whole terms (a
dropped channel, a skipped row of positions) still moves the result by far more.

Terms per op, forward, and also backward when the op is differentiated (inside a `grad`
node): the VJP of an accumulation is one too (conv2d's weight gradient sums over batch and
output positions, matmul's over the other operand's free dims).

    >>> terms(node)   # a conv2d over 512 input channels, 3x3 kernel
    4608
"""

from __future__ import annotations

import math

import numpy as np

REFERENCE_TERMS = 256  # the op records' tolerances are calibrated for sums up to this long


def _size(value) -> int:
    return int(np.prod([d if d is not None else 1 for d in value.shape], dtype=np.int64))


def _reduced(node, backward):
    """Reductions: input elements per output element (the backward only broadcasts)."""
    return max(_size(node.inputs[0]) // max(_size(node.outputs[0]), 1), 1)


def _along_axis(node, backward):
    """softmax, log_softmax, cumsum: the length of the axis, forward and backward."""
    shape = node.inputs[0].shape
    if not shape:
        return 1
    axis = node.attrs.get("axis", -1)
    return shape[axis] or 1 if isinstance(axis, int) else 1


def _matmul(node, backward):
    a, b = node.inputs[:2]
    inner = a.shape[-1] or 1
    if not backward:
        return inner
    # dA sums over b's free dim; dB over a's rows and any broadcast batch.
    return max(inner, b.shape[-1] or 1, _size(a) // inner)


def _conv2d(node, backward):
    x, weight = node.inputs[:2]
    kernel = int(np.prod(weight.shape[1:]))  # input channels per group x kh x kw
    if not backward:
        return kernel
    out = node.outputs[0].shape
    groups = node.attrs.get("groups", 1) or 1
    per_group_out = (weight.shape[0] or 1) // groups
    positions = (out[0] or 1) * (out[2] or 1) * (out[3] or 1)
    return max(kernel, per_group_out * int(np.prod(weight.shape[2:])), positions)


def _conv_transpose2d(node, backward):
    x, weight = node.inputs[:2]
    groups = node.attrs.get("groups", 1) or 1
    kernel = (weight.shape[0] or 1) // groups * int(np.prod(weight.shape[2:]))
    if not backward:
        return kernel
    positions = (x.shape[0] or 1) * (x.shape[2] or 1) * (x.shape[3] or 1)
    return max(kernel, int(np.prod(weight.shape[1:])), positions)


def _einsum(node, backward):
    """The product of all index sizes over the output's size (the contracted part); for
    the backward, over each input's size too."""
    equation = node.attrs.get("equation", "")
    sizes = {}
    for letters, value in zip(equation.split("->")[0].split(","), node.inputs):
        sizes.update(zip(letters, value.shape))
    total = int(np.prod([s or 1 for s in sizes.values()], dtype=np.int64))
    targets = [node.outputs[0]] + (list(node.inputs) if backward else [])
    return max(total // max(_size(v), 1) for v in targets)


def _pool(node, backward):
    return int(np.prod(node.attrs.get("kernel", (1, 1))))


def _classes(node, backward):
    return node.inputs[0].shape[-1] or 1


TERMS = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "einsum": _einsum,
    "sum": _reduced,
    "mean": _reduced,
    "prod": _reduced,
    "softmax": _along_axis,
    "log_softmax": _along_axis,
    "cumsum": _along_axis,
    "avg_pool2d": _pool,
    "sparse_softmax_cross_entropy": _classes,
}


def terms(node, backward: bool = False) -> int:
    """Terms one output element of `node` sums (1 for an op that sums nothing); with
    `backward`, the most any of its gradients sums too."""
    rule = TERMS.get(node.op)
    if rule is None:
        return 1
    try:
        return max(int(rule(node, backward)), 1)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return 1  # a shape the rule cannot read: the record's budget as it is


def scale(count: int) -> tuple:
    """(rtol factor, atol factor) by which an op's budget grows for a sum of `count` terms.

    >>> scale(4096)
    (4.0, 16.0)
    """
    ratio = max(1.0, count / REFERENCE_TERMS)
    return math.sqrt(ratio), ratio


def tag(op: str, count: int) -> str:
    """The name `compare.ops_of` gives an accumulating use of `op`: "conv2d@4608"."""
    return f"{op}@{count}"


def untag(name: str) -> tuple:
    """(op, terms) of a name from `tag`, or (name, 1) for a plain op name."""
    op, _, count = name.partition("@")
    return op, int(count) if count.isdigit() else 1
