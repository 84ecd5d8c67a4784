"""The public op functions (`ug.add`, `ug.matmul`, `ug.sum`, ...).

Each one puts its arguments in the form the op record expects (promoted dtypes, normalised
axes and shapes) and hands over to `dispatch.apply`. The meaning of every op lives in its
record in `unigraph/ops/`.
"""

from __future__ import annotations

import builtins
import sys

import numpy as np

from unigraph.dispatch import apply, current_backend
from unigraph.dtypes import as_dtype, is_float, result_dtype
from unigraph.errors import ShapeError, TracingError
from unigraph.ops import OPS
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
    strong, weak, weak_dtypes = [], [], []
    for x in xs:
        if isinstance(x, _SCALARS):
            weak.append(x)
        elif _is_weak_tensor(x):
            weak_dtypes.append(x.dtype)
        else:
            strong.append(x.dtype if isinstance(x, Tensor) else x.dtype.name)
    if strong:
        # A WeakTensor (autograph's loop counters) promotes like a Python number of its kind.
        weak = [_PYTHON_KIND[x[0]] for x in weak_dtypes] + weak
    else:
        strong = weak_dtypes
    dtype = result_dtype(strong, weak)
    if to_float and not is_float(dtype):
        dtype = "float64"
    return [_to_dtype(x, dtype) for x in xs]


# The Python number each kind of dtype stands for, keyed by the name's first letter.
_PYTHON_KIND = {"b": True, "i": 1, "f": 1.0}


def _is_weak_tensor(x) -> bool:
    """A `unigraph.autograph.weak.WeakTensor` (only reached off the fast path; the module is
    loaded whenever one exists, so a never-used autograph costs no import)."""
    if type(x) in _TENSORS or not isinstance(x, Tensor):
        return False
    weak = sys.modules.get("unigraph.autograph.weak")
    return weak is not None and isinstance(x, weak.WeakTensor)


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


def _record_doc(op: str, note: str = "") -> str:
    """A public function's docstring from its op record: the record's text and example."""
    record = OPS[op]
    call, _, result = record.example.partition("  # ")
    parts = [record.doc, note, f"Example::\n\n    >>> {call}\n    {result}"]
    return "\n\n".join(part for part in parts if part)


# -- elementwise -------------------------------------------------------------------------
def _binary(op: str, to_float=False):
    def function(x, y):
        a, b = _promote(x, y, to_float=to_float)
        return apply(op, [a, b], {})

    function.__name__ = op
    function.__doc__ = _record_doc(op, "Operands broadcast and promote as in NumPy.")
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
    function.__doc__ = _record_doc(op)
    return function


neg = _unary("neg")
abs = _unary("abs")
exp = _unary("exp", to_float=True)
log = _unary("log", to_float=True)
sqrt = _unary("sqrt", to_float=True)
mod = _binary("mod")
floor_divide = _binary("floor_divide")
atan2 = _binary("atan2", to_float=True)
# NumPy's floor of an int array is a float array: ints become float64 here too.
floor = _unary("floor", to_float=True)
ceil = _unary("ceil", to_float=True)
round = _unary("round", to_float=True)
sin = _unary("sin", to_float=True)
cos = _unary("cos", to_float=True)
tan = _unary("tan", to_float=True)
asin = _unary("asin", to_float=True)
acos = _unary("acos", to_float=True)
atan = _unary("atan", to_float=True)
sinh = _unary("sinh", to_float=True)
cosh = _unary("cosh", to_float=True)
erf = _unary("erf", to_float=True)
softplus = _unary("softplus", to_float=True)
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
    function.__doc__ = _record_doc(op, "`axis`: an int, a tuple of ints or None (all axes).")
    return function


sum = _reduction("sum")
mean = _reduction("mean", to_float=True)
max = _reduction("max")
min = _reduction("min")
prod = _reduction("prod")


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
    """Gather entries of `x` along `axis` at integer `indices`; a negative index counts from
    the end, as in NumPy (-1 is the last).

    Example::

        >>> ug.take([10, 20, 30], [2, -1, 0])
        [30, 30, 10]
    """
    x = _tensor_or_array(x)
    axis = _axis(axis, len(x.shape), "take")
    if isinstance(indices, list | tuple):
        from unigraph.tensor import as_array

        indices = as_array(indices, what="ug.take's indices")
    indices = _tensor_or_array(indices)
    size = x.shape[axis]
    if isinstance(indices, np.ndarray):
        if size is not None and indices.dtype.kind in "iu":
            indices = np.where(indices < 0, indices + size, indices)  # known now: no ops
    elif size is not None and indices.dtype.startswith("int"):
        # The op takes [0, n): map the negative ones (three ops, on every target).
        indices = where(indices < 0, indices + size, indices)
    return apply("take", [x, indices], {"axis": axis})


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
    """`x[index]` as in NumPy for ints, slices with positive steps, `...`, `None`, one
    integer array (a list, NumPy array or int tensor: a gather along its axis) and, in eager
    mode, a boolean mask (the selected elements, in row-major order).

    Example::

        >>> x = ug.tensor([[1, 2, 3], [4, 5, 6]])
        >>> x[:, [2, 0]], x[x > 2]
        ([[3, 1], [6, 4]], [3, 4, 5, 6])
    """
    if _is_array_index(index):
        index = _array_index(index)
        if index.dtype == "bool":
            return _masked(x, index)
        return take(x, index, axis=0)
    index = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, item in enumerate(index) if _is_array_index(item)]
    if arrays:
        return _gather_in_tuple(x, index, arrays)
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
            raise IndexError(f"unsupported index {item!r} at {user_source()}: use ints, "
                             "slices, ..., None, one integer array or a boolean mask")
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


# -- indexing with arrays -----------------------------------------------------------------
def _is_array_index(item) -> bool:
    return isinstance(item, Tensor | np.ndarray | list)


def _array_index(item):
    """An array index as an int/bool NumPy array (lists) or a Tensor, checked."""
    if isinstance(item, list):
        from unigraph.tensor import as_array

        item = as_array(item, what="an index")
    dtype = item.dtype if isinstance(item, Tensor) else item.dtype.name
    if not (dtype == "bool" or dtype.startswith("int")):
        raise IndexError(f"an index at {user_source()} is {dtype}: index with ints, an int "
                         "array or a boolean mask (cast floats first: ug.cast(i, 'int64'))")
    return item


def _masked(x, mask):
    """x[mask] for a boolean mask over x's leading dims: known only from the mask's values,
    so eager only (the values are fetched, as NumPy and torch do)."""
    x = _tensor_or_array(x)
    if isinstance(mask, Tensor) and mask.is_symbolic:
        raise TracingError(
            f"x[mask] with a boolean tensor at {user_source()}: in a static graph the number "
            "of selected elements is not known while tracing; keep the shape with "
            "ug.where(mask, x, 0) (then ug.sum(...) / ug.sum(ug.cast(mask, x.dtype)) for a "
            "masked mean), or select in eager mode"
        )
    values = mask._host() if isinstance(mask, Tensor) else mask
    rank = values.ndim
    if tuple(x.shape[:rank]) != values.shape:
        raise IndexError(f"a boolean mask of shape {list(values.shape)} at {user_source()} "
                         f"does not match the leading dims of a {list(x.shape)} tensor")
    rows = reshape(x, (-1, *x.shape[rank:]))
    return take(rows, np.flatnonzero(values), axis=0)


def _gather_in_tuple(x, index, arrays):
    """x[..., idx, ...] with one integer array among ints and slices: slice first, then
    gather along the axis the array indexes."""
    if len(arrays) > 1:
        raise IndexError(
            f"an index at {user_source()} has {len(arrays)} arrays: unigraph takes one array "
            "per index (NumPy's broadcast of several is ambiguous to read); index twice, "
            "e.g. x[rows][:, cols], or flatten and use one ug.take")
    position = arrays[0]
    indices = _array_index(index[position])
    if indices.dtype == "bool":
        raise IndexError(f"a boolean mask at {user_source()} must be the whole index (x[mask])")
    if any(item is Ellipsis for item in index[:position]):
        at = index.index(Ellipsis)
        used = builtins.sum(i is not None and i is not Ellipsis for i in index)
        fill = (builtins.slice(None),) * (len(x.shape) - used)
        index = index[:at] + fill + index[at + 1:]
        position = at + len(fill) + (position - at - 1)
    # The output axis of the array: one per slice or None before it (ints drop theirs).
    axis = builtins.sum(not isinstance(i, int | np.integer) for i in index[:position])
    basic = getitem(x, index[:position] + (builtins.slice(None),) + index[position + 1:])
    return take(basic, indices, axis=axis)


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


# -- composed from the op records above (exact: each says which records it uses) ----------
def _known_shape(x, what: str) -> tuple:
    if None in x.shape:
        raise ShapeError(f"{what}: the shape {list(x.shape)} of the tensor at {user_source()} "
                         "has a dim known only at run time; this function needs every dim")
    return tuple(x.shape)


def clip(x, min=None, max=None):
    """x limited to [min, max] (either may be None): `ug.minimum(ug.maximum(x, min), max)`,
    so NaN stays NaN and at a bound the gradient is split as those ops split it.

    Example::

        >>> ug.clip([-2.0, 0.5, 3.0], 0.0, 1.0)
        [0.0, 0.5, 1.0]
    """
    out = x
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return _tensor_or_array(out)


def sign(x):
    """-1, 0 or 1 by the sign of x (NaN stays NaN), in x's dtype; gradient 0. Composed of
    `greater`, `less`, `mul` and `where`.

    Example::

        >>> ug.sign([-2.0, 0.0, 3.0])
        [-1.0, 0.0, 1.0]
    """
    (a,) = _promote(x)
    if a.dtype == "bool":
        raise TypeError(f"ug.sign at {user_source()} takes numbers, not bools")
    return where(a > 0, 1, where(a < 0, -1, a * 0))  # a * 0: NaN stays NaN, gradient 0


def gelu(x, approximate="none"):
    """GELU: x * Phi(x), with `approximate="none"` 0.5 x (1 + erf(x / sqrt(2))), or
    `"tanh"` 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (torch's two forms). Composed
    of `erf` or `tanh` and arithmetic.

    Example::

        >>> ug.gelu([0.0, 1.0])
        [0.0, 0.8413447]
    """
    (a,) = _promote(x, to_float=True)
    if approximate == "none":
        return 0.5 * a * (1.0 + erf(a * 0.7071067811865476))
    if approximate == "tanh":
        return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))
    raise ValueError(f"gelu: approximate={approximate!r}; use 'none' or 'tanh'")


def silu(x):
    """SiLU (swish): x * sigmoid(x).

    Example::

        >>> ug.silu([0.0, 1.0])
        [0.0, 0.7310586]
    """
    (a,) = _promote(x, to_float=True)
    return a * sigmoid(a)


def leaky_relu(x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x (gradient negative_slope at 0, as torch).

    Example::

        >>> ug.leaky_relu([-2.0, 3.0], 0.1)
        [-0.2, 3.0]
    """
    (a,) = _promote(x, to_float=True)
    return where(a > 0, a, a * negative_slope)


def elu(x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1).

    Example::

        >>> ug.elu([-1.0, 2.0])
        [-0.63212055, 2.0]
    """
    (a,) = _promote(x, to_float=True)
    # exp of min(x, 0): the branch where does not pick never overflows (no NaN gradient).
    return where(a > 0, a, alpha * (exp(minimum(a, 0.0)) - 1.0))


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def selu(x):
    """scale * elu(x, alpha) with SELU's constants (alpha 1.6732632, scale 1.0507010).

    Example::

        >>> ug.selu([0.0, 1.0])
        [0.0, 1.050701]
    """
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def _count(x, axis, op: str) -> int:
    shape = _known_shape(x, op)
    axes = range(len(shape)) if axis is None else axis
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def var(x, axis=None, keepdims=False, ddof=0):
    """Variance over `axis` (None: all): mean((x - mean(x))^2) * n / (n - ddof), NumPy's
    default ddof=0 (torch's is 1). Composed of `mean`, `sub`, `mul` and `sum`.

    Example::

        >>> ug.var([1.0, 2.0, 3.0, 4.0])
        1.25
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "var")
    centred = a - mean(a, axes, keepdims=True)
    return sum(centred * centred, axes, keepdims) / float(_count(a, axes, "var") - ddof)


def std(x, axis=None, keepdims=False, ddof=0):
    """Standard deviation, sqrt(var(x, axis, keepdims, ddof)) (NumPy's default ddof=0).

    Example::

        >>> ug.std([1.0, 3.0])
        1.0
    """
    return sqrt(var(x, axis, keepdims, ddof))


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis`, without overflow: m + log(sum(exp(x - m))) with m the
    max (its gradient cancels: the result's is softmax(x)). A slice holding +inf gives NaN,
    as log_softmax.

    Example::

        >>> ug.logsumexp([1000.0, 1000.0])
        1000.6931
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "logsumexp")
    peak = max(a, axes, keepdims=True)
    out = log(sum(exp(a - peak), axes, keepdims=True)) + peak
    if keepdims:
        return out
    return squeeze(out, tuple(range(a.ndim)) if axes is None else axes)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norm of x over `axis` (None: all elements): ord None or 2, sqrt(sum(x^2)) (the
    Frobenius norm of a matrix); 1, sum(|x|); inf, max(|x|). Gradient NaN at 0 for ord 2.

    Example::

        >>> ug.norm([3.0, 4.0])
        5.0
    """
    (a,) = _promote(x, to_float=True)
    axes = _axes(axis, a.ndim, "norm")
    if ord in (None, 2):
        return sqrt(sum(a * a, axes, keepdims))
    if ord == 1:
        return sum(abs(a), axes, keepdims)
    if ord == np.inf:
        return max(abs(a), axes, keepdims)
    raise ValueError(f"norm: ord={ord!r} at {user_source()}; use None, 1, 2 or inf")


def cumsum(x, axis=None):
    """Running sum along `axis` (None: over the flattened x, as NumPy).

    Example::

        >>> ug.cumsum([[1, 2], [3, 4]], axis=1)
        [[1, 3], [3, 7]]
    """
    (a,) = _promote(x)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    return apply("cumsum", [a], {"axis": _axis(axis, a.ndim, "cumsum")})


cumsum.__doc__ = _record_doc("cumsum", "`axis` None: over the flattened x, as NumPy.")


def einsum(equation, *operands):
    """Einstein summation (see the op record), operands promoted to one float dtype."""
    equation = equation.replace(" ", "")
    if "->" not in equation:
        letters = equation.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        equation = f"{equation}->{output}"
    inputs = _promote(*operands, to_float=True)
    return apply("einsum", list(inputs), {"equation": equation})


einsum.__doc__ = _record_doc("einsum")


# -- shapes, composed ---------------------------------------------------------------------
def flatten(x, start_axis=0, end_axis=-1):
    """x with the axes start_axis..end_axis merged into one (default: all, a 1-D result);
    a `reshape`.

    Example::

        >>> ug.flatten([[1, 2], [3, 4]])
        [1, 2, 3, 4]
    """
    x = _tensor_or_array(x)
    if not x.shape:
        return reshape(x, (1,))
    start = _axis(start_axis, len(x.shape), "flatten")
    end = _axis(end_axis, len(x.shape), "flatten")
    shape = _known_shape(x, "flatten")
    merged = int(np.prod(shape[start:end + 1], dtype=np.int64))
    return reshape(x, shape[:start] + (merged,) + shape[end + 1:])


unsqueeze = expand_dims


def split(x, indices_or_sections, axis=0):
    """A list of pieces of x along `axis`, as NumPy's split: an int n gives n equal pieces
    (the size must divide), a list gives the split points. Each piece is a `slice`.

    Example::

        >>> ug.split([1, 2, 3, 4, 5], [2])
        [[1, 2], [3, 4, 5]]
    """
    x = _tensor_or_array(x)
    axis = _axis(axis, len(x.shape), "split")
    size = _known_shape(x, "split")[axis]
    if isinstance(indices_or_sections, int):
        if indices_or_sections <= 0 or size % indices_or_sections:
            raise ShapeError(f"split: axis {axis} of size {size} does not split into "
                             f"{indices_or_sections} equal pieces (at {user_source()}); pass "
                             "the split points as a list instead")
        step = size // indices_or_sections
        bounds = list(range(step, size, step)) if step else [0] * (indices_or_sections - 1)
    else:
        bounds = [int(b) for b in indices_or_sections]
    edges = [0, *bounds, size]
    lead = (builtins.slice(None),) * axis
    return [getitem(x, lead + (builtins.slice(a, builtins.max(a, b)),))
            for a, b in zip(edges[:-1], edges[1:])]


def flip(x, axis=None):
    """x reversed along `axis` (an int, a tuple, or None: every axis); a `take` with the
    reversed positions.

    Example::

        >>> ug.flip([[1, 2], [3, 4]], axis=1)
        [[2, 1], [4, 3]]
    """
    x = _tensor_or_array(x)
    axes = range(len(x.shape)) if axis is None else _axes(axis, len(x.shape), "flip")
    for a in axes:
        size = _known_shape(x, "flip")[a]
        x = take(x, np.arange(size - 1, -1, -1), axis=a)
    return x


def tile(x, reps):
    """x repeated `reps[i]` times along axis i, as NumPy's tile (a shorter `reps` applies
    to the last axes; a longer one adds leading axes); a `take` per repeated axis.

    Example::

        >>> ug.tile([1, 2], 2)
        [1, 2, 1, 2]
    """
    x = _tensor_or_array(x)
    reps = (reps,) if isinstance(reps, int) else tuple(int(r) for r in reps)
    if len(reps) > len(x.shape):
        x = reshape(x, (1,) * (len(reps) - len(x.shape)) + _known_shape(x, "tile"))
    reps = (1,) * (len(x.shape) - len(reps)) + reps
    for a, r in enumerate(reps):
        if r != 1:
            size = _known_shape(x, "tile")[a]
            x = take(x, np.tile(np.arange(size), r), axis=a)
    return x


def _pad_widths(pad_width, rank: int) -> list:
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64).reshape(-1, 2)
                             if np.ndim(pad_width) else np.full((1, 2), pad_width), (rank, 2))
    if (widths < 0).any():
        raise ValueError(f"pad: widths {pad_width!r} at {user_source()} must be >= 0")
    return [tuple(int(w) for w in pair) for pair in widths]


def pad(x, pad_width, mode="constant", value=0):
    """x padded as NumPy's pad: `pad_width` an int, a (before, after) pair, or one pair per
    axis; `mode` "constant" (with `value`; `concat` with `full` blocks), "reflect" (mirror
    without the edge; each width below the axis size) or "edge" (repeat the edge); the
    last two are one `take` per padded axis.

    Example::

        >>> ug.pad([1, 2, 3], (2, 1), mode="reflect")
        [3, 2, 1, 2, 3, 2]
    """
    x = _tensor_or_array(x)
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad: mode {mode!r} at {user_source()}; use 'constant', 'reflect' "
                         "or 'edge'")
    for axis, (before, after) in enumerate(_pad_widths(pad_width, len(x.shape))):
        if not before and not after:
            continue
        shape = _known_shape(x, "pad")
        size = shape[axis]
        if mode == "constant":
            parts = [full(shape[:axis] + (w,) + shape[axis + 1:], value, x.dtype)
                     for w in (before, after)]
            x = concat([parts[0], x, parts[1]], axis=axis)
            continue
        if mode == "reflect" and (before >= size or after >= size):
            raise ValueError(f"pad: reflect widths ({before}, {after}) at {user_source()} "
                             f"must be below the size {size} of axis {axis}")
        if mode == "edge" and size == 0:
            raise ValueError(f"pad: axis {axis} is empty, it has no edge to repeat")
        if mode == "reflect":
            positions = [*range(before, 0, -1), *range(size), *range(size - 2, size - 2 - after,
                                                                      -1)]
        else:
            positions = [0] * before + list(range(size)) + [size - 1] * after
        x = take(x, np.asarray(positions, dtype=np.int64), axis=axis)
    return x


# -- creation -----------------------------------------------------------------------------
def _default_dtype(value) -> str:
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int64"
    return "float32"


def full(shape, value, dtype=None):
    """A tensor of `shape` filled with `value`.

    Example::

        >>> ug.full((2, 2), 7)
        [[7, 7], [7, 7]]
    """
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(d) for d in shape)
    dtype = as_dtype(dtype) if dtype is not None else _default_dtype(value)
    # The value as the Python number of the dtype (`full(..., 1.5, "int32")` fills 1).
    value = np.asarray(value).astype(dtype).item()
    return apply("full", [], {"shape": shape, "value": value, "dtype": dtype})


full.__doc__ = _record_doc("full")


def zeros(shape, dtype="float32"):
    """A tensor of zeros (`ug.full(shape, 0, dtype)`).

    Example::

        >>> ug.zeros((2,))
        [0.0, 0.0]
    """
    return full(shape, 0, dtype)


def ones(shape, dtype="float32"):
    """A tensor of ones (`ug.full(shape, 1, dtype)`).

    Example::

        >>> ug.ones((2,), "int32")
        [1, 1]
    """
    return full(shape, 1, dtype)


def full_like(x, value, dtype=None):
    """A tensor of x's shape (every dim known) and dtype (or `dtype`) filled with `value`.

    Example::

        >>> ug.full_like(ug.tensor([1.0, 2.0]), 3)
        [3.0, 3.0]
    """
    return _like(x, value, dtype)


def zeros_like(x, dtype=None):
    """Zeros of x's shape and dtype (or `dtype`): `ug.full_like(x, 0, dtype)`."""
    return _like(x, 0, dtype)


def ones_like(x, dtype=None):
    """Ones of x's shape and dtype (or `dtype`): `ug.full_like(x, 1, dtype)`."""
    return _like(x, 1, dtype)


def _like(x, value, dtype):
    x = _tensor_or_array(x)
    own = x.dtype if isinstance(x, Tensor) else x.dtype.name
    return full(_known_shape(x, "full_like"), value, own if dtype is None else dtype)


def _constant_node(array: np.ndarray) -> Tensor:
    """A computed constant: a `constant` node when tracing, an eager tensor otherwise."""
    if _builder.get() is not None:
        return apply("constant", [], {"value": array})
    from unigraph.tensor import tensor

    return tensor(array)


def arange(start, stop=None, step=1, dtype=None):
    """start, start + step, ... below stop, as NumPy's arange (one argument: 0 to it). The
    dtype is int64 for ints, float32 if any bound is a float, or `dtype`; the values are
    computed in float64 and rounded once. A `constant`.

    Example::

        >>> ug.arange(1, 7, 2)
        [1, 3, 5]
    """
    if stop is None:
        start, stop = 0, start
    bounds = (start, stop, step)
    if dtype is None:
        dtype = "int64" if all(isinstance(b, int | np.integer) for b in bounds) else "float32"
    dtype = as_dtype(dtype)
    wide = "int64" if dtype.startswith("int") else "float64"
    return _constant_node(np.arange(start, stop, step, dtype=wide).astype(dtype))


def linspace(start, stop, num=50, endpoint=True, dtype="float32"):
    """`num` evenly spaced values from start to stop (included unless endpoint=False), as
    NumPy's linspace, computed in float64 and rounded once to `dtype`. A `constant`.

    Example::

        >>> ug.linspace(0.0, 1.0, 5)
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    values = np.linspace(start, stop, int(num), endpoint=endpoint)
    return _constant_node(values.astype(as_dtype(dtype)))


def eye(n, m=None, k=0, dtype="float32"):
    """The n x m identity (ones on diagonal k), as NumPy's eye. A `constant`.

    Example::

        >>> ug.eye(2)
        [[1.0, 0.0], [0.0, 1.0]]
    """
    return _constant_node(np.eye(int(n), None if m is None else int(m), int(k),
                                 dtype=as_dtype(dtype)))


def argmin(x, axis=-1, keepdims=False):
    """Index (int64) of the first minimum along `axis`; a NaN counts as the minimum, as
    NumPy. `argmax` of the order-reversed x: -x for floats, -x - 1 for ints (no overflow).

    Example::

        >>> ug.argmin([[3.0, 1.0, 1.0], [0.0, 2.0, 5.0]], axis=1)
        [1, 0]
    """
    (a,) = _promote(x)
    if a.dtype == "bool":
        a = cast(a, "int32")
    return argmax(-a if is_float(a.dtype) else -a - 1, axis, keepdims)


# -- functional updates -------------------------------------------------------------------
def index_update(x, index, value, accumulate=False):
    """A copy of x with `value` written (or, with accumulate, added) at `index`: what
    `x.at[index].set(value)` / `.add(value)` do. The index is any NumPy index known while
    tracing (ints, slices, ..., None, int arrays, boolean masks; eager tensors are read);
    `value` broadcasts to the selection and takes x's dtype. Where an index repeats, set
    keeps the last value and add sums them all, in order. Built from `take` (the values
    laid out over x) and `where`, so gradients reach x and value.

    A traced int scalar as the whole index (a loop counter writing row i of a buffer) is
    taken too: a `one_hot` row mask and a `where` (an index outside [-n, n) changes nothing).

    Example::

        >>> ug.zeros(4).at[[0, 2, 2]].add(1.0)
        [1.0, 0.0, 2.0, 0.0]
    """
    x = _tensor_or_array(x)
    shape = _known_shape(x, "x.at[...]")
    dtype = x.dtype if isinstance(x, Tensor) else x.dtype.name
    if isinstance(index, Tensor) and index.is_symbolic and index.shape == ():
        return _update_row(x, index, value, accumulate, dtype)
    slots = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    try:
        chosen = slots[_concrete_index(index)]  # the flat position in x of each update
    except IndexError as error:
        raise IndexError(f"x.at[...] at {user_source()}: {error}") from None
    targets = chosen.reshape(-1)
    if not targets.size:
        return x
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    updates = reshape(broadcast_to(value, chosen.shape), (-1,))
    # Layer k holds the k-th occurrence of each repeated position: within a layer every
    # position is written once, so a gather and a where place it.
    order = np.argsort(targets, kind="stable")
    first = np.searchsorted(targets[order], targets[order])
    rank = np.empty_like(targets)
    rank[order] = np.arange(targets.size) - first
    layers = range(int(rank.max()) + 1) if accumulate else [None]
    out = x
    for layer in layers:
        source = np.full(slots.size, -1, dtype=np.int64)
        picked = np.flatnonzero(rank == layer) if accumulate else np.arange(targets.size)
        source[targets[picked]] = picked  # for set, a repeated position keeps the last
        hit = (source >= 0).reshape(shape)
        placed = take(updates, np.maximum(source, 0).reshape(shape))
        out = where(hit, out + placed if accumulate else placed, out)
    return out


def _update_row(x, row, value, accumulate, dtype):
    """x.at[row].set/add(value) for a traced int scalar `row`: where over a one_hot mask."""
    if not row.dtype.startswith("int"):
        raise IndexError(f"x.at[i] at {user_source()}: i is {row.dtype}; index with an int")
    size = x.shape[0] if x.shape else None
    if size is None:
        raise IndexError(f"x.at[i] at {user_source()} on a 0-d tensor: there is no row")
    row = where(row < 0, row + size, row)
    mask = reshape(one_hot(row, size, "bool"), (size,) + (1,) * (len(x.shape) - 1))
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    value = expand_dims(broadcast_to(value, x.shape[1:]), 0)  # one row, broadcast over rows
    return where(mask, x + value if accumulate else value, x)


def _concrete_index(index):
    """`index` with eager tensors read to NumPy; a traced tensor is refused."""
    items = index if isinstance(index, tuple) else (index,)
    concrete = []
    for item in items:
        if isinstance(item, Tensor):
            if item.is_symbolic:
                raise TracingError(
                    f"x.at[index] with a traced tensor index at {user_source()}: the "
                    "positions must be known while tracing; for a data-dependent update use "
                    "ug.where(mask, new, x), or ug.one_hot(i, n) to build the mask")
            item = item._host()
        concrete.append(item)
    return tuple(concrete) if isinstance(index, tuple) else concrete[0]


# The simple wrappers' docs: the op record's text and example, then the wrapper's own note.
for _function in (logical_and, logical_or, where, cast, matmul, argmax, reshape, transpose,
                  concat, stack, squeeze, expand_dims, broadcast_to, one_hot, softmax,
                  log_softmax, conv2d, sparse_softmax_cross_entropy, max_pool2d, avg_pool2d,
                  relu, sigmoid, tanh):
    _function.__doc__ = _record_doc(_function.__name__, (_function.__doc__ or "").strip())
del _function
