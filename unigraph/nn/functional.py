"""`ug.nn.functional`: activations, losses, metrics and the layers' functional forms
(conv1d/conv2d/conv_transpose2d, max/avg pools in 1-D and 2-D, adaptive_avg_pool2d,
layer_norm, group_norm, embedding: `functional_layers.py`), written once with unigraph ops.

>>> F = ug.nn.functional
>>> loss = F.cross_entropy(logits, labels)     # integer labels [N] or one-hot [N, C]
>>> acc = F.accuracy(logits, labels)
"""

from __future__ import annotations

import numpy as np

from unigraph import api
from unigraph.api.shapes import merge_axes
from unigraph.composites import eager_call
from unigraph.dispatch import native
from unigraph.dtypes import is_float
from unigraph.errors import ShapeError
from unigraph.nn.functional_layers import (  # noqa: F401  (re-exported)
    adaptive_avg_pool2d,
    avg_pool1d,
    conv1d,
    conv_transpose2d,
    embedding,
    group_norm,
    layer_norm,
    max_pool1d,
)
from unigraph.random import known_shape, uniform
from unigraph.tensor import Tensor, tensor

__all__ = [
    "accuracy", "activation", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv1d", "conv2d",
    "conv_transpose2d", "cross_entropy", "dropout", "embedding", "flatten", "group_norm",
    "huber_loss", "l1_loss", "layer_norm", "linear", "log_softmax", "max_pool1d", "max_pool2d",
    "mse_loss", "nll_loss", "relu", "sigmoid", "smooth_l1_loss", "softmax", "tanh",
]

# The 2-D records' wrappers, as torch.nn.functional names them; and the elementwise
# activations, the op functions themselves (a function calling `api.relu` was one more
# Python call in every layer's activation, eager or traced).
conv2d, max_pool2d, avg_pool2d = api.conv2d, api.max_pool2d, api.avg_pool2d
relu, sigmoid, tanh = api.relu, api.sigmoid, api.tanh


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`."""
    return api.softmax(x, axis)


def log_softmax(x, axis=-1):
    """x - log(sum(exp(x))) along `axis`."""
    return api.log_softmax(x, axis)


_ACTIVATIONS = {"relu": relu, "sigmoid": sigmoid, "tanh": tanh, "softmax": softmax,
                "log_softmax": log_softmax}


def activation(act):
    """The activation function for `act`: None (identity), a name, or a callable."""
    if act is None:
        return lambda x: x
    if callable(act):
        return act
    try:
        return _ACTIVATIONS[act]
    except KeyError:
        known = ", ".join(_ACTIVATIONS)
        raise ValueError(f"unknown activation {act!r}; use None, a callable, or one of "
                         f"{known}") from None


def linear(x, weight, bias=None):
    """x @ weight + bias, with weight [in, out]: the records `matmul` then `add`; eagerly,
    on a backend naming a native call for "linear" in its `composites` (torch:
    `torch.addmm`, as `nn.Linear` runs), that one call, within the records' budgets.

    >>> F.linear(ug.tensor([[1.0, 2.0]]), ug.tensor([[1.0], [1.0]]), ug.tensor([0.5]))
    """
    if bias is not None:
        # (eager_call first: it answers None at once while tracing, and on a backend without
        # the call; the shape tests then run only where the fused call may be made)
        call = eager_call("linear")
        if call is not None and _linear_fusable(x, weight, bias):
            backend, fn = call
            out = fn(native(x, backend), native(weight, backend), native(bias, backend))
            return Tensor((x.shape[0], weight.shape[1]), x.dtype, backend, out)
    out = api.matmul(x, weight)
    return out if bias is None else out + bias


_FLOATS = ("float32", "float64")


def _linear_fusable(x, weight, bias) -> bool:
    """Whether `linear` is one 2-D matmul plus a 1-D bias of one float dtype, no promotion:
    anything else (and every shape error) goes through the records."""
    return isinstance(x, Tensor) and isinstance(weight, Tensor) and \
        isinstance(bias, Tensor) and len(x.shape) == 2 and len(weight.shape) == 2 and \
        x.dtype in _FLOATS and weight.dtype == x.dtype and bias.dtype == x.dtype and \
        x.shape[1] == weight.shape[0] and tuple(bias.shape) == (weight.shape[1],)


def flatten(x, start_axis=1):
    """Merge the dimensions from `start_axis` on into one: [N, C, H, W] -> [N, C*H*W]."""
    x = _as_tensor(x)
    return merge_axes(x, start_axis, len(x.shape))


def dropout(x, p=0.5, training=True):
    """Zero each entry with probability `p` and scale the rest by 1 / (1 - p) (inverted
    dropout), so the expected value is unchanged; the identity when not `training`.

    The mask is `ug.random.uniform(x.shape) >= p`: drawn from unigraph's generator, so every
    backend drops the same units, and in a static graph a fresh mask is fed on every run
    (of the run's sizes where input_spec leaves a dim of x open).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must lie in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    x = _as_tensor(x)
    if p == 1.0:
        return x * 0.0
    shape = known_shape(x.shape, "dropout (its mask is a ug.random.uniform draw)")
    keep = api.cast(uniform(shape, x.dtype) >= p, x.dtype)
    return x * keep * (1.0 / (1.0 - p))


_INT_DTYPES = frozenset({"int8", "uint8", "int16", "int32", "int64"})


def _reduce(losses, reduction: str, where: str):
    if reduction == "mean":
        return api.mean(losses)
    if reduction == "sum":
        return api.sum(losses)
    if reduction == "none":
        return losses
    raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _as_tensor(x):
    return x if isinstance(x, Tensor) else tensor(x)


def cross_entropy(logits, labels, reduction="mean"):
    """Softmax cross-entropy of `logits` [N, C] (unnormalised scores, not probabilities).

    * integer `labels` [N]: loss_n = -log_softmax(logits)[n, labels[n]]
    * float `labels` [N, C] (one-hot or probabilities): loss_n = -sum_c labels[n, c] *
      log_softmax(logits)[n, c]

    then the mean over n (`reduction="sum"`: the sum; `"none"`: the [N] losses).

    Integer labels must lie in [0, C): a bad label raises `ug.IndexOutOfRangeError` naming
    it, the target and your line, on every target, eager or static (the op
    `sparse_softmax_cross_entropy` checks; on a static target when the graph runs).

    >>> F.cross_entropy(ug.tensor([[2.0, 0.5]]), np.array([0]))
    """
    logits = _as_tensor(logits)
    if len(logits.shape) != 2:
        raise ShapeError(f"cross_entropy: logits must be [N, C], got shape {list(logits.shape)}")
    if type(labels) is Tensor and labels.dtype in _INT_DTYPES:  # the usual call: class ids
        if reduction == "mean" and logits.dtype in _FLOATS and 0 not in logits.shape and \
                tuple(labels.shape) == tuple(logits.shape[:1]):
            call = eager_call("cross_entropy_mean")
            if call is not None:  # one native call (torch: F.cross_entropy); see `linear`
                backend, fn = call
                loss = fn(native(logits, backend), native(labels, backend))
                return Tensor((), logits.dtype, backend, loss)
        return _reduce(api.sparse_softmax_cross_entropy(logits, labels), reduction,
                       "cross_entropy")
    labels_dtype = labels.dtype if isinstance(labels, Tensor) else np.asarray(labels).dtype.name
    if is_float(labels_dtype):
        labels_shape = tuple(labels.shape) if isinstance(labels, Tensor) else \
            np.shape(labels)
        if tuple(labels_shape) != tuple(logits.shape):
            raise ShapeError(
                f"cross_entropy: float (one-hot or probability) labels must have the logits' "
                f"shape {list(logits.shape)}, got {list(labels_shape)}"
            )
        losses = -api.sum(labels * api.log_softmax(logits, axis=1), axis=1)
        return _reduce(losses, reduction, "cross_entropy")
    losses = api.sparse_softmax_cross_entropy(logits, labels)
    return _reduce(losses, reduction, "cross_entropy")


def mse_loss(prediction, target, reduction="mean"):
    """Mean squared error: mean((prediction - target) ** 2) (`reduction` as in
    cross_entropy)."""
    difference = prediction - target
    return _reduce(difference * difference, reduction, "mse_loss")


def l1_loss(prediction, target, reduction="mean"):
    """Mean absolute error: mean(|prediction - target|) (`reduction` as in cross_entropy).
    Gradient sign(prediction - target), 0 where they are equal (torch's)."""
    return _reduce(api.abs(prediction - target), reduction, "l1_loss")


def smooth_l1_loss(prediction, target, reduction="mean", beta=1.0):
    """torch's smooth L1: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, with
    d = prediction - target (`reduction` as in cross_entropy; beta > 0)."""
    if not beta > 0:
        raise ValueError(f"smooth_l1_loss: beta must be > 0, got {beta!r} (beta 0 is l1_loss)")
    difference = prediction - target
    size = api.abs(difference)
    losses = api.where(size < beta, difference * difference * (0.5 / beta), size - 0.5 * beta)
    return _reduce(losses, reduction, "smooth_l1_loss")


def huber_loss(prediction, target, reduction="mean", delta=1.0):
    """Huber loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), with
    d = prediction - target (torch's huber_loss; `reduction` as in cross_entropy)."""
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta!r}")
    difference = prediction - target
    size = api.abs(difference)
    losses = api.where(size < delta, difference * difference * 0.5, (size - 0.5 * delta) * delta)
    return _reduce(losses, reduction, "huber_loss")


def binary_cross_entropy_with_logits(logits, targets, reduction="mean"):
    """Sigmoid cross-entropy of `logits` x (any shape) against `targets` t in [0, 1] of the
    same shape: -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), without overflow or
    cancellation: x (1 - t) + softplus(-x) where x >= 0, softplus(x) - x t elsewhere (torch's
    relu(x) - x t + log1p(exp(-|x|)) has the same values, but a kink at 0 that a composed
    gradient would see). Gradient sigmoid(x) - t. `reduction` as in cross_entropy."""
    x = _as_tensor(logits)
    losses = api.where(x >= 0, x * (1.0 - targets) + api.softplus(-x),
                       api.softplus(x) - x * targets)
    return _reduce(losses, reduction, "binary_cross_entropy_with_logits")


def _floored_log(p):
    """max(log(p), -100) (torch's floor in binary_cross_entropy), and -100 at p = 0 without
    taking log(0) (whose divide by zero NumPy would print, where no other target does)."""
    positive = p > 0
    return api.where(positive, api.maximum(api.log(api.where(positive, p, 1.0)), -100.0),
                     -100.0)


def binary_cross_entropy(probabilities, targets, reduction="mean"):
    """-(t log p + (1 - t) log(1 - p)) of `probabilities` p in [0, 1] against `targets` t,
    each log floored at -100 as torch's, so p = 0 or 1 gives a finite loss. Prefer
    binary_cross_entropy_with_logits on logits: it does not lose precision near 0 and 1."""
    p = _as_tensor(probabilities)
    losses = -(targets * _floored_log(p) + (1.0 - targets) * _floored_log(1.0 - p))
    return _reduce(losses, reduction, "binary_cross_entropy")



def nll_loss(log_probs, target, reduction="mean", ignore_index=-100, weight=None):
    """Negative log-likelihood of integer `target` under `log_probs`, as torch's
    `F.nll_loss`: log_probs [N, C] (or [N, C, d1, ...], or [C] with a 0-d target), target
    [N] (or [N, d1, ...]) in [0, C); loss_n = -weight[t_n] * log_probs[n, t_n], 0 where
    t_n == ignore_index. "mean" divides the sum by the sum of the chosen weights (the count
    of kept targets without `weight`), "sum" sums, "none" keeps target's shape.

    A target outside [0, C) that is not ignore_index raises `ug.IndexOutOfRangeError`.
    While tracing, C must be known; the other dims may be left open by input_spec.

    >>> F.nll_loss(F.log_softmax(logits, axis=1), labels)  # = F.cross_entropy(logits, labels)
    """
    from unigraph.api.reductions import _taken_along
    from unigraph.dispatch import apply

    x = _as_tensor(log_probs)
    t = _as_tensor(target)
    if t.dtype not in _INT_DTYPES:
        raise TypeError(f"nll_loss: target must hold integer class ids, got {t.dtype}; "
                        "cast it, e.g. ug.cast(target, 'int64')")
    if x.ndim == 1:  # [C] and a 0-d target: one row
        loss = nll_loss(api.expand_dims(x, 0), api.reshape(t, (1,)), reduction, ignore_index,
                        weight)
        return api.reshape(loss, ()) if reduction == "none" else loss
    shape = tuple(x.shape)
    if x.ndim < 2 or len(t.shape) != x.ndim - 1 or any(
            a is not None and b is not None and a != b
            for a, b in zip(t.shape, shape[:1] + shape[2:])):
        raise ShapeError(f"nll_loss: log_probs {list(shape)} needs a target of shape "
                         f"{list(shape[:1] + shape[2:])} (log_probs without its class dim 1), "
                         f"got {list(t.shape)}")
    classes = shape[1]
    if classes is None:
        _known(x)
    if weight is None:
        weights = api.ones((classes,), x.dtype)
    else:
        weights = api.cast(_as_tensor(weight), x.dtype)
        if tuple(weights.shape) != (classes,):
            raise ShapeError(f"nll_loss: weight must have one entry per class, shape "
                             f"[{classes}], got {list(weights.shape)}")
    kept = api.not_equal(t, ignore_index)
    t = api.cast(t, "int64")
    safe = api.where(kept, t, api.zeros_like(t))  # an ignored target reads class 0, unused
    # the op itself (not ug.take, which counts a negative index from the end): a target
    # outside [0, C) is an IndexOutOfRangeError on every target
    chosen = apply("take", [weights, safe], {"axis": 0})
    picked = api.squeeze(_taken_along(x, api.expand_dims(safe, 1), 1), 1)
    # where, not a product with the mask: an ignored -inf log-probability adds nothing (and
    # meets no weight: the weights' gradient would be 0 * -inf there)
    zeros = api.zeros_like(picked)
    losses = api.where(kept, -(chosen * api.where(kept, picked, zeros)), zeros)
    if reduction == "mean":
        return api.sum(losses) / api.sum(api.where(kept, chosen, api.zeros_like(chosen)))
    return _reduce(losses, reduction, "nll_loss")


def _known(x) -> tuple:
    from unigraph.api.operands import _known_shape

    return _known_shape(x, "F.nll_loss")


def accuracy(logits, labels):
    """Fraction of rows whose highest score is the label (float32 scalar).

    `labels`: integers [N], or one-hot / probabilities [N, C] (their argmax is the label).
    """
    logits = _as_tensor(logits)
    labels = _as_tensor(labels)
    if labels.ndim == logits.ndim:
        labels = api.argmax(labels, axis=-1)
    predicted = api.argmax(logits, axis=-1)
    if labels.dtype != predicted.dtype:
        labels = api.cast(labels, predicted.dtype)
    return api.mean(api.cast(api.equal(predicted, labels), "float32"))
