"""The lowering table: op name -> Paddle function, one entry per op record.

The same table serves dygraph (`paddle:eager`, on `paddle.Tensor`) and PIR programs
(`paddle:static`, on `pir.Value`): every entry calls only Paddle APIs that exist in both
modes. Each entry is called as `table[op](*inputs, **attrs)` with the attrs the op
record defines (already normalised by the frontend: non-negative axes, tuples).

float16 on CPU: Paddle 3.3.1 has no CPU float16 kernel for most ops (even `add`). Those
entries are wrapped by `half_via_float32`, which casts float16 inputs up to float32, runs
the op, and casts the result back: one rounding, as NumPy's own float16 ufuncs do. The
ops that need it are listed in `CPU_HALF_MISSING`; on a GPU place the wrapping is skipped.
"""

from __future__ import annotations

# Ops whose float16 CPU kernel paddlepaddle 3.3.1 lacks. tests/test_backend_paddle.py
# checks that each still fails natively, so the list shrinks when Paddle catches up.
CPU_HALF_MISSING = frozenset({
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "abs", "sqrt", "where",
    "matmul", "mean", "max", "min", "argmax", "take", "relu", "sigmoid", "tanh",
    "softmax", "log_softmax", "conv2d", "sparse_softmax_cross_entropy",
})

# Which input decides the dtype an op runs in (where: x, after the bool cond).
_DTYPE_INPUT = {"where": 1}


def make_lowerings(paddle, widen_half: bool = True) -> dict:
    """Build the table from the imported `paddle` module.

    widen_half: wrap the ops of `CPU_HALF_MISSING` with `half_via_float32` (CPU places).
    """
    F = paddle.nn.functional

    def matmul(a, b):
        # Paddle's matmul_grad fails when both operands have batch dims but different ranks
        # ([2, 1, 3, 4] @ [3, 4, 2]); leading size-1 dims make the ranks equal.
        extra = a.ndim - b.ndim
        if extra and a.ndim > 2 and b.ndim > 2:
            if extra > 0:
                b = paddle.unsqueeze(b, list(range(extra)))
            else:
                a = paddle.unsqueeze(a, list(range(-extra)))
        return paddle.matmul(a, b)

    def sum_(x, *, axis, keepdims):
        if axis == ():
            return paddle.assign(x)
        # paddle.sum widens int32 to int64 by default; ours keeps the dtype.
        return paddle.sum(x, axis=_axes(axis), keepdim=keepdims, dtype=x.dtype)

    def reduction(fn):
        def reduce(x, *, axis, keepdims):
            if axis == ():  # Paddle reads an empty axis list as "all axes"; NumPy as none.
                return paddle.assign(x)
            return fn(x, axis=_axes(axis), keepdim=keepdims)

        return reduce

    def argmax(x, *, axis, keepdims):
        if x.dtype in (paddle.float16, paddle.float32, paddle.float64):
            # NumPy counts a NaN as the maximum; Paddle's kernel skips it.
            x = paddle.where(paddle.isnan(x), paddle.full([], float("inf"), x.dtype), x)
        return paddle.argmax(x, axis=axis, keepdim=keepdims, dtype="int64")

    def slice_(x, *, begin, end, stride):
        if not begin:  # a rank-0 tensor: nothing to slice
            return paddle.assign(x)
        axes = list(range(len(begin)))
        return paddle.strided_slice(x, axes, list(begin), list(end), list(stride))

    def squeeze(x, *, axis):
        if not axis:  # Paddle squeezes every size-1 axis when given none
            return paddle.assign(x)
        return paddle.squeeze(x, axis=list(axis))

    def take(x, indices, *, axis):
        # paddle.gather takes a 1-D index; gather the flat indices, then restore their shape.
        flat = paddle.reshape(indices, [-1])
        gathered = paddle.gather(x, flat, axis=axis)
        x_shape, index_shape = list(x.shape), list(indices.shape)
        dims = x_shape[:axis] + index_shape + x_shape[axis + 1:]
        if dims.count(-1) > 1:  # several dims unknown until the program runs
            shape = paddle.shape
            dims = paddle.concat([shape(x)[:axis], shape(indices), shape(x)[axis + 1:]])
        return paddle.reshape(gathered, dims)

    def expand_dims(x, *, axis):
        dims = list(x.shape)
        if dims.count(-1) > 1:  # several dims unknown until the program runs
            return paddle.unsqueeze(x, axis)
        # reshape, not unsqueeze: PIR on CPU has no float16 kernel for unsqueeze (3.3.1).
        return paddle.reshape(x, dims[:axis] + [1] + dims[axis:])

    def constant(*, value):
        if value.ndim == 0 and not (value.dtype == "int64" and abs(int(value)) > 2**53):
            # One `full` op; `assign` of an array costs two in a Program. (`full` carries
            # its value as a double: exact for every dtype but int64 beyond 2**53.)
            return paddle.full([], value.item(), value.dtype.name)
        if value.dtype == "float16":  # assign takes no float16 array; float32 holds it exactly
            return paddle.cast(paddle.assign(value.astype("float32")), "float16")
        return paddle.assign(value)

    def one_hot(indices, *, depth, dtype):
        # F.one_hot raises on an index outside [0, depth); ours gives a row of zeros.
        classes = paddle.arange(depth, dtype=indices.dtype)
        return paddle.cast(paddle.equal(paddle.unsqueeze(indices, -1), classes), dtype)

    def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
        return F.conv2d(
            x, w, bias=bias, stride=list(stride), padding=list(padding),
            dilation=list(dilation), groups=groups,
        )

    def max_pool2d(x, *, kernel, stride, padding):
        # Paddle's max pool never picks a padded cell: the same as padding with -inf.
        return F.max_pool2d(x, list(kernel), list(stride), list(padding))

    def avg_pool2d(x, *, kernel, stride, padding):
        # exclusive=False: padded zeros count, the divisor is always kh * kw.
        return F.avg_pool2d(x, list(kernel), list(stride), list(padding), exclusive=False)

    def sparse_softmax_cross_entropy(logits, labels):
        return F.cross_entropy(logits, labels, reduction="none")

    table = {
        # elementwise
        "add": paddle.add,
        "sub": paddle.subtract,
        "mul": paddle.multiply,
        "div": paddle.divide,
        "pow": paddle.pow,
        "maximum": paddle.maximum,
        "minimum": paddle.minimum,
        "equal": paddle.equal,
        "not_equal": paddle.not_equal,
        "less": paddle.less_than,
        "less_equal": paddle.less_equal,
        "greater": paddle.greater_than,
        "greater_equal": paddle.greater_equal,
        "logical_and": paddle.logical_and,
        "logical_or": paddle.logical_or,
        "logical_not": paddle.logical_not,
        "neg": paddle.neg,
        "abs": paddle.abs,
        "exp": paddle.exp,
        "log": paddle.log,
        "sqrt": paddle.sqrt,
        "where": paddle.where,
        "cast": lambda x, *, dtype: paddle.cast(x, dtype),
        # linalg
        "matmul": matmul,
        # reduction
        "sum": sum_,
        "mean": reduction(paddle.mean),
        "max": reduction(paddle.max),
        "min": reduction(paddle.min),
        "argmax": argmax,
        # shape
        "reshape": lambda x, *, shape: paddle.reshape(x, list(shape)),
        "transpose": lambda x, *, perm: paddle.transpose(x, list(perm)),
        "concat": lambda *xs, axis: paddle.concat(list(xs), axis=axis),
        "stack": lambda *xs, axis: paddle.stack(list(xs), axis=axis),
        "squeeze": squeeze,
        "expand_dims": expand_dims,
        "broadcast_to": lambda x, *, shape: paddle.broadcast_to(x, list(shape)),
        "slice": slice_,
        "take": take,
        "one_hot": one_hot,
        "constant": constant,
        # nn
        "relu": F.relu,
        "sigmoid": F.sigmoid,
        "tanh": paddle.tanh,
        "softmax": lambda x, *, axis: F.softmax(x, axis=axis),
        "log_softmax": lambda x, *, axis: F.log_softmax(x, axis=axis),
        "conv2d": conv2d,
        "max_pool2d": max_pool2d,
        "avg_pool2d": avg_pool2d,
        "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
    }
    if widen_half:
        for name in CPU_HALF_MISSING:
            table[name] = half_via_float32(paddle, table[name], _DTYPE_INPUT.get(name, 0))
    return table


def half_via_float32(paddle, fn, dtype_input: int = 0):
    """`fn` computed in float32 when input `dtype_input` is float16, the result cast back.

    Only the float16 inputs are cast (bool conditions and int indices pass through); an int
    result (argmax) stays as it is.
    """
    float16, float32 = paddle.float16, paddle.float32
    eager_tensor = paddle.Tensor

    def lowered(*xs, **attrs):
        x = xs[dtype_input]
        dtype = x.dtype
        # An eager Tensor's dtype is the very object `paddle.float16` (an identity test,
        # ~0.05 us); a PIR Value's is only equal to it (`==` costs ~1 us).
        if dtype is not float16 and (type(x) is eager_tensor or dtype != float16):
            return fn(*xs, **attrs)
        wide = [paddle.cast(x, float32) if x.dtype == float16 else x for x in xs]
        out = fn(*wide, **attrs)
        return paddle.cast(out, float16) if out.dtype == float32 else out

    lowered.__name__ = getattr(fn, "__name__", "lowered")
    lowered.__wrapped__ = fn
    return lowered


def _axes(axis):
    return None if axis is None else list(axis)



def __getattr__(name):
    # `from unigraph_paddle.lowerings import LOWERINGS`, as for the other backends: the
    # table for Paddle's default device, built (importing paddle) on first access.
    if name == "LOWERINGS":
        from unigraph_paddle.backend import PaddleBackend

        backend = PaddleBackend()
        backend.load()
        return backend.lowerings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
