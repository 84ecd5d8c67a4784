"""The functional forms of the layers people expect (`ug.nn.functional.layer_norm`, ...),
each composed of op records: normalisation, embedding lookup, 1-D conv/pool (the 2-D records
over a unit height), adaptive average pooling, and the transposed convolution record.

>>> F = ug.nn.functional
>>> y = F.layer_norm(x, (64,), weight, bias)
>>> y = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
"""

from __future__ import annotations

import numpy as np

from unigraph import api
from unigraph.api.operands import _pair
from unigraph.dispatch import apply
from unigraph.dtypes import is_float
from unigraph.errors import ShapeError
from unigraph.ops import OPS
from unigraph.tensor import Tensor, tensor
from unigraph.tracing import user_source

__all__ = [
    "adaptive_avg_pool2d", "avg_pool1d", "conv1d", "conv_transpose2d", "embedding",
    "group_norm", "layer_norm", "max_pool1d",
]


def _as_tensor(x):
    return x if isinstance(x, Tensor) else tensor(x)


def _shape(x, rank: int, layout: str, what: str) -> tuple:
    if len(x.shape) != rank:
        raise ShapeError(f"{what}: x must be {layout}, got shape {list(x.shape)} at "
                         f"{user_source()}")
    return tuple(x.shape)


# -- normalisation ----------------------------------------------------------------------------
def _normalise(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes`, the variance biased (divide by n)."""
    centered = x - api.mean(x, axis=axes, keepdims=True)
    var = api.mean(centered * centered, axis=axes, keepdims=True)
    return centered / api.sqrt(var + eps)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last len(normalized_shape) dims of x (mean 0, biased variance 1),
    then `* weight + bias` (each of shape normalized_shape; None: no scale or shift). As
    torch.nn.functional.layer_norm; composed of mean, sub, mul, sqrt and div.

    >>> F.layer_norm(ug.tensor([[1.0, 3.0]]), (2,))   # [[-1.0, 1.0]] (up to eps)
    """
    x = _as_tensor(x)
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(int(d) for d in normalized_shape)
    count = len(normalized_shape)
    lead, tail = tuple(x.shape[:len(x.shape) - count]), tuple(x.shape[len(x.shape) - count:])
    if count == 0 or len(tail) != count or any(d is not None and d != n for d, n in zip(
            tail, normalized_shape)):
        raise ShapeError(
            f"layer_norm: normalized_shape {list(normalized_shape)} must be the last dims of "
            f"x, whose shape is {list(x.shape)} (at {user_source()})"
        )
    if None in tail:  # left open by input_spec: normalized_shape states them, checked per run
        x = api.ensure_shape(x, lead + normalized_shape)
    out = _normalise(x, tuple(range(len(x.shape) - count, len(x.shape))), eps)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Split the C channels of x [N, C, ...] into `num_groups` groups and normalise each
    group of each sample over its channels and positions; then `* weight + bias` per
    channel ([C] each). As torch.nn.functional.group_norm.

    >>> y = F.group_norm(x, 2, weight, bias)   # x [N, 4, H, W], weight and bias [4]
    """
    x = _as_tensor(x)
    shape = tuple(x.shape)
    if len(shape) < 2 or shape[1] is None or shape[1] % num_groups:
        raise ShapeError(f"group_norm: x of shape {list(shape)} must be [N, C, ...] with C a "
                         f"multiple of num_groups = {num_groups} (at {user_source()})")
    # One dim left open by input_spec (the batch, or one of the positions) is the -1 of
    # the reshapes: the same ops as with every dim known. Two would need two -1s.
    if shape.count(None) > 1:
        raise ShapeError(f"group_norm: the shape {list(shape)} of x at {user_source()} has "
                         "dims known only at run time; this function needs every dim but "
                         "one: give all but one of those dims a size in input_spec")
    # The batch open, or every dim known: the group's size is written out, not a -1, which
    # a zero-size batch leaves ambiguous ([0, C, H, W] into [0, groups, -1] is refused).
    if shape[0] is None or None not in shape:
        per_group = int(np.prod(shape[1:], dtype=np.int64)) // num_groups
        grouped = api.reshape(x, (-1 if shape[0] is None else shape[0], num_groups, per_group))
    else:
        grouped = api.reshape(x, (shape[0], num_groups, -1))
    out = api.reshape(_normalise(grouped, (2,), eps), tuple(-1 if d is None else d
                                                            for d in shape))
    channels = (1, shape[1]) + (1,) * (len(shape) - 2)
    if weight is not None:
        out = out * api.reshape(weight, channels)
    return out if bias is None else out + api.reshape(bias, channels)


# -- embedding --------------------------------------------------------------------------------
def embedding(indices, weight, padding_idx=None):
    """Rows of `weight` [num_embeddings, dim] at integer `indices` (any shape): the result
    is indices.shape + [dim]; a `take` along axis 0, so the gradient adds into the rows
    read. With `padding_idx`, positions holding that index give zeros and send no gradient
    to its row (torch gives that row, which starts at zero and, having no gradient, stays
    so).

    >>> F.embedding(np.array([[0, 2]]), weight)   # [1, 2, dim]
    """
    weight = _as_tensor(weight)
    indices = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices))
    if is_float(indices.dtype):
        raise ShapeError(f"embedding: indices must be integers, got {indices.dtype} at "
                         f"{user_source()} (cast them with ug.cast(indices, 'int64'))")
    out = api.take(weight, indices, axis=0)
    if padding_idx is None:
        return out
    rows = weight.shape[0]
    index = padding_idx + rows if padding_idx < 0 else padding_idx
    keep = api.cast(api.not_equal(indices, index), weight.dtype)
    return out * api.expand_dims(keep, -1)


# -- 1-D convolution and pooling: the 2-D records over a unit height ---------------------------
def _single(value, name: str) -> int:
    if isinstance(value, int | np.integer):
        return int(value)
    items = tuple(value)
    if len(items) != 1:
        raise ValueError(f"{name} must be an int (or a 1-tuple) for 1-D ops, got {value!r}")
    return int(items[0])


def _pad_1d(padding):
    """1-D padding (an int or (left, right)) as the 2-D records' padding attr."""
    if isinstance(padding, int | np.integer):
        return (0, int(padding))
    left, right = (int(p) for p in padding)
    return (0, left) if left == right else ((0, 0), (left, right))


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of x [N, C, L] by weight [O, C/groups, K] (+ bias [O]): conv2d over
    a unit height, so every backend runs its own conv kernel.

    >>> y = F.conv1d(x, w, b, padding=1)   # x [N, C, L], w [O, C, 3]
    """
    x, weight = _as_tensor(x), _as_tensor(weight)
    _shape(x, 3, "[N, C, L]", "conv1d")
    if len(weight.shape) != 3:
        raise ShapeError(f"conv1d: weight must be [O, C/groups, K], got shape "
                         f"{list(weight.shape)} at {user_source()}")
    out = api.conv2d(api.expand_dims(x, 2), api.expand_dims(weight, 2), bias,
                     stride=(1, _single(stride, "stride")), padding=(0, _single(padding,
                                                                                "padding")),
                     dilation=(1, _single(dilation, "dilation")), groups=groups)
    return api.squeeze(out, 2)


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over windows of x [N, C, L] (stride defaults to the kernel size; padding
    an int or (left, right), -inf, at most kernel // 2): max_pool2d over a unit height."""
    x = _as_tensor(x)
    _shape(x, 3, "[N, C, L]", "max_pool1d")
    kernel = _single(kernel_size, "kernel_size")
    step = kernel if stride is None else _single(stride, "stride")
    out = api.max_pool2d(api.expand_dims(x, 2), (1, kernel), (1, step), _pad_1d(padding),
                         dilation=(1, _single(dilation, "dilation")), ceil_mode=ceil_mode)
    return api.squeeze(out, 2)


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over windows of x [N, C, L], options as avg_pool2d's: avg_pool2d over a unit
    height."""
    x = _as_tensor(x)
    _shape(x, 3, "[N, C, L]", "avg_pool1d")
    kernel = _single(kernel_size, "kernel_size")
    step = kernel if stride is None else _single(stride, "stride")
    out = api.avg_pool2d(api.expand_dims(x, 2), (1, kernel), (1, step), _pad_1d(padding),
                         ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    return api.squeeze(out, 2)


# -- adaptive average pooling -----------------------------------------------------------------
def _adaptive_matrix(size: int, out: int, dtype) -> np.ndarray:
    """[out, size]: row i averages input cells floor(i * size / out) to
    ceil((i + 1) * size / out) - 1 (torch's windows, which may overlap)."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix.astype(dtype)


def adaptive_avg_pool2d(x, output_size):
    """Average pooling of x [N, C, H, W] to `output_size` (an int, or (oh, ow); None keeps
    that dim), with torch's windows: output row i averages input rows floor(i * H / oh) to
    ceil((i + 1) * H / oh) - 1, so any size works, divisible or not. 1 x 1 is a mean over H
    and W; a divisible size is avg_pool2d; any other, two matmuls by constant averaging
    matrices.

    >>> F.adaptive_avg_pool2d(x, 1)          # global average pooling: [N, C, 1, 1]
    >>> F.adaptive_avg_pool2d(x, (3, 5))
    """
    x = _as_tensor(x)
    n, c, h, w = _shape(x, 4, "NCHW", "adaptive_avg_pool2d")
    sizes = (output_size, output_size) if isinstance(output_size, int | np.integer) or \
        output_size is None else tuple(output_size)
    oh, ow = (h if sizes[0] is None else int(sizes[0]), w if sizes[1] is None else
              int(sizes[1]))
    if (oh, ow) == (1, 1):  # any H and W, open ones (input_spec) included
        return api.mean(x, axis=(2, 3), keepdims=True)
    if h is None or w is None or min(oh, ow) < 1:
        raise ShapeError(f"adaptive_avg_pool2d: output size {(oh, ow)} for x of shape "
                         f"{list(x.shape)}: needs known H and W and sizes >= 1 (at "
                         f"{user_source()}); only output size 1 (global average pooling) "
                         "takes H and W left open by input_spec")
    if h % oh == 0 and w % ow == 0:
        kernel = (h // oh, w // ow)
        return api.avg_pool2d(x, kernel, kernel)
    rows = api.constant(_adaptive_matrix(h, oh, x.dtype))
    cols = api.constant(_adaptive_matrix(w, ow, x.dtype).T.copy())
    return api.matmul(api.matmul(rows, x), cols)


# -- transposed convolution (its own op record) ------------------------------------------------
def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, dilation=1,
                     groups=1):
    x, weight = _as_tensor(x), _as_tensor(weight)
    if bias is not None:
        bias = _as_tensor(bias)
    attrs = {"stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
             "output_padding": _pair(output_padding, "output_padding"),
             "dilation": _pair(dilation, "dilation"), "groups": int(groups)}
    inputs = [x, weight] if bias is None else [x, weight, bias]
    return apply("conv_transpose2d", inputs, attrs)


conv_transpose2d.__doc__ = (
    f"{OPS['conv_transpose2d'].doc}\n\nExample::\n\n    >>> "
    f"{OPS['conv_transpose2d'].example.replace('  # ', chr(10) + '    ')}\n\n"
    ">>> y = ug.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)\n"
    "... # x [N, C, H, W], w [C, O, 3, 3]: y [N, O, 2H, 2W]\n"
)
