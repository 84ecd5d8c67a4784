"""The graph modes' layout pass: keep images NHWC through whole conv/pool/activation chains.

unigraph's images are NCHW; TF's CPU Conv2D/MaxPool/AvgPool take NHWC only. Lowered op by op,
every conv or pool pays a transpose of its activation in and one out. This pass rewrites the
lowering table of the graph modes (tensorflow:static, tensorflow:function) so that those
transposes sink through the ops it understands and cancel:

- A carried op looks at the producer of each image operand. An operand that is
  `Transpose(y, (0, 3, 1, 2))` (an "NCHW view" of the NHWC tensor `y`, which is what every
  carried op returns) is read as `y`; any other operand is brought to NHWC (a reshape when
  only size-1 dims move, as for a per-channel `[C, 1, 1]` or `[1, C, 1, 1]` scale or bias;
  else one transpose). The op runs on NHWC values and returns the NCHW view of its result.
- An op the pass does not carry (reshape, flatten, matmul, slice, softmax, control flow,
  fetches ...) reads the view as it is: TF runs that one transpose there, at the chain's
  boundary. Views nobody reads are never run (a Session runs what its fetches need; a
  function body is pruned to its outputs).

So conv -> bias -> relu -> pool -> conv -> ... -> flatten costs one transpose in and one
out. A graph output that is a view costs none in tensorflow:static: the Session fetches its
NHWC source and `static.py` returns NumPy's transposed view of it (graphs whose conv reaches
an output, `conv_reaches_an_output`, therefore keep that conv NHWC).
Gradients need nothing more: `ug.grad` nodes differentiate the lowered graph with TF's
own autodiff (`tf.compat.v1.gradients` or a tape), which goes through the NHWC ops and the
boundary transposes as built. Forward values are bit for bit those of the NCHW lowering
for every carried op but the reductions, whose sums run in another order; so do the
gradients of broadcast operands (a per-channel scale's gradient sums over N, H, W). Both stay
within the reduction tolerances (measured: 4e-6 relative on a 4-conv stack's gradients).

Carried ops (`CARRIED`): conv2d, max_pool2d, avg_pool2d (image operand only; weights and
biases as the record has them); the elementwise unary ops in `UNARY` (activations, casts,
math), binary ops in `BINARY` and `where` (broadcast operands of rank <= 4 are permuted
with the image); the reductions sum/mean/max/min/prod over explicit axes (axes remapped;
without keepdims only when the kept dims stay in order, e.g. a per-channel mean over
(0, 2, 3)); and transpose (composed with the view's permutation into one).

Eager TF has no producers to look at (an EagerTensor has no `.op`): the pass is for graphs.
This module imports tensorflow: only `static.py` and `function.py` import it, after paddle.
"""

from __future__ import annotations

import tensorflow as tf

from unigraph_tensorflow import nchw_conv
from unigraph_tensorflow.images import (
    TO_HWIO,
    TO_NCHW,
    TO_NHWC,
    avg_pool2d_nhwc,
    conv2d_nhwc,
    max_pool2d_nhwc,
)
from unigraph_tensorflow.taping import inside_gradient

raw = tf.raw_ops

UNARY = frozenset({
    "relu", "sigmoid", "tanh", "softplus", "neg", "abs", "exp", "log", "sqrt", "erf",
    "floor", "ceil", "round", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "cast", "logical_not",
})
BINARY = frozenset({
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod", "floor_divide", "atan2",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "where",
})
REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod"})
IMAGE_OPS = {"conv2d": conv2d_nhwc, "max_pool2d": max_pool2d_nhwc,
             "avg_pool2d": avg_pool2d_nhwc}
CARRIED = frozenset(UNARY | BINARY | REDUCTIONS | set(IMAGE_OPS) | {"transpose"})


def carry_nhwc(lowerings: dict, nchw_convs: bool = False) -> dict:
    """The graph lowering table `lowerings` with the layout pass on every op in `CARRIED`
    (a new table; `lowerings` is unchanged). Each graph-mode executable builds its own,
    once, and hands it to `lower_nodes` and to its control flow (so branches, loop bodies
    and `ug.grad` functions get the pass too). `nchw_convs` (see `takes_nchw_convs`): a
    forward conv of an NCHW image runs on TF's NCHW kernels, with no transpose at all.

    >>> table = carry_nhwc(GRAPH_LOWERINGS, takes_nchw_convs(graph))
    """
    carried = dict(lowerings)
    for name, native in IMAGE_OPS.items():
        carried[name] = image_op(native)
    if nchw_convs:
        carried["conv2d"] = nchw_or_carried(carried["conv2d"])
    for name in UNARY & lowerings.keys():
        carried[name] = unary(lowerings[name])
    for name in BINARY & lowerings.keys():
        carried[name] = elementwise(lowerings[name])
    for name in REDUCTIONS & lowerings.keys():
        carried[name] = reduction(lowerings[name])
    carried["transpose"] = transpose(lowerings["transpose"])
    return carried


POOLS = frozenset({"max_pool2d", "avg_pool2d"})


def takes_nchw_convs(graph) -> bool:
    """Whether the graph's forward convs should run on TF's NCHW kernels (`nchw_conv`): where
    this TF has them, and the graph has no pool, whose NHWC-only kernel would then transpose
    the conv's wider result instead of the conv's input. Ask before building (it may probe
    the kernels, eagerly)."""
    pending = [graph]
    while pending:
        for node in pending.pop().nodes:
            if node.op in POOLS:
                return False
            pending.extend(node.subgraphs.values())
    return nchw_conv.supported()


def conv_reaches_an_output(graph) -> bool:
    """Whether a conv2d's result reaches an output of `graph` (top level) through carried ops
    only. The output is then, most likely, the NCHW view of an NHWC value, which
    tensorflow:static fetches NHWC and hands back as a transposed NumPy view (free): there
    the NHWC conv costs one transpose in and none out, less than the NCHW kernel (measured
    on [64, 3, 32, 32] -> 16 channels: 0.78 against 1.11 ms, native NHWC 0.72). Only a
    choice between two routes of the same values: carried ops that end up not carrying
    (a rank > 4 operand ...) merely make it the slower one."""
    producers = {out.id: node for node in graph.nodes for out in node.outputs}
    pending, seen = list(graph.outputs), set()
    while pending:
        node = producers.get(pending.pop().id)
        if node is None or node.op not in CARRIED or id(node) in seen:
            continue
        if node.op == "conv2d":
            return True
        seen.add(id(node))
        pending.extend(node.inputs)
    return False


def nchw_or_carried(carried_conv):
    """conv2d on NCHW kernels when its image is NCHW (not the view of an NHWC value, which
    the carried conv reads as it is) and no gradient goes through it; else `carried_conv`."""

    def lowering(x, w, bias=None, **attrs):
        if (nhwc_of_view(x) is None and not inside_gradient()
                and nchw_conv.usable(x, w, **attrs)):
            filter_hwio = raw.Transpose(x=w, perm=TO_HWIO)
            return nchw_conv.conv2d_nchw(x, filter_hwio, bias, stride=attrs["stride"],
                                         padding=attrs["padding"])
        return carried_conv(x, w, bias, **attrs)

    return lowering


# -- views ------------------------------------------------------------------------------------


def nhwc_of_view(x):
    """The NHWC tensor `y` when `x` is `Transpose(y, TO_NCHW)` in this graph, else None."""
    op = getattr(x, "op", None)  # an eager tensor has no producer
    if op is None or op.type != "Transpose" or x.shape.rank != 4:
        return None
    perm = tf.get_static_value(op.inputs[1])
    if perm is None or tuple(perm.tolist()) != TO_NCHW:
        return None
    return op.inputs[0]


def as_nchw(y):
    """The NCHW view of the NHWC `y`: what a carried op returns."""
    return raw.Transpose(x=y, perm=TO_NCHW)


def to_nhwc(x):
    """The NCHW (or broadcastable, rank <= 4) operand `x` laid out as NHWC: its view's
    source if it is one, a reshape when only size-1 dims move (a per-channel [C, 1, 1] or
    [1, C, 1, 1] operand becomes [1, 1, 1, C]), else a transpose."""
    source = nhwc_of_view(x)
    if source is not None:
        return source
    rank = x.shape.rank
    if rank == 0:
        return x
    dims = (1,) * (4 - rank) + tuple(x.shape)
    moved = tuple(dims[axis] for axis in TO_NHWC)
    # A reshape only when the axes of size > 1 keep their order: comparing their sizes
    # would take a [1, 6, 6, 6] image (C == H == W) for one and scramble it.
    kept = [axis for axis in TO_NHWC if dims[axis] != 1]
    if None not in dims and kept == sorted(kept):
        return raw.Reshape(tensor=x, shape=moved)
    if rank < 4:
        x = raw.Reshape(tensor=x, shape=tf.concat([[1] * (4 - rank), tf.shape(x)], 0))
    return raw.Transpose(x=x, perm=TO_NHWC)


# -- carried ops ------------------------------------------------------------------------------


def image_op(native_nhwc):
    """conv2d / max_pool2d / avg_pool2d: the image in NHWC, the result's NCHW view out."""

    def lowering(x, *rest, **attrs):
        return as_nchw(native_nhwc(to_nhwc(x), *rest, **attrs))

    return lowering


def unary(native):
    def lowering(x, **attrs):
        source = nhwc_of_view(x)
        if source is None:
            return native(x, **attrs)
        return as_nchw(native(source, **attrs))

    return lowering


def elementwise(native):
    """A binary op (or `where`): carried when an operand is a view and the result is 4-D
    with every operand of rank <= 4 (their broadcast then permutes with the image)."""

    def lowering(*operands):
        if (any(nhwc_of_view(x) is not None for x in operands)
                and all(x.shape.rank is not None and x.shape.rank <= 4 for x in operands)
                and max(x.shape.rank for x in operands) == 4):
            return as_nchw(native(*(to_nhwc(x) for x in operands)))
        return native(*operands)

    return lowering


def reduction(native):
    """A reduction over explicit axes of a view runs on its source with the axes remapped
    (NCHW axis a is NHWC axis TO_NCHW[a]). With keepdims the result is 4-D: its view goes
    on; without, only when the kept axes keep their order (the result is then the same)."""

    def lowering(x, *, axis, keepdims, **initial):
        if initial:  # (a max's -inf; TF's Max of nothing gives it)
            return native(x, axis=axis, keepdims=keepdims)
        source = nhwc_of_view(x)
        if source is None or axis is None:
            return native(x, axis=axis, keepdims=keepdims)
        axes = tuple(a % 4 for a in (axis if isinstance(axis, tuple | list) else (axis,)))
        moved = tuple(sorted(TO_NCHW[a] for a in axes))
        if keepdims:
            return as_nchw(native(source, axis=moved, keepdims=True))
        kept = [TO_NCHW[a] for a in range(4) if a not in axes]
        if kept != sorted(kept):
            return native(x, axis=axis, keepdims=keepdims)
        return native(source, axis=moved, keepdims=False)

    return lowering


def transpose(native):
    """A transpose of a view is one transpose of its source (none when they cancel)."""

    def lowering(x, *, perm):
        source = nhwc_of_view(x)
        if source is None or not perm:
            return native(x, perm=perm)
        composed = tuple(TO_NCHW[p] for p in perm)
        if composed == (0, 1, 2, 3):
            return source
        return raw.Transpose(x=source, perm=composed)

    return lowering
