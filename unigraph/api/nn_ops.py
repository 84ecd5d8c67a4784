"""Neural-network ops: softmax, log_softmax, conv2d, pooling, cross-entropy, and the
activations composed of elementwise records (gelu, silu, leaky_relu, elu, selu).
"""

from __future__ import annotations

import numpy as np

from unigraph.api.elementwise import cast, erf, exp, minimum, sigmoid, tanh, where
from unigraph.api.operands import (
    _TENSORS,
    _axis,
    _docs_from_records,
    _pair,
    _promote,
    _tensor_or_array,
)
from unigraph.dispatch import apply, apply_simple
from unigraph.errors import ShapeError
from unigraph.tensor import Tensor
from unigraph.tracing import user_source

_FLOATS = frozenset({"float16", "float32", "float64"})
_WIDE_INTS = frozenset({"int32", "int64"})
_NARROW_INTS = frozenset({"int8", "uint8", "int16", np.dtype("int8"), np.dtype("uint8"),
                          np.dtype("int16")})


def softmax(x, axis=-1):
    (a,) = _promote(x, to_float=True)
    return apply("softmax", [a], {"axis": _axis(axis, a.ndim, "softmax")})


def log_softmax(x, axis=-1):
    (a,) = _promote(x, to_float=True)
    return apply("log_softmax", [a], {"axis": _axis(axis, a.ndim, "log_softmax")})


def _conv_pair(value, name: str) -> tuple:
    """An int (NumPy's too) or a pair of them -> (int, int); else unigraph's error with the
    user's line (not a bare `TypeError: 'float' object is not iterable`, nor a 1.5 silently
    truncated to 1)."""
    if isinstance(value, np.integer):
        value = int(value)
    try:
        pair = _pair(value, name)
        given = (value, value) if isinstance(value, int) else tuple(value)
        if all(exact == v for exact, v in zip(pair, given)):
            return pair
    except (TypeError, ValueError):
        pass
    raise ShapeError(f"conv2d: {name} is {value!r}; pass an int or a pair of ints, "
                     f"e.g. {name}=1 or {name}=(1, 2) (at {user_source()})")


def _conv_int(value, name: str) -> int:
    try:
        if int(value) == value:
            return int(value)
    except (TypeError, ValueError):
        pass
    raise ShapeError(f"conv2d: {name} is {value!r}; pass an int, e.g. {name}=1 "
                     f"(at {user_source()})")


# (type and value of stride, padding, dilation, groups) -> conv2d's attrs: a layer calls
# with the same arguments every step, and normalising them cost ~1.5 us a call. The types
# are in the key because `1.0 == 1` while `_pair(1.0)` raises; an argument that raises is
# never cached, so its error comes back on every call. The dicts are shared: read only.
_conv_attrs_cache: dict = {}


def _conv_attrs(stride, padding, dilation, groups) -> dict:
    key = (type(stride), stride, type(padding), padding, type(dilation), dilation,
           type(groups), groups)
    try:
        attrs = _conv_attrs_cache.get(key)
    except TypeError:  # a list: normalised on every call
        key = attrs = None
    if attrs is None:
        attrs = {"stride": _conv_pair(stride, "stride"),
                 "padding": _conv_pair(padding, "padding"),
                 "dilation": _conv_pair(dilation, "dilation"),
                 "groups": _conv_int(groups, "groups")}
        if key is not None:
            if len(_conv_attrs_cache) > 1000:
                _conv_attrs_cache.clear()
            _conv_attrs_cache[key] = attrs
    return attrs


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution, NCHW input, weight [out, in/groups, kh, kw], symmetric padding, and
    an optional bias [out] added per output channel (in the framework's fused conv kernel).

    >>> y = ug.conv2d(x, w, b, padding=1)   # x [N, C, H, W], w [O, C, 3, 3], b [O]
    """
    attrs = _conv_attrs(stride, padding, dilation, groups)
    # Tensors of one float dtype (a layer's call) are already the op's operands.
    dtype = getattr(x, "dtype", None)
    if (type(x) in _TENSORS and dtype in _FLOATS and type(weight) in _TENSORS
            and weight.dtype == dtype
            and (bias is None or type(bias) in _TENSORS and bias.dtype == dtype)):
        return apply("conv2d", [x, weight] if bias is None else [x, weight, bias], attrs)
    operands = (x, weight) if bias is None else (x, weight, bias)
    return apply("conv2d", _promote(*operands, to_float=True), attrs)


def _pool_padding(padding):
    """An int, a pair (ph, pw), or ((top, bottom), (left, right)) -> the record's attr: a
    pair when both sides of each dim agree, else the pair of pairs."""
    if isinstance(padding, int) or not any(isinstance(p, tuple | list) for p in padding):
        return _pair(padding, "padding")
    sides = tuple(_pair(p, "padding") for p in padding)
    if len(sides) != 2:
        raise ValueError(f"padding must be an int, (ph, pw) or ((top, bottom), (left, right)), "
                         f"got {padding!r}")
    return tuple(p[0] for p in sides) if all(a == b for a, b in sides) else sides


def _pool_attrs(kernel_size, stride, padding, options: dict) -> dict:
    """The record's attrs; an option at its default is left out (the graph stays as it was
    before the option existed)."""
    kernel = _pair(kernel_size, "kernel_size")
    attrs = {"kernel": kernel, "stride": _pair(stride, "stride") if stride else kernel,
             "padding": _pool_padding(padding)}
    defaults = {"dilation": (1, 1), "ceil_mode": False, "count_include_pad": True}
    for name, value in options.items():
        value = _pair(value, name) if name == "dilation" else bool(value)
        if value != defaults[name]:
            attrs[name] = value
    return attrs


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """`max_pool2d` over NCHW input; stride defaults to the kernel size; padding an int,
    (ph, pw) or ((top, bottom), (left, right))."""
    (a,) = _promote(x, to_float=True)
    options = {"dilation": dilation, "ceil_mode": ceil_mode}
    return apply("max_pool2d", [a], _pool_attrs(kernel_size, stride, padding, options))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """`avg_pool2d` over NCHW input; stride defaults to the kernel size; padding an int,
    (ph, pw) or ((top, bottom), (left, right))."""
    (a,) = _promote(x, to_float=True)
    options = {"ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
    return apply("avg_pool2d", [a], _pool_attrs(kernel_size, stride, padding, options))


def sparse_softmax_cross_entropy(logits, labels):
    """Per-example `-log softmax(logits)[label]`; logits [N, C], integer labels [N]."""
    if (type(logits) is Tensor and logits.dtype in _FLOATS and type(labels) is Tensor
            and labels.dtype in _WIDE_INTS):
        return apply_simple("sparse_softmax_cross_entropy", logits, labels)  # as they are
    (a,) = _promote(logits, to_float=True)
    labels = _tensor_or_array(labels)
    if labels.dtype in _NARROW_INTS:  # class ids as int64 (exact): TF and Paddle take no less
        labels = cast(labels, "int64")
    return apply("sparse_softmax_cross_entropy", [a, labels], {})


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


_docs_from_records(softmax, log_softmax, conv2d, sparse_softmax_cross_entropy, max_pool2d,
                   avg_pool2d)
