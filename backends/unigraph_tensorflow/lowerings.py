"""The lowering table: op name -> TensorFlow function, one entry per op record.

Each entry takes the op's inputs as positional TF tensors and its attrs as keywords, the way
`unigraph.backend.lower_nodes` calls it. The same functions serve all three modes: TF2 eager
op by op, a `tf.compat.v1.Graph` fed by a Session, and a `tf.function` trace; TF's public ops
build graph nodes in the last two. Convolution and pooling live in `images.py`.

Hot ops call `tf.raw_ops` (the op itself, through TF's eager fast path) rather than the
`tf.math` wrappers, whose dtype-conversion and dispatch layers cost several microseconds per
eager call and add nothing here: inputs arrive as tensors of one dtype, attrs normalised.

Where TF's own op differs from the op record, a small wrapper next to the entry says how:
bool comparisons go through int8, argmax treats NaN as the maximum, maximum/minimum split a
tie's gradient, softmax is NaN across a row whose max is not finite, and conv/pool images
are transposed to NHWC because TF's CPU kernels only take that layout; softmax, argmax,
broadcasts and the reductions' gradients take routes (`ranks.py`) where TF's kernels refuse
a high rank. Each such behaviour is a `Quirk` record in `quirks.py`, pinned by
tests/test_quirks.py.

`LOWERINGS` serves eager ops; `GRAPH_LOWERINGS` (tensorflow:static, tensorflow:function)
spreads it and overrides the entries that shape a graph for Grappler.

This module imports tensorflow: the backend imports it only from `TensorFlowBackend.load`,
after paddle (tensorflow 2.21 imported before paddlepaddle 3.3.1 crashes the process).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from unigraph.index_checks import MARKER, check_indices
from unigraph.ops.indexing import TO_END
from unigraph.printing import emit
from unigraph.shape_checks import MARKER as SHAPE_MARKER
from unigraph.shape_checks import check as check_shape
from unigraph.shape_checks import check_size
from unigraph_tensorflow import adam, images, nchw_conv, ranks
from unigraph_tensorflow.int_operands import int_operand
from unigraph_tensorflow.taping import may_be_differentiated

raw = tf.raw_ops
TF_DTYPES = {name: tf.as_dtype(name) for name in
             ("float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64",
              "bool")}


def unary(op):
    return lambda x: op(x=x)


def binary(op):
    return lambda x, y: op(x=x, y=y)


def in_float32(lowering):
    """`lowering` with float16 operands run in float32 and the result rounded to float16
    once: TF's float16 Sum, Mean, Cumsum, Prod and Einsum accumulate in float16 and
    FloorDiv floors the float16 quotient (quirks "sum (mean, cumsum, prod)", "einsum",
    "floor_divide"), where the op records (and torch, Paddle, onnxruntime) accumulate in
    float32 and floor the exact quotient."""
    def lowered(x, *operands, **attrs):
        if x.dtype != tf.float16:
            return lowering(x, *operands, **attrs)
        wide = [raw.Cast(x=v, DstT=tf.float32) if v.dtype == tf.float16 else v
                for v in (x, *operands)]
        return raw.Cast(x=lowering(*wide, **attrs), DstT=tf.float16)

    return lowered


def broadcast_in_float32(lowering):
    """`lowering` with float16 operands of different shapes run in float32 and the result
    rounded to float16 once, where a gradient may be taken: TF's gradient of an operand that
    broadcast is a float16 Sum of the cotangent, which accumulates in float16 (quirk
    "add (sub, mul, div, where)"); through the casts it sums in float32. The values are the
    same: a float16 +, -, *, / or select computed in float32 and rounded once is the float16
    result (float32's 24 bits hold 2 x 11 + 2: rounding twice is rounding once)."""
    def lowered(*operands):
        # The last operand has the result's dtype (where's first is its bool condition):
        # tested first, so that an op of any other dtype pays one comparison.
        if operands[-1].dtype != tf.float16 or not may_be_differentiated():
            return lowering(*operands)
        shapes = {tuple(v.shape.as_list()) if v.shape.is_fully_defined() else None
                  for v in operands}
        if len(shapes) == 1 and None not in shapes:
            return lowering(*operands)
        wide = [raw.Cast(x=v, DstT=tf.float32) if v.dtype == tf.float16 else v
                for v in operands]
        return raw.Cast(x=lowering(*wide), DstT=tf.float16)

    return lowered


# -- elementwise ------------------------------------------------------------------------------


def neg(x):
    # TF's Neg has no uint8 kernel (quirk "neg"): negated in int32, cast back (wrapping
    # modulo 256 as NumPy's negative does). Not 0 - x: Grappler rewrites that into Neg.
    if x.dtype == tf.uint8:
        return raw.Cast(x=raw.Neg(x=raw.Cast(x=x, DstT=tf.int32)), DstT=tf.uint8)
    return raw.Neg(x=x)


def floor_divide(x, y):
    """floor(x / y). Ints: TF's FloorDiv. Floats: NumPy's algorithm (npy_divmod), since
    FloorDiv is floor(x / y), which gives inf // 1 = inf where NumPy (and Python) give NaN
    and -1 // inf = -0.0 where they give -1 (quirk "floor_divide")."""
    if not x.dtype.is_floating:
        return raw.FloorDiv(x=x, y=y)
    rest = raw.TruncateMod(x=x, y=y)  # fmod: the sign of x
    whole = (x - rest) / y
    # raw Equal/NotEqual: a TF1 Session graph's Tensor == is Python's identity test
    zero = tf.zeros_like(x)
    signs_differ = raw.NotEqual(x=y < zero, y=rest < zero)
    whole = tf.where(raw.NotEqual(x=rest, y=zero) & signs_differ, whole - 1, whole)
    floored = raw.Floor(x=whole)
    floored = tf.where(whole - floored > 0.5, floored + 1, floored)
    quotient = x / y
    # A zero quotient takes the sign of x / y (quotient * 0: finite there), as NumPy's.
    floored = tf.where(raw.Equal(x=whole, y=zero), quotient * zero, floored)
    # A step function: gradient 0, as the record (FloorDiv's was none, read as 0).
    return tf.stop_gradient(tf.where(raw.Equal(x=y, y=zero), quotient, floored))


def erf(x):
    # TF's float64 Erf is NaN at +-inf and past |x| ~ 1e154 (quirk "erf"); from |x| > 6 on
    # erf is +-1 in float64, and its gradient there is 0 either way.
    out = raw.Erf(x=x)
    if x.dtype != tf.float64:
        return out
    return tf.where(tf.abs(x) > 6, tf.sign(x), out)


def absolute(x):
    # TF's Abs has no uint8 kernel (quirk "abs"); an unsigned value is its own abs.
    if x.dtype == tf.uint8:
        return raw.Identity(input=x)
    return raw.Abs(x=x)


def ordered(op):
    # TF's Less/Greater kernels take no bool; False < True holds in int8 as well.
    def lowering(x, y):
        if x.dtype is tf.bool:  # DTypes are interned: `is` is the cheap test
            x, y = raw.Cast(x=x, DstT=tf.int8), raw.Cast(x=y, DstT=tf.int8)
        return op(x=x, y=y)

    return lowering


def tie_split(native, wins):
    """maximum/minimum with the op record's gradient: the winner of each pair gets it all,
    a tie splits it 0.5/0.5, and a NaN result passes NaN to both (TF's own Maximum/Minimum
    gradient gives a tie all to x and a NaN pair all to y). `wins(x=a, y=b)` is a > b for
    maximum, a < b for minimum. The values are TF's own kernel's (NaN propagates)."""

    @tf.custom_gradient
    def differentiable(x, y):
        # The gradient reads copies made here: inside a tf.cond branch, `x` and `y` may be
        # tensors of the enclosing graph, which the branch's gradient cannot take in.
        x, y = raw.Identity(input=x), raw.Identity(input=y)

        def grad(g):
            g = tf.convert_to_tensor(g)  # an IndexedSlices where a gather reads the result
            x_wins, y_wins = wins(x=x, y=y), wins(x=y, y=x)
            none = tf.zeros_like(g)
            tie_or_nan = raw.SelectV2(condition=raw.Equal(x=x, y=y), t=g * 0.5,
                                      e=tf.fill(tf.shape(g), tf.constant(np.nan, g.dtype)))
            gx = raw.SelectV2(condition=x_wins, t=g, e=raw.SelectV2(
                condition=y_wins, t=none, e=tie_or_nan))
            gy = raw.SelectV2(condition=y_wins, t=g, e=raw.SelectV2(
                condition=x_wins, t=none, e=tie_or_nan))
            return unbroadcast(gx, x), unbroadcast(gy, y)

        return native(x=x, y=y), grad

    def lowering(x, y):
        if x.dtype.is_floating and may_be_differentiated():
            return differentiable(x, y)
        return native(x=x, y=y)  # the same values; ints have no gradient

    return lowering


def unbroadcast(g, x):
    """The gradient `g` of a broadcast result, summed back to the shape of the operand `x`."""
    if g.shape == x.shape and g.shape.is_fully_defined():
        return g
    x_shape = tf.shape(x)
    axes, _ = raw.BroadcastGradientArgs(s0=x_shape, s1=tf.shape(g))
    if g.dtype == tf.float16:  # TF's float16 Sum adds in float16 (quirk "sum")
        total = raw.Cast(x=tf.reduce_sum(raw.Cast(x=g, DstT=tf.float32), axes), DstT=tf.float16)
        return tf.reshape(total, x_shape)
    return tf.reshape(tf.reduce_sum(g, axes), x_shape)


def cast(x, *, dtype):
    return raw.Cast(x=x, DstT=TF_DTYPES[dtype])


def add_in_graph(x, y):
    """x + y in a graph. Grappler's remapper turns MatMul + AddV2 into a fused MatMul +
    BiasAdd where the addend looks like a bias, and gets two such sums wrong (quirks.py):
    a [1, N] row with a transposed operand fails ("bias must be 1-dimensional"), and an
    addend of more dims, the leading ones 1 ([1, 1, N]), gives the product's 2 dims, a
    silently wrong shape. It also fuses Conv2D + BiasAdd with an added constant that
    broadcasts, which fails when it runs."""
    if is_matmul(x):
        x, y = as_matmul_addend(x, y)
    elif is_matmul(y):
        y, x = as_matmul_addend(y, x)
    elif is_bias_sum_and_broadcast(x, y) or is_bias_sum_and_broadcast(y, x):
        # Grappler fuses Conv2D + BiasAdd + AddV2 of a constant (or a value it folds to
        # one) that broadcasts into one _FusedConv2D, whose kernel takes it for a bias
        # ("Must provide as many biases as the last dimension", quirks.py; oneDNN's NCHW
        # kernel fails to build); a rank above the conv's is not fused
        total = raw.AddV2(x=raw.ExpandDims(input=x, axis=0), y=raw.ExpandDims(input=y, axis=0))
        return raw.Squeeze(input=total, axis=[0])
    return raw.AddV2(x=x, y=y)


def is_bias_sum_and_broadcast(total, addend) -> bool:
    """Whether `total` is a BiasAdd and `addend` broadcasts against it (another shape):
    whether it is constant shows only when Grappler has folded it."""
    return (total.op.type == "BiasAdd" and addend.shape.rank is not None
            and total.shape.rank is not None
            and addend.shape.as_list() != total.shape.as_list())


def as_matmul_addend(product, addend):
    """(product, addend), the same broadcast: a row goes in as [N], the bias the fusion
    expects; an addend of rank above 2 meets the product expanded to its rank, which is not
    fused."""
    if is_row(addend):
        return product, raw.Reshape(tensor=addend, shape=(-1,))
    for _ in range((addend.shape.rank or 2) - 2):
        product = raw.ExpandDims(input=product, axis=0)
    return product, addend


def is_row(t) -> bool:
    return t.shape.rank == 2 and t.shape[0] == 1


def is_matmul(t) -> bool:
    return t.op.type == "MatMul"


def where(cond, x, y):
    return raw.SelectV2(condition=cond, t=x, e=y)


def einsum(*xs, equation):
    return tf.einsum(equation, *xs)


# -- linalg -----------------------------------------------------------------------------------


def matmul(a, b):
    # MatMul for plain matrices (Grappler fuses it with a following bias add);
    # BatchMatMulV2 broadcasts batch dims, also between ranks.
    if len(a.shape) == 2 and len(b.shape) == 2:
        return raw.MatMul(a=a, b=b)
    return raw.BatchMatMulV2(x=a, y=b)


# -- reductions -------------------------------------------------------------------------------


def reduction(op):
    def lowering(x, *, axis, keepdims, initial=None):
        # (`initial`: a max's -inf, which TF's Max of nothing already gives.)
        if axis is None:
            axis = tuple(range(len(x.shape)))
        if not axis:
            return x  # axis None of a 0-d x (a node's axis is never (): the frontend)
        if len(x.shape) > ranks.MAX_BROADCAST_DIMS:
            return ranks.reduction(op, x, axis, keepdims)  # TF's gradient may be refused
        return op(input=x, axis=int_operand(axis), keep_dims=keepdims)

    return lowering


def argmax(x, *, axis, keepdims):
    if len(x.shape) > ranks.MAX_ARGMAX_RANK:  # refused by TF's ArgMax: on a 3-D view
        out = ranks.on_a_view(lambda view, axis: argmax(view, axis=axis, keepdims=False), x,
                              axis % len(x.shape))
        return raw.ExpandDims(input=out, axis=axis) if keepdims else out
    out = raw.ArgMax(input=x, dimension=axis, output_type=tf.int64)
    if x.dtype.is_floating:
        # TF's ArgMax skips NaN; ours (NumPy's) counts NaN as the maximum: where a slice
        # holds a NaN, the answer is its first NaN (even after a +inf).
        nan = raw.IsNan(x=x)
        first_nan = raw.ArgMax(input=raw.Cast(x=nan, DstT=tf.int32), dimension=axis,
                               output_type=tf.int64)
        out = raw.SelectV2(condition=raw.Any(input=nan, axis=axis), t=first_nan, e=out)
    return raw.ExpandDims(input=out, axis=axis) if keepdims else out


# -- shape ------------------------------------------------------------------------------------


def reshape(x, sizes=None, *, shape):
    if sizes is None:
        return raw.Reshape(tensor=x, shape=int_operand(shape))
    # Sizes computed when the program runs (dims left open by input_spec): a graph's shape
    # inference cannot read them, so the dims known while tracing are stated.
    out = raw.Reshape(tensor=x, shape=sizes)
    out.set_shape(shape)
    return out


def transpose(x, *, perm):
    return raw.Transpose(x=x, perm=int_operand(perm)) if perm else x


def concat(*xs, axis):
    return tf.concat(xs, axis)


def stack(*xs, axis):
    return tf.stack(xs, axis)


def squeeze(x, *, axis):
    return tf.squeeze(x, axis)


def ensure_shape(x, *others, shape, message):
    if tf.executing_eagerly():
        return check_shape(x, *others, shape=shape, message=message)
    # A graph: each dim the check knows and the graph does not, compared when it runs (the
    # Assert prints each checked value's shape); x then has the known shape (better
    # inference downstream, a loop variable's own).
    checks, shapes = [], []
    for value in (x, *others):
        open_dims = [i for i, want in enumerate(shape)
                     if want is not None and value.shape[i] is None]
        if open_dims:
            actual = tf.shape(value)
            checks += [tf.equal(actual[i], shape[i]) for i in open_dims]
            shapes.append(actual)
    if not checks:
        return x
    out = _asserted(x, tf.reduce_all(tf.stack(checks)), [f"{SHAPE_MARKER} {message}", *shapes],
                    summarize=len(shape))
    out.set_shape(shape)
    return out


def expand_dims(x, *, axis):
    return tf.expand_dims(x, axis)


def broadcast_to(x, *, shape):
    return ranks.broadcast_to(x, shape)  # in steps where TF's BroadcastTo refuses it


def slice_(x, *, begin, end, stride):
    # A dim of unknown size taken whole (end TO_END) by end_mask: TF reads its ends as int32
    # when the others fit, and 2**63 - 1 would not (quirk "strided_slice end").
    if TO_END not in end:
        return tf.strided_slice(x, begin, end, stride)
    mask = sum(1 << axis for axis, e in enumerate(end) if e == TO_END)
    end = [0 if e == TO_END else e for e in end]
    return tf.strided_slice(x, begin, end, stride, end_mask=mask)


def _checked_indices(op, indices, size, axis=None):
    """`indices`, refused with unigraph's error when one lies outside [0, size): checked
    at once when eager; in a graph an Assert that the gather waits for, which prints the
    op, the size and the bad value for `translate_run_error` (a gather on GPU would not
    check at all)."""
    if tf.executing_eagerly():
        if indices.shape.num_elements():
            check_indices(op, indices.numpy(), int(size), axis)
        return indices
    size = tf.cast(size, indices.dtype)
    low, high = tf.reduce_min(indices), tf.reduce_max(indices)  # empty: no failure
    valid = tf.logical_and(low >= 0, high < size)
    bad = tf.where(low < 0, low, high)
    return _asserted(indices, valid, [f"{MARKER} op={op} axis={axis or 0}", size, bad])


def _asserted(x, valid, data, summarize=None):
    """`x`, once a graph's `tf.debugging.Assert(valid, data)` has passed: the check a
    unigraph run-time rule makes in a graph (its data names the rule for the translation of
    the failure into unigraph's error, see index_checks and shape_checks)."""
    check = tf.debugging.Assert(valid, data, summarize=summarize)
    with tf.control_dependencies([check]):
        return tf.identity(x)


def take(x, indices, *, axis):
    indices = _checked_indices("take", indices, tf.shape(x)[axis], axis)
    if x.dtype == tf.float16 and may_be_differentiated():
        return _gather_summed_in_float32(x, indices, axis)
    return tf.gather(x, indices, axis=axis)


def _gather_summed_in_float32(x, indices, axis):
    """tf.gather of a float16 x whose gradient sums the repeats of an index in float32,
    rounded to float16 once, as the op record's: TF's own (an IndexedSlices made dense by a
    float16 UnsortedSegmentSum) adds in float16 (quirk "take")."""
    index_rank = len(indices.shape)

    @tf.custom_gradient
    def gathered(x, indices):
        # Copies made here: inside a tf.cond branch the gradient cannot take in tensors of
        # the enclosing graph (see tie_split).
        x, indices = raw.Identity(input=x), raw.Identity(input=indices)

        def grad(g):
            g = raw.Cast(x=tf.convert_to_tensor(g), DstT=tf.float32)
            rank = len(g.shape)
            index_dims = list(range(axis, axis + index_rank))
            rest = [d for d in range(rank) if d not in index_dims]
            moved = tf.transpose(g, index_dims + rest)  # the indices' dims first
            rows = tf.reshape(moved, tf.concat([[-1], tf.shape(moved)[index_rank:]], 0))
            summed = tf.math.unsorted_segment_sum(rows, tf.reshape(indices, [-1]),
                                                  tf.shape(x)[axis])
            back = [*range(1, axis + 1), 0, *range(axis + 1, rank - index_rank + 1)]
            return raw.Cast(x=tf.transpose(summed, back), DstT=tf.float16), None

        return tf.gather(x, indices, axis=axis), grad

    return gathered(x, indices)


def one_hot(indices, *, depth, dtype):
    if dtype == "bool":
        # OneHot's default on/off values are ints and do not convert to bool.
        return tf.one_hot(indices, depth, on_value=True, off_value=False, dtype=tf.bool)
    return tf.one_hot(indices, depth, dtype=TF_DTYPES[dtype])


def scatter_add(x, indices, updates, *, axis):
    # tensor_scatter_nd_add refuses indices into an x with no elements ("Indices and
    # updates specified for empty output shape"), though they write nothing there: x is
    # the result. A size known only when it runs (input_spec) decides in the graph.
    sizes = x.shape.as_list()
    if 0 in sizes:
        return tf.identity(x)
    if None in sizes:
        return tf.cond(tf.size(x) > 0, lambda: _scatter_nd_add(x, indices, updates, axis),
                       lambda: tf.identity(x))
    return _scatter_nd_add(x, indices, updates, axis)


def _scatter_nd_add(x, indices, updates, axis):
    # tensor_scatter_nd_add writes along the leading axis: move `axis` first, then back.
    perm = [axis, *range(axis), *range(axis + 1, len(x.shape))]
    if axis:
        x, updates = tf.transpose(x, perm), tf.transpose(updates, perm)
    out = tf.tensor_scatter_nd_add(x, tf.expand_dims(indices, -1), updates)
    return tf.transpose(out, np.argsort(perm)) if axis else out


PRINTS = "unigraph_prints"  # the graph collection of the print ops (see print_)


def last_print() -> list:
    """[the last print op of the current graph] (a cond or while op holding prints
    counts), or []: a print made next runs after it, so that a Session prints in program
    order, as every other target does."""
    graph = tf.compat.v1.get_default_graph()
    prints = [p for p in graph.get_collection(PRINTS) if p.graph is graph]
    return prints[-1:]


def print_(*xs, message, texts=None):
    if tf.executing_eagerly():
        emit(message, *[x.numpy() for x in xs], texts=texts)
        return xs[0]
    # Graph modes: a Python callback (unigraph's text, not tf.print's) that the result
    # depends on, so a Session that fetches the result runs it, once per loop iteration.
    def show(*arrays):
        emit(message, *arrays, texts=texts)
        return np.int8(0)

    with tf.control_dependencies(last_print()):
        done = tf.numpy_function(show, list(xs), tf.int8, stateful=True, name="print")
    # A Session runs only what it fetches: a print whose value is not used again is found
    # here by the tensorflow:static builder (PRINTS), which fetches it with the outputs.
    tf.compat.v1.add_to_collection(PRINTS, done)
    with tf.control_dependencies([done]):
        return tf.identity(xs[0])


def full(*, shape, value, dtype):
    return tf.fill(list(shape), tf.constant(value, TF_DTYPES[dtype]))


def full_like(x, *, value, dtype):
    # x's shape read when the graph runs (a dim left open by input_spec)
    return tf.fill(tf.shape(x), tf.constant(value, TF_DTYPES[dtype]))


def flip(x, *, axes):
    return tf.reverse(x, list(axes))


def constant(*, value):
    return tf.constant(value)


# -- nn ---------------------------------------------------------------------------------------


def softmax(x, *, axis):
    if x.dtype == tf.float16:
        # TF's CPU Softmax of float16 is up to ~4 ulps off, torch's within one (quirk
        # "softmax", float16): in float32, rounded to float16 once
        return raw.Cast(x=softmax(raw.Cast(x=x, DstT=tf.float32), axis=axis), DstT=tf.float16)
    if len(x.shape) > ranks.MAX_SOFTMAX_RANK and x.dtype != tf.float64:
        # refused by oneDNN's Softmax (float64 runs on TF's own kernel, at any rank): on a view
        return ranks.on_a_view(lambda view, axis: softmax(view, axis=axis), x,
                               axis % len(x.shape))
    # TF's float32 Softmax kernel makes a row holding +inf [nan, 0] and a row holding NaN
    # [0, nan]; the op record's exp(x - max) / sum(...) is NaN throughout such a row (and
    # over a row of -inf). Adding max - max (0 where the max is finite, else NaN) makes it
    # so, and adds exactly 0 (value and gradient) everywhere else.
    peak = raw.Max(input=x, axis=int_operand((axis,)), keep_dims=True)
    out = raw.Softmax(logits=x) if axis == len(x.shape) - 1 else tf.nn.softmax(x, axis=axis)
    return raw.AddV2(x=out, y=raw.Sub(x=peak, y=peak))


def log_softmax(x, *, axis):
    if axis == len(x.shape) - 1:
        return raw.LogSoftmax(logits=x)
    return tf.nn.log_softmax(x, axis=axis)


_XENT_EAGER_DTYPES = ({tf.float32, tf.float64}, {tf.int32, tf.int64})


def sparse_softmax_cross_entropy(logits, labels):
    if (tf.executing_eagerly() and logits.dtype in _XENT_EAGER_DTYPES[0]
            and labels.dtype in _XENT_EAGER_DTYPES[1]):
        # Eagerly the class count is static and the labels are on the host: checked here,
        # then TF's op itself. tf.nn's wrapper (shape checks, a Shape op, a name scope) and
        # tf.shape(logits)[-1] cost ~60 us a call; the record's [N, C] logits and int labels
        # are what the op takes. The gradient is the op's own, as through the wrapper.
        if labels.shape.num_elements():
            check_indices("sparse_softmax_cross_entropy", labels.numpy(), logits.shape[-1])
        return raw.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)[0]
    labels = _checked_indices("sparse_softmax_cross_entropy", labels, tf.shape(logits)[-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def argsort(x, *, axis):
    """tf.argsort(stable=True), whose order is wrong around a NaN (quirk "argsort"): floats
    are sorted with NaN read as 0, then that order is sorted stably by "is NaN", which moves
    the NaNs last and keeps the rest (ties included) in place. (Along the last axis: the
    axis is moved there and back.)"""
    if not x.dtype.is_floating:
        return raw.Cast(x=tf.argsort(x, axis=axis, stable=True), DstT=tf.int64)
    last = len(x.shape) - 1
    perm = [d for d in range(last + 1) if d != axis] + [axis]
    back = [perm.index(d) for d in range(last + 1)]
    x = raw.Transpose(x=x, perm=perm) if axis != last else x
    nan = raw.IsNan(x=x)
    first = tf.argsort(raw.SelectV2(condition=nan, t=tf.zeros_like(x), e=x), axis=-1,
                       stable=True)
    nan_after = tf.gather(raw.Cast(x=nan, DstT=tf.int32), first, axis=last, batch_dims=last)
    order = tf.gather(first, tf.argsort(nan_after, axis=-1, stable=True), axis=last,
                      batch_dims=last)
    order = raw.Cast(x=order, DstT=tf.int64)
    return raw.Transpose(x=order, perm=back) if axis != last else order


def topk(x, *, k, axis, largest):
    """tf.math.top_k where it keeps the record's order (ints, largest: equal values in index
    order); it misorders floats around a NaN (quirk "topk"), and has no smallest-first form
    that -x would give an int at its minimum. There: the stable argsort above (largest: of
    x reversed along `axis`, the order reversed back, n - 1 - i: descending, ties still in
    index order, NaN first), its first k."""
    rank = len(x.shape)
    last = rank - 1
    if largest and not x.dtype.is_floating:
        perm = [d for d in range(rank) if d != axis] + [axis]
        moved = raw.Transpose(x=x, perm=perm) if axis != last else x
        order = raw.Cast(x=raw.TopKV2(input=moved, k=k, sorted=True).indices, DstT=tf.int64)
        return raw.Transpose(x=order, perm=[perm.index(d) for d in range(rank)]) \
            if axis != last else order
    if largest:
        size = x.shape[axis]
        order = tf.reverse(argsort(tf.reverse(x, [axis]), axis=axis), [axis])
        order = tf.constant(size - 1, tf.int64) - order
    else:
        order = argsort(x, axis=axis)
    begin = [0] * rank
    size = [-1] * rank
    size[axis] = k
    return tf.slice(order, begin, size)


def triangle(lower: bool):
    """tril / triu: x where column - row <= k (>= k for triu), else zeros. TF's
    MatrixBandPart keeps a band around the diagonal, which cannot drop the main diagonal
    (tril with k < 0, triu with k > 0): the mask is made from ranges instead, any k."""

    def lowering(x, *, k):
        shape = tf.shape(x)
        offset = tf.range(shape[-1])[None, :] - tf.range(shape[-2])[:, None]
        keep = offset <= k if lower else offset >= k
        return raw.SelectV2(condition=keep, t=x, e=tf.zeros_like(x))

    return lowering


LOWERINGS = {
    # elementwise
    # float16 operands that broadcast, in float32 (broadcast_in_float32)
    "add": broadcast_in_float32(binary(raw.AddV2)),
    "sub": broadcast_in_float32(binary(raw.Sub)),
    "mul": broadcast_in_float32(binary(raw.Mul)),
    "div": broadcast_in_float32(binary(raw.RealDiv)),  # floats only, as the record says
    "pow": binary(raw.Pow),
    "maximum": tie_split(raw.Maximum, raw.Greater),
    "minimum": tie_split(raw.Minimum, raw.Less),
    "equal": binary(raw.Equal),
    "not_equal": binary(raw.NotEqual),
    "less": ordered(raw.Less),
    "less_equal": ordered(raw.LessEqual),
    "greater": ordered(raw.Greater),
    "greater_equal": ordered(raw.GreaterEqual),
    "logical_and": binary(raw.LogicalAnd),
    "logical_or": binary(raw.LogicalOr),
    "logical_xor": tf.math.logical_xor,
    "logical_not": unary(raw.LogicalNot),
    "isnan": unary(raw.IsNan),
    "isinf": unary(raw.IsInf),
    "isfinite": unary(raw.IsFinite),
    "neg": neg,
    "abs": absolute,
    "exp": unary(raw.Exp),
    "log": unary(raw.Log),
    "sqrt": unary(raw.Sqrt),
    "stop_gradient": lambda x: raw.StopGradient(input=x),
    "where": broadcast_in_float32(where),
    "cast": cast,
    # math (floor ops: the sign of y, as NumPy; TF's gradient of the step functions is
    # none, which the backend reads as 0)
    "mod": binary(raw.FloorMod),
    # float16 in float32: no float16 TruncateMod kernel, and FloorDiv floors the float16
    # quotient (quirk "floor_divide"); exact in float32
    "floor_divide": in_float32(floor_divide),
    "floor": unary(raw.Floor),
    "ceil": unary(raw.Ceil),
    "round": unary(raw.Round),  # halves to even, as NumPy
    "atan2": lambda y, x: raw.Atan2(y=y, x=x),
    "sin": unary(raw.Sin),
    "cos": unary(raw.Cos),
    "tan": unary(raw.Tan),
    "asin": unary(raw.Asin),
    "acos": unary(raw.Acos),
    "atan": unary(raw.Atan),
    "sinh": unary(raw.Sinh),
    "cosh": unary(raw.Cosh),
    "erf": erf,
    "log1p": unary(raw.Log1p),
    "expm1": unary(raw.Expm1),
    "softplus": lambda x: raw.Softplus(features=x),
    # linalg
    "matmul": matmul,
    "einsum": in_float32(einsum),
    "tril": triangle(lower=True),
    "triu": triangle(lower=False),
    # reductions
    "sum": in_float32(reduction(raw.Sum)),
    "mean": in_float32(reduction(raw.Mean)),
    "max": reduction(raw.Max),
    "min": reduction(raw.Min),
    "prod": in_float32(reduction(raw.Prod)),
    "cumsum": in_float32(lambda x, *, axis: raw.Cumsum(x=x, axis=axis)),
    "argmax": argmax,
    "argsort": argsort,
    "topk": topk,
    "any": reduction(raw.Any),
    "all": reduction(raw.All),
    # shape
    "reshape": reshape,
    "transpose": transpose,
    "concat": concat,
    "stack": stack,
    "squeeze": squeeze,
    "ensure_shape": ensure_shape,
    "ensure_size": check_size,  # (open dims: checked before the run)
    "expand_dims": expand_dims,
    "broadcast_to": broadcast_to,
    "slice": slice_,
    "take": take,
    "one_hot": one_hot,
    # float16 TensorScatterAdd adds repeats in float16 (quirk "scatter_add"): in float32
    "scatter_add": in_float32(scatter_add),
    "constant": constant,
    "full": full,
    "full_like": full_like,
    "flip": flip,
    "print": print_,
    # nn
    "relu": lambda x: raw.Relu(features=x),
    "sigmoid": unary(raw.Sigmoid),
    "tanh": unary(raw.Tanh),
    "softmax": softmax,
    "log_softmax": log_softmax,
    "conv2d": nchw_conv.conv2d,  # eager: NCHW oneDNN kernels where TF has them
    "conv_transpose2d": images.conv_transpose2d,
    "max_pool2d": images.max_pool2d,
    "avg_pool2d": images.avg_pool2d,
    "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
}

# Graph modes (tensorflow:static, tensorflow:function) build nodes that Grappler rewrites:
# these entries shape the graph for its fusions, or route around its bugs. Eager ops are
# not rewritten and keep the plain entries.
GRAPH_LOWERINGS = {
    **LOWERINGS,
    "add": broadcast_in_float32(add_in_graph),
    "relu": images.before_nchw_transpose(LOWERINGS["relu"]),
    "sigmoid": images.before_nchw_transpose(LOWERINGS["sigmoid"]),
    "tanh": images.before_nchw_transpose(LOWERINGS["tanh"]),
    # ug.optim.Adam(fused=True): TF's ResourceApplyAdam where a step can write the variables
    # (the executables, `adam.written_by_adam`), else the formula; eagerly the formula.
    "adam_update": adam.adam_update,
}

# Elementwise ops whose operands broadcast: where TF's kernel refuses the broadcast (more
# than 5 dims once merged, see ranks.py), the operands are broadcast in steps first. A graph
# knows at build time; eagerly, TF's kernel is tried first. (SelectV2 takes 8 dims: `where`
# needs no route.)
BROADCASTING = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal",
                "less", "less_equal", "greater", "greater_equal", "logical_and",
                "logical_or", "logical_xor", "mod", "floor_divide", "atan2")
GRAPH_LOWERINGS.update(
    (name, ranks.graph_broadcasting(GRAPH_LOWERINGS[name])) for name in BROADCASTING)
LOWERINGS.update((name, ranks.eager_broadcasting(LOWERINGS[name])) for name in BROADCASTING)
