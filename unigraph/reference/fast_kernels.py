"""Faster NumPy kernels for the hot ops of the NumPy engine (numpy:eager and numpy:static).

An op record's `reference` is the definition of the op and stays as it is (the float64
checker runs it); a kernel here computes the same numbers with less work per call, and
`tests/test_fast_kernels.py` checks each against its reference on the record's samples:

- elementwise binary ops whose reference is a NumPy ufunc applied to two inputs of one
  dtype, then cast to that dtype (or bool): the ufunc alone already gives that dtype, so
  the kernel skips the wrapper and the cast (a scalar op in a loop body costs ~1 us less);
  most of them are also a Python operator (`OPERATORS`; a kernel's `.operator`), which the
  generated static plans write instead of a call (see `codegen`);
- conv2d without groups: im2col (a strided window view copied once into a [C*KH*KW, OH*OW]
  matrix per sample) and one matmul per sample written straight into a contiguous NCHW
  result, instead of a tensordot whose [N, OH, OW, O] result is then transposed. BLAS sums
  in another order than the reference's tensordot: equal within float rounding.

- sparse_softmax_cross_entropy, forward and VJP, and mean's VJP: the reference's
  operations without the [N, C] log-softmax matrix, the dtype-name checks and the NumPy
  error-state context per call (the softmax-regression step is mostly small ops); the
  forward keeps its exponentials for the VJP of the same call (`_softmax_memo`), so a
  training step computes them once, as hand-written NumPy does; the mean of a
  cross-entropy has one VJP call for the two steps (`FUSED_VJPS`, which `grad_codegen`
  writes), its share g / count multiplying as one number, as hand-written NumPy's
  `d / len(y)`;
- mean's forward, and the VJPs of matmul (2-D), add, sub and relu on operands of one float
  dtype: the same NumPy calls as the records' rules without the generic wrapper
  (`grad_for`'s dtype checks, casts and reshapes), which costs more than the arithmetic on
  a training step's bias vectors;

- `linear` (matmul, then the bias added into the product) and `cross_entropy_mean` with
  their VJPs: the records' kernels above, as one call each, for numpy:eager's composites
  (`eager.COMPOSITES`, `ug.nn.functional`'s linear and mean cross-entropy);

`VJP_KERNELS` / `vjp_kernel` are the same for VJP rules; `FUSED_VJPS` maps a pair of
consecutive ops to one rule for both.

`kernel(name, record)` is the engine's entry: the kernel when `record` is the registered
record of op `name` (a deliberately wrong op table in a test keeps its own references),
else None.

>>> kernel("add", OPS["add"])(np.array(1.0), np.array(2.0))
array(3.)
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from unigraph.index_checks import check_indices
from unigraph.ir import FLOAT_DTYPES
from unigraph.ops import OPS
from unigraph.ops._util import unbroadcast
from unigraph.reference import error_state

__all__ = ["KERNELS", "OPERATORS", "UNARY_UFUNCS", "VJP_KERNELS", "conv2d", "kernel", "vjp_kernel"]


def _ufunc_kernel(ufunc, operator=None):
    asarray = np.asarray

    def run(x, y):
        # An array, as from the reference (NumPy gives 0-d inputs a scalar result).
        return asarray(ufunc(x, y))

    run.__name__ = ufunc.__name__
    run.operator = operator  # the Python operator that calls `ufunc` on NumPy operands
    return run


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    """conv2d (NCHW input, [O, C, KH, KW] weight) by im2col and matmul; grouped convolutions
    go to the reference."""
    if groups != 1:
        return OPS["conv2d"].reference(x, w, bias, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    spans = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    windows = sliding_window_view(x, spans, axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    oh, ow = windows.shape[2:4]
    # [N, C, KH, KW, OH, OW] copied once: per sample, a [C*KH*KW, OH*OW] column matrix.
    columns = np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3))
    columns = columns.reshape(n, c * kh * kw, oh * ow)
    out = np.matmul(w.reshape(o, c * kh * kw), columns)  # [N, O, OH*OW], contiguous
    if bias is not None:
        out += bias[:, None]
    return out.reshape(n, o, oh, ow).astype(x.dtype, copy=False)


# dtype.name is a Python property (~1 us); a set of dtype objects answers in ~0.1 us.
_FLOATS = frozenset(np.dtype(name) for name in FLOAT_DTYPES)
_FAST_FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))

# The cross-entropy forward's exponentials and row sums, kept for the VJP of the same call:
# one entry per thread, (loss, logits, labels, exp, row sums, the labels' flat positions
# `_picks`), taken (and cleared) by the VJP when it is handed that very loss array for
# those very logits and labels. The engine never writes an array it has handed on, so
# identity means the same numbers; any other call recomputes. At most one [N, C] array per
# thread stays alive between calls.
_softmax_memo = threading.local()


def sparse_softmax_cross_entropy(logits, labels):
    """The per-row loss as the reference computes it, -(shifted[n, y] - lse[n]), without
    the [N, C] log-softmax matrix (only the picked entries are subtracted). float16: the
    record's own (its softmax runs in float32, rounded once)."""
    if logits.dtype not in _FAST_FLOATS:
        _softmax_memo.entry = None  # (nothing kept: its VJP is the record's too)
        return OPS["sparse_softmax_cross_entropy"].reference(logits, labels)
    if logits.size == 0:
        check_indices("sparse_softmax_cross_entropy", labels, logits.shape[1])
        return OPS["sparse_softmax_cross_entropy"].reference(logits, labels)
    if _out_of_range(labels, logits.shape[1]):
        check_indices("sparse_softmax_cross_entropy", labels, logits.shape[1])
    shifted = _shifted_rows(logits)
    # the picks first: then the exponentials go into shifted's own buffer
    picks = _picks(shifted, labels)
    picked = shifted.ravel()[picks]  # (the method: np.ravel's Python layer, ~0.4 us)
    exp = np.exp(shifted, out=shifted)
    total = np.add.reduce(exp, axis=1)  # exp.sum(axis=1) without ndarray.sum's Python layer
    lse = np.log(total)
    loss = np.subtract(picked, lse, out=picked)
    # -(picked - lse), not lse - picked: the reference's signed zeros
    loss = np.negative(loss, out=loss)
    if loss.dtype != logits.dtype:
        loss = loss.astype(logits.dtype)
    _softmax_memo.entry = (loss, logits, labels, exp, total, picks)
    return loss


def _picks(matrix, labels):
    """The positions of `matrix[arange(N), labels]` in `matrix` [N, C] raveled in C order
    (labels in range): one add, and a 1-D gather or scatter by them is ~3x cheaper than
    NumPy's 2-D fancy indexing by (rows, labels)."""
    return np.add(_row_starts(*matrix.shape), labels)


# int64/int32 labels seen as unsigned: a negative label is then >= 2**31, so one max
# finds both kinds of out-of-range label
_UNSIGNED = {np.dtype(np.int64): np.dtype(np.uint64), np.dtype(np.int32): np.dtype(np.uint32)}


def _out_of_range(labels, count: int) -> bool:
    """Whether a label lies outside [0, count): one reduction where two would be."""
    unsigned = _UNSIGNED.get(labels.dtype)
    if unsigned is not None:
        return bool(np.maximum.reduce(labels.view(unsigned), axis=None) >= count)
    return bool(labels.min() < 0 or labels.max() >= count)


# Up to this many columns, a row maximum is faster over a transposed copy (NumPy's reduction
# along a short contiguous row costs ~0.6 us a row: 6 us for 100 rows of 10 classes, 1.7 us
# transposed); above it, along the rows.
_SHORT_ROWS = 32


def _row_max(x):
    """max(x) over axis 1, kept as a [N, 1] column. The maximum is one of the row's values
    whichever order NumPy reduces in (NaN if the row holds one); only which of a +0 and a
    -0 tied at the top is returned can differ, and no result of the cross-entropy kernels
    depends on it (x - peak is then a zero of either sign, exp of which is 1, and the loss
    subtracts lse >= log 2 > 0 from it)."""
    if x.shape[1] <= _SHORT_ROWS:
        return np.maximum.reduce(np.ascontiguousarray(x.T), axis=0)[:, None]
    return np.maximum.reduce(x, axis=1, keepdims=True)


_IGNORING_INVALID = error_state.last_ignoring("invalid")


def _shifted_rows(x):
    """x - max(x) over axis 1, as `ops.nn._shifted` (a row with an infinite max is NaN,
    silently: NumPy's `invalid` warning is off for this one subtraction, as the record's
    `np.errstate` does, set through its context variable: ~0.2 us where the `errstate`
    block costs ~2 us and a test of the peaks for finite values ~1.5 us)."""
    peak = _row_max(x)
    if error_state.STATE is None:  # pragma: no cover - another NumPy layout
        with np.errstate(invalid="ignore"):
            return x - peak
    last = _IGNORING_INVALID[0]  # (`ignoring`'s last answer while the state is the same)
    token = error_state.STATE.set(last[1] if error_state.STATE.get() is last[0]
                                  else error_state.ignoring("invalid"))
    try:
        return np.subtract(x, peak)
    finally:
        error_state.STATE.reset(token)


def sparse_softmax_cross_entropy_vjp(g, inputs, out):
    """softmax(logits) - one_hot(labels), times g: the reference's operations in its order,
    as method calls, and no error state entered for finite rows."""
    logits, labels = inputs
    if logits.size == 0 or logits.dtype not in _FAST_FLOATS:  # (float16: the record's)
        return OPS["sparse_softmax_cross_entropy"].vjp(g, inputs, out)
    d_logits = _softmax_minus_one_hot(logits, labels, out)
    if g.dtype == d_logits.dtype:
        return [np.multiply(d_logits, g[:, None], out=d_logits), None]
    return [(d_logits * g[:, None]).astype(logits.dtype, copy=False), None]


def _softmax_minus_one_hot(logits, labels, out):
    """softmax(logits) - one_hot(labels) as a fresh array: from the forward's
    exponentials when `out` is that call's loss (`_softmax_memo`), else computed again."""
    entry = getattr(_softmax_memo, "entry", None)
    if entry is not None and entry[0] is out and entry[1] is logits and entry[2] is labels:
        _softmax_memo.entry = None
        # The forward's exp is referenced by nothing else now: divide into its buffer.
        e, total, picks = entry[3], entry[4], entry[5]
        d_logits = np.divide(e, total[:, None], out=e)
        if d_logits.flags.c_contiguous:  # (its layout follows the logits': NumPy's order K)
            flat = d_logits.reshape(-1)  # a view
            flat[picks] -= 1  # (the forward checked these labels)
            return d_logits
    else:
        e = np.exp(_shifted_rows(logits))
        d_logits = e / e.sum(axis=1, keepdims=True)
    d_logits[np.arange(len(labels)), labels] -= 1
    return d_logits


def mean_vjp(g, inputs, out, *, axis, keepdims):
    """g / count spread over the reduced axes: the reference divides the broadcast g, here
    g is divided once and then broadcast into a fresh array (the same quotients)."""
    (x,) = inputs
    if x.dtype not in _FLOATS:
        return [None]
    axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
    if not keepdims and axis is not None:
        g = np.expand_dims(g, axes)  # a mean over all axes has a 0-d g: it broadcasts as is
    grad = np.empty(x.shape, x.dtype)
    grad[...] = _mean_share(g, x, axes)
    return [grad]


def _mean_share(g, x, axes):
    """g / count in x's dtype: what mean's VJP spreads over x."""
    count = 1
    for a in axes:
        count *= x.shape[a]
    if (g.ndim == 0 and g.dtype is x.dtype and g.dtype in _FAST_FLOATS
            and error_state.ignores("under")):
        # NumPy's scalar math (~0.4 us; the ufunc on a 0-d array and an int: ~4 us): the
        # same IEEE division by the count in g's dtype. Dividing by a count >= 1 can raise
        # no flag but underflow, which NumPy's error state then ignores in both (their
        # messages would differ: "scalar divide").
        return g[()] / count
    return np.asarray(g / count).astype(x.dtype, copy=False)


def mean_cross_entropy_vjp(g, loss, mean, logits, labels, *, axis, keepdims):
    """The gradient of `mean = mean(loss, axis, keepdims)`, `loss =
    sparse_softmax_cross_entropy(logits, labels)` with respect to logits, given the
    mean's gradient g: what `mean_vjp` then `sparse_softmax_cross_entropy_vjp` give (None
    where they give none), in one call (`grad_codegen` makes it of the two steps). Where g
    is one number, the mean's share g / count multiplies the cross-entropy's gradient as
    that one number instead of as the [N] array of it `mean_vjp` fills: the same products,
    without the array, its fill and the [N, 1] view (hand-written NumPy's `d / len(y)`)."""
    if (g.size != 1 or logits.size == 0 or logits.dtype not in _FAST_FLOATS
            or loss.dtype != logits.dtype):
        (spread,) = mean_vjp(g, [loss], mean, axis=axis, keepdims=keepdims)
        if spread is None:
            return None
        return sparse_softmax_cross_entropy_vjp(spread, [logits, labels], loss)[0]
    # (the mean of a [N] loss reduces its only axis, or none: then count is 1)
    share = _mean_share(g.reshape(()), loss, range(loss.ndim) if axis is None else axis)
    d_logits = _softmax_minus_one_hot(logits, labels, loss)
    return np.multiply(d_logits, share, out=d_logits)


def mean(x, *, axis, keepdims):
    """np.mean's own steps for float32/float64 (`numpy/_core/_methods.py:_mean`): the sum,
    then a division by the count as an intp, in place when the sum is an array; without
    np.mean's Python layers (~5 us). float16 (summed in float32) and empty means (a
    warning and NaN) go to the reference."""
    if x.dtype not in _FAST_FLOATS or x.size == 0:
        return OPS["mean"].reference(x, axis=axis, keepdims=keepdims)
    count = 1
    for a in (range(x.ndim) if axis is None else axis):
        count *= x.shape[a]
    total = np.add.reduce(x, axis=axis, keepdims=keepdims)
    if type(total) is np.ndarray:
        return np.true_divide(total, np.intp(count), out=total, casting="unsafe")
    # np.mean's `total / intp(count)` of two NumPy scalars is a float64 division (~3 us in
    # NumPy's scalar math); Python's float division is the same IEEE double division, and
    # the array made of it rounds to x's dtype as np.mean's `dtype.type(...)` does
    return np.array(float(total) / count, x.dtype)


def relu(x):
    """max(x, 0) for floats: the ufunc keeps x's dtype (0 is a weak Python int), so the
    record's cast is a no-op; NaN stays NaN."""
    return np.asarray(np.maximum(x, 0))


_ROW_STARTS: dict = {}


def _row_starts(count: int, width: int) -> np.ndarray:
    """np.arange(count) * width, read-only and kept per (count, width): the flat position of
    each row's first entry in a C-contiguous [count, width] array."""
    key = (count, width)
    starts = _ROW_STARTS.get(key)
    if starts is None:
        if len(_ROW_STARTS) > 64:
            _ROW_STARTS.clear()
        starts = _ROW_STARTS[key] = np.arange(count) * width
        starts.flags.writeable = False
    return starts


def _same_float(g, *arrays) -> bool:
    """Whether g and every array share one float dtype (the fast VJPs' precondition)."""
    dtype = g.dtype
    if dtype not in _FLOATS:
        return False
    for array in arrays:
        if array.dtype != dtype:
            return False
    return True


def matmul_vjp(g, inputs, out, needs=(True, True)):
    """g @ b.T and a.T @ g for 2-D operands of g's dtype (the record's products, no
    unbroadcasting to do); batched or mixed cases go to the record."""
    a, b = inputs
    if a.ndim != 2 or b.ndim != 2 or not _same_float(g, a, b):
        return OPS["matmul"].vjp(g, inputs, out, needs=needs)
    return [g @ b.T if needs[0] else None, a.T @ g if needs[1] else None]


def _unbroadcast(g, shape):
    """`unbroadcast(g, shape)` as an array: g for g's own shape, one
    `np.add.reduce` over the leading dims where `shape` is g's trailing dims (a bias), the
    same call `unbroadcast` makes through `ndarray.sum`'s Python layer; else (and float16,
    which `unbroadcast` sums in float32) `unbroadcast`."""
    if shape == g.shape:
        return np.asarray(g)  # (a 0-d ufunc result is a NumPy scalar: made an array again)
    extra = g.ndim - len(shape)
    if extra > 0 and shape == g.shape[extra:] and g.dtype in _FAST_FLOATS:
        return np.asarray(np.add.reduce(g, axis=tuple(range(extra))))  # () : a NumPy scalar
    return np.asarray(unbroadcast(g, shape))


def add_vjp(g, inputs, out):
    """g, summed over the dims broadcasting stretched (a bias's gradient: one sum)."""
    x, y = inputs
    if not _same_float(g, x, y):
        return OPS["add"].vjp(g, inputs, out)
    return [_unbroadcast(g, x.shape), _unbroadcast(g, y.shape)]


def sub_vjp(g, inputs, out):
    x, y = inputs
    if not _same_float(g, x, y):
        return OPS["sub"].vjp(g, inputs, out)
    return [_unbroadcast(g, x.shape), _unbroadcast(-g, y.shape)]


def relu_vjp(g, inputs, out):
    """g * (x > 0), the record's product (a NaN cotangent at x <= 0 stays NaN)."""
    (x,) = inputs
    if not _same_float(g, x) or g.shape != x.shape:
        return OPS["relu"].vjp(g, inputs, out)
    return [np.multiply(g, x > 0)]


def linear(x, w, b):
    """`add(matmul(x, w), b)` for 2-D x and w and a 1-D b of one float dtype (the records
    `ug.nn.functional.linear` is made of; the NumPy engine's eager call for it,
    `eager.COMPOSITES`): the bias is added into the product's own array, the same sums as
    the `add` kernel's new array."""
    out = np.matmul(x, w)
    return np.add(out, b, out=out)


def linear_vjp(g, inputs, out, needs=(True, True, True)):
    """The gradients of `linear` for x, w and b: `add_vjp` then `matmul_vjp`, the rules of
    its two records (the product has the result's shape and dtype: `out` stands for it)."""
    x, w, b = inputs
    g_product, g_bias = add_vjp(g, [out, b], out)
    g_x, g_w = matmul_vjp(g_product, [x, w], out, needs[:2])
    return [g_x, g_w, g_bias]


def cross_entropy_mean(logits, labels):
    """(`mean(sparse_softmax_cross_entropy(logits, labels))` over every row, the [N] loss)
    by the two records' kernels (`ug.nn.functional.cross_entropy`'s mean; the NumPy
    engine's eager call for it, `eager.COMPOSITES`); the loss is kept for the VJP."""
    loss = sparse_softmax_cross_entropy(logits, labels)
    return mean(loss, axis=None, keepdims=False), loss


def cross_entropy_mean_vjp(g, inputs, out, *, loss):
    """The gradients of `cross_entropy_mean` for the logits and (none) the labels, given its
    [N] `loss`: `mean_cross_entropy_vjp`, the two records' rules in one call."""
    logits, labels = inputs
    return [mean_cross_entropy_vjp(g, loss, out, logits, labels, axis=None, keepdims=False),
            None]


# The elementwise ops whose result has their operands' dtype (codegen writes these into a
# dead operand's array).
ARITHMETIC_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                     "maximum": np.maximum, "minimum": np.minimum}
# The elementwise unary ops whose record is this ufunc on a float (or, for neg and abs, any
# numeric) input of the result's dtype, then a no-op cast: `ufunc(x, out=x)` gives the same
# numbers (codegen writes these into a dead operand's array too).
UNARY_UFUNCS = {"neg": np.negative, "abs": np.absolute, "exp": np.exp, "log": np.log,
                "sqrt": np.sqrt}
_UFUNCS = {
    **ARITHMETIC_UFUNCS,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
}
# `x + y` on ndarrays or NumPy scalars is `np.add(x, y)`; on 0-d operands it is NumPy's
# scalar math, ~10x cheaper than a ufunc call: generated plans (`codegen`) write these.
# `&`, `|` are logical_and/or for the bool operands those records take.
OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/",
    "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
    "equal": "==", "not_equal": "!=", "logical_and": "&", "logical_or": "|",
}
KERNELS = {name: _ufunc_kernel(ufunc, OPERATORS.get(name)) for name, ufunc in _UFUNCS.items()}
KERNELS["conv2d"] = conv2d
KERNELS["sparse_softmax_cross_entropy"] = sparse_softmax_cross_entropy
KERNELS["mean"] = mean
KERNELS["relu"] = relu
# matmul's operands have one dtype (the record's rule), which np.matmul keeps: the
# record's cast is a no-op
KERNELS["matmul"] = np.matmul
# VJP_KERNELS's rule of two steps, sparse_softmax_cross_entropy then mean, in one call
# (see `grad_codegen`)
FUSED_VJPS = {("sparse_softmax_cross_entropy", "mean"): mean_cross_entropy_vjp}
VJP_KERNELS = {"sparse_softmax_cross_entropy": sparse_softmax_cross_entropy_vjp,
               "mean": mean_vjp, "matmul": matmul_vjp, "add": add_vjp, "sub": sub_vjp,
               "relu": relu_vjp}


def kernel(name: str, record):
    """The fast kernel of op `name`, or None (no kernel, or `record` is not the registered
    record of `name`)."""
    fast = KERNELS.get(name)
    if fast is None or OPS.get(name) is not record:
        return None
    return fast


def vjp_kernel(name: str, record):
    """The fast VJP rule of op `name`, or None (as `kernel`)."""
    fast = VJP_KERNELS.get(name)
    if fast is None or OPS.get(name) is not record:
        return None
    return fast
