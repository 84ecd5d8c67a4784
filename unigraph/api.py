"""The public op functions (`ug.add`, `ug.matmul`, `ug.sum`, ...).

Each one puts its arguments in the form the op record expects (promoted dtypes, normalised
axes and shapes) and hands over to `dispatch.apply`. The meaning of every op lives in its
record in `unigraph/ops/`.
"""

from __future__ import annotations

import builtins

import numpy as np

from unigraph.dispatch import apply, current_backend
from unigraph.dtypes import as_dtype, is_float, result_dtype
from unigraph.errors import ShapeError
from unigraph.tensor import Parameter, Tensor
from unigraph.tracing import _builder, user_source

_SCALARS = (bool, int, float)
_TENSORS = (Tensor, Parameter)


def _as_operand(x):
    if isinstance(x, (Tensor, *_SCALARS)):
        return x
    if isinstance(x, np.ndarray | np.generic):
        as_dtype(x.dtype)
        return np.asarray(x)
    if isinstance(x, list | tuple):
        from unigraph.tensor import tensor

        return tensor(x)
    raise TypeError(
        f"{_short(x)} (a {type(x).__name__}) at {user_source()} is not a tensor, array or "
        "number: unigraph ops take ug tensors, NumPy arrays, Python numbers and (nested) "
        "lists of them"
    )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _promote(*xs, to_float=False):
    """Bring operands to one dtype (NumPy rules, Python scalars weak); optionally to float."""
    first = xs[0]
    if type(first) in _TENSORS and all(type(x) in _TENSORS and x.dtype == first.dtype
                                       for x in xs) and (not to_float or is_float(first.dtype)):
        return list(xs)  # the common case, kept cheap for eager mode
    if len(xs) == 2:
        # tensor <op> Python number (`x + 1`, `lr * g`): the tensor's dtype usually wins.
        a, b = xs
        tensor_first = type(a) in _TENSORS and type(b) in _SCALARS
        if tensor_first or (type(b) in _TENSORS and type(a) in _SCALARS):
            t, number = (a, b) if tensor_first else (b, a)
            dtype = result_dtype([t.dtype], [number])
            if dtype == t.dtype and (not to_float or is_float(dtype)):
                scalar = _scalar(number, dtype)
                return [t, scalar] if tensor_first else [scalar, t]
    xs = [_as_operand(x) for x in xs]
    strong = [x.dtype if isinstance(x, Tensor) else x.dtype.name for x in xs
              if not isinstance(x, _SCALARS)]
    weak = [x for x in xs if isinstance(x, _SCALARS)]
    dtype = result_dtype(strong, weak)
    if to_float and not is_float(dtype):
        dtype = "float64"
    return [_to_dtype(x, dtype) for x in xs]


def _to_dtype(x, dtype):
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else cast(x, dtype)
    if isinstance(x, _SCALARS):
        return _scalar(x, dtype)
    return np.asarray(x, dtype=dtype)


# (type, value, dtype, backend) -> eager Tensor: `x + 2` in a loop converts 2 only once.
_scalars: dict = {}


def _scalar(value, dtype):
    """A Python number as an operand of `dtype`: a cached eager tensor on the current
    backend (native tensors are never modified in place, so sharing one is safe)."""
    if _builder.get() is not None:
        _check_int_range(value, dtype)
        return np.asarray(value, dtype=dtype)  # becomes a constant node
    backend = current_backend()
    key = (type(value), value, dtype, backend.name)
    scalar = _scalars.get(key)
    if scalar is None:
        _check_int_range(value, dtype)
        array = np.asarray(value, dtype=dtype)
        scalar = Tensor((), dtype, backend=backend, native=backend.to_native(array), array=array)
        if len(_scalars) < 4096:
            _scalars[key] = scalar
    return scalar


def _check_int_range(value, dtype: str) -> None:
    """`int64 tensor + 2**70` must say so, not fail deep inside NumPy's conversion."""
    if type(value) is int and dtype.startswith("int"):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(
                f"the integer {value} at {user_source()} does not fit in {dtype} (the dtype "
                f"of the tensor it meets: {info.min} .. {info.max}); cast the tensor to a "
                "wider or float dtype first (ug.cast(x, 'float64')), or use a float"
            )


def _axis(axis, ndim: int, op: str) -> int:
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim if ndim else 0


def _axes(axis, ndim: int, op: str):
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(_axis(a, ndim, op) for a in axes))


def _tensor_or_array(x):
    x = _as_operand(x)
    if isinstance(x, _SCALARS):
        from unigraph.tensor import tensor

        return tensor(x)
    return x


# -- elementwise -------------------------------------------------------------------------
def _binary(op: str, to_float=False):
    def function(x, y):
        a, b = _promote(x, y, to_float=to_float)
        return apply(op, [a, b], {})

    function.__name__ = op
    function.__doc__ = f"Elementwise `{op}` with NumPy broadcasting and promotion."
    return function


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div", to_float=True)
pow = _binary("pow", to_float=True)
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")


def logical_and(x, y):
    return apply("logical_and", _promote(x, y), {})


def logical_or(x, y):
    return apply("logical_or", _promote(x, y), {})


def _unary(op: str, to_float=False):
    def function(x):
        (a,) = _promote(x, to_float=to_float)
        return apply(op, [a], {})

    function.__name__ = op
    function.__doc__ = f"Elementwise `{op}`."
    return function


neg = _unary("neg")
abs = _unary("abs")
exp = _unary("exp", to_float=True)
log = _unary("log", to_float=True)
sqrt = _unary("sqrt", to_float=True)
logical_not = _unary("logical_not")
relu = _unary("relu")
sigmoid = _unary("sigmoid", to_float=True)
tanh = _unary("tanh", to_float=True)


def where(condition, x, y):
    """`x` where `condition` is true, else `y` (broadcast)."""
    (c,) = _promote(condition)
    a, b = _promote(x, y)
    return apply("where", [c, a, b], {})


def cast(x, dtype):
    """`x` converted to `dtype` (NumPy's `astype`)."""
    dtype = as_dtype(dtype)
    return apply("cast", [_tensor_or_array(x)], {"dtype": dtype})


# -- linear algebra -----------------------------------------------------------------------
def matmul(a, b):
    """Matrix product; batch dimensions broadcast (`a @ b`)."""
    x, y = _promote(a, b, to_float=True)
    return apply("matmul", [x, y], {})


# -- reductions ---------------------------------------------------------------------------
def _reduction(op: str, to_float=False):
    def function(x, axis=None, keepdims=False):
        (a,) = _promote(x, to_float=to_float)
        ndim = len(np.shape(a)) if not isinstance(a, Tensor) else a.ndim
        return apply(op, [a], {"axis": _axes(axis, ndim, op), "keepdims": bool(keepdims)})

    function.__name__ = op
    function.__doc__ = f"`{op}` over `axis` (None: all axes)."
    return function


sum = _reduction("sum")
mean = _reduction("mean", to_float=True)
max = _reduction("max")
min = _reduction("min")


def argmax(x, axis=-1, keepdims=False):
    """Index of the first maximum along `axis` (int64)."""
    (a,) = _promote(x)
    return apply("argmax", [a], {"axis": _axis(axis, a.ndim, "argmax"),
                                 "keepdims": bool(keepdims)})


# -- shape --------------------------------------------------------------------------------
def reshape(x, shape):
    """`x` with a new shape; one dimension may be -1."""
    x = _tensor_or_array(x)
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    size = int(np.prod([d for d in x.shape]))
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one dimension may be -1, got {list(shape)}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape {list(x.shape)} into {list(shape)}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return apply("reshape", [x], {"shape": shape})


def transpose(x, perm=None):
    """Permute dimensions (default: reverse them)."""
    x = _tensor_or_array(x)
    ndim = len(x.shape)
    perm = tuple(reversed(range(ndim))) if perm is None else tuple(_axis(p, ndim, "transpose")
                                                                   for p in perm)
    return apply("transpose", [x], {"perm": perm})


def concat(xs, axis=0):
    """Join tensors along an existing axis."""
    xs = _promote(*xs)
    return apply("concat", xs, {"axis": _axis(axis, len(xs[0].shape), "concat")})


def stack(xs, axis=0):
    """Join tensors along a new axis."""
    xs = _promote(*xs)
    return apply("stack", xs, {"axis": _axis(axis, len(xs[0].shape) + 1, "stack")})


def squeeze(x, axis=None):
    """Remove size-1 dimensions (all of them when `axis` is None)."""
    x = _tensor_or_array(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = _axes(axis, len(x.shape), "squeeze")
    return apply("squeeze", [x], {"axis": axes})


def expand_dims(x, axis):
    """Insert a size-1 dimension at `axis`."""
    x = _tensor_or_array(x)
    return apply("expand_dims", [x], {"axis": _axis(axis, len(x.shape) + 1, "expand_dims")})


def broadcast_to(x, shape):
    x = _tensor_or_array(x)
    return apply("broadcast_to", [x], {"shape": tuple(int(d) for d in shape)})


def take(x, indices, axis=0):
    """Gather entries of `x` along `axis` at integer `indices`."""
    x = _tensor_or_array(x)
    indices = _tensor_or_array(indices)
    return apply("take", [x, indices], {"axis": _axis(axis, len(x.shape), "take")})


gather = take


def one_hot(indices, depth, dtype="float32"):
    """`indices.shape + (depth,)` tensor with ones at the indices."""
    return apply("one_hot", [_tensor_or_array(indices)],
                 {"depth": int(depth), "dtype": as_dtype(dtype)})


def slice(x, begin, end, stride=None):
    """Static slice `x[begin:end:stride]` per dimension (resolved like Python slices)."""
    x = _tensor_or_array(x)
    stride = stride or (1,) * len(x.shape)
    return getitem(x, tuple(builtins.slice(b, e, s) for b, e, s in zip(begin, end, stride)))


def getitem(x, index):
    """`x[index]` for ints, slices with positive steps, `...`, `None`, or an int tensor."""
    if isinstance(index, Tensor) or isinstance(index, np.ndarray):
        return take(x, index, axis=0)
    index = index if isinstance(index, tuple) else (index,)
    if builtins.sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(i is not None and i is not Ellipsis for i in index)
    if used > len(x.shape):
        raise IndexError(f"too many indices for a tensor of rank {len(x.shape)}")
    fill = (builtins.slice(None),) * (len(x.shape) - used)
    at = next((i for i, item in enumerate(index) if item is Ellipsis), len(index))
    index = index[:at] + fill + index[at + 1:]
    begin, end, stride, squeeze_axes, new_axes = [], [], [], [], []
    dim = out_dim = 0
    for item in index:
        if item is None:
            new_axes.append(out_dim)
            out_dim += 1
            continue
        size = x.shape[dim]
        if isinstance(item, int | np.integer):
            if size is None:
                raise IndexError("cannot index a dimension of unknown size with an int")
            if not -size <= item < size:
                raise IndexError(
                    f"index {item} is out of bounds for dimension {dim} of size {size}")
            item = int(item) % size
            begin.append(item), end.append(item + 1), stride.append(1)
            squeeze_axes.append(dim)
        elif isinstance(item, builtins.slice):
            out_dim += 1
            if size is None and item != builtins.slice(None):
                raise IndexError("cannot slice a dimension of unknown size with bounds")
            if item.step is not None and item.step <= 0:
                raise IndexError(
                    f"slice step {item.step} is not supported: only positive steps; "
                    "reverse with ug.take and a reversed index tensor"
                )
            if size is None:
                begin.append(0), end.append(-1), stride.append(1)
            else:
                start, stop, step = item.indices(size)
                begin.append(start), end.append(builtins.max(stop, start)), stride.append(step)
        else:
            raise IndexError(f"unsupported index {item!r}: use ints, slices, ..., None")
        dim += 1
    out = x
    full = all(b == 0 and (e == s or s is None) and st == 1
               for b, e, st, s in zip(begin, end, stride, x.shape))
    if not full:
        out = apply("slice", [out], {"begin": tuple(begin), "end": tuple(end),
                                     "stride": tuple(stride)})
    if squeeze_axes:
        out = apply("squeeze", [out], {"axis": tuple(squeeze_axes)})
    for position in new_axes:
        out = apply("expand_dims", [out], {"axis": position})
    return out


# -- neural-network ops -------------------------------------------------------------------
def softmax(x, axis=-1):
    (a,) = _promote(x, to_float=True)
    return apply("softmax", [a], {"axis": _axis(axis, a.ndim, "softmax")})


def log_softmax(x, axis=-1):
    (a,) = _promote(x, to_float=True)
    return apply("log_softmax", [a], {"axis": _axis(axis, a.ndim, "log_softmax")})


def _pair(value, name: str) -> tuple:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return tuple(int(v) for v in pair)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution, NCHW input, weight [out, in/groups, kh, kw], symmetric padding, and
    an optional bias [out] added per output channel (in the framework's fused conv kernel).

    >>> y = ug.conv2d(x, w, b, padding=1)   # x [N, C, H, W], w [O, C, 3, 3], b [O]
    """
    operands = (x, weight) if bias is None else (x, weight, bias)
    inputs = _promote(*operands, to_float=True)
    attrs = {"stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
             "dilation": _pair(dilation, "dilation"), "groups": int(groups)}
    return apply("conv2d", list(inputs), attrs)


def _pool(op: str):
    def function(x, kernel_size, stride=None, padding=0):
        (a,) = _promote(x, to_float=True)
        kernel = _pair(kernel_size, "kernel_size")
        attrs = {"kernel": kernel, "stride": _pair(stride, "stride") if stride else kernel,
                 "padding": _pair(padding, "padding")}
        return apply(op, [a], attrs)

    function.__name__ = op
    function.__doc__ = f"`{op}` over NCHW input; stride defaults to the kernel size."
    return function


max_pool2d = _pool("max_pool2d")
avg_pool2d = _pool("avg_pool2d")


def sparse_softmax_cross_entropy(logits, labels):
    """Per-example `-log softmax(logits)[label]`; logits [N, C], integer labels [N]."""
    (a,) = _promote(logits, to_float=True)
    return apply("sparse_softmax_cross_entropy", [a, _tensor_or_array(labels)], {})


def constant(value, dtype=None) -> Tensor:
    """A constant tensor (a `constant` node when tracing)."""
    from unigraph.tensor import tensor

    return tensor(value, dtype)
