"""The lowering table: op name -> the torch function that computes it.

Each entry takes the op's inputs as positional torch tensors and its attrs as keywords, the
way `unigraph.backend.lower_nodes` calls it. The same table serves `torch:eager` (called op
by op) and `torch:static` (bound as globals of the generated function). Where torch's own
function already has the op's meaning, the entry *is* that function; the small wrappers
below only rename attrs or cover a corner where torch and the reference differ.

This module imports torch: the backend imports it only from `TorchBackend.load`.
"""

from __future__ import annotations

import builtins
import math

import numpy as np
import torch
import torch.nn.functional as F

from unigraph.errors import ShapeError
from unigraph.index_checks import check_indices
from unigraph.ops.pooling import pool_geometry, pool_pads
from unigraph.printing import emit
from unigraph.shape_checks import check as check_shape
from unigraph.shape_checks import check_size

TORCH_DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


def _tracks_grad(*xs) -> bool:
    """True when autograd records this call: only then do the gradient workarounds below
    cost anything (they change the backward, never the forward)."""
    return torch.is_grad_enabled() and any(x.requires_grad for x in xs)


# -- elementwise ------------------------------------------------------------------------------


def _nan_gradient_where_nan(out, x, y):
    """`out` (maximum or minimum of x and y), whose gradient is NaN to both inputs wherever
    it is NaN (the op's rule), where torch gives each input the full gradient (a quirk,
    unigraph_torch/quirks.py). Only under autograd and with a NaN present: the check costs
    two passes, the repair five."""
    if not _tracks_grad(x, y):
        return out
    nans = torch.isnan(out)
    if not bool(nans.any()):
        return out
    # (x + y) * nan is NaN in value and in derivative. The factor is 0 off the NaNs: where's
    # unpicked branch gets a zero cotangent, and 0 * nan would still be NaN.
    return torch.where(nans, (x + y) * torch.where(nans, out.detach(), 0), out)


def maximum(x, y):
    # Ties already split the gradient in halves, as the op says.
    return _nan_gradient_where_nan(torch.maximum(x, y), x, y)


def minimum(x, y):
    return _nan_gradient_where_nan(torch.minimum(x, y), x, y)


def floor_divide(x, y):
    # torch.floor_divide has no backward; div with floor rounding is the same values (NumPy's
    # algorithm for floats) with a gradient of 0, as the op says.
    return torch.div(x, y, rounding_mode="floor")


def softplus(x):
    # F.softplus returns x itself above `threshold` (default 20): in float64 that is off by
    # exp(-20) ~ 2e-9. Past 40 (float16: 10) exp(-x) is below the dtype's rounding of x.
    return F.softplus(x, threshold=10 if x.dtype == torch.float16 else 40)


def cast(x, *, dtype):
    # Float -> int truncates toward zero and anything -> bool is x != 0, as NumPy's astype.
    return x.to(TORCH_DTYPES[dtype])


def einsum(*xs, equation):
    return torch.einsum(equation, *xs)


# -- reductions -------------------------------------------------------------------------------
# A node's axis is never (): the frontend returns x for axis=() (torch would read "every dim").


def reduce_sum(x, *, axis, keepdims):
    # dtype=x.dtype: torch would widen int32 to int64; the op keeps the input dtype.
    return torch.sum(x, dim=axis, keepdim=keepdims, dtype=x.dtype)


def reduce_any(x, *, axis, keepdims):
    return torch.any(x, dim=axis, keepdim=keepdims)


def reduce_all(x, *, axis, keepdims):
    return torch.all(x, dim=axis, keepdim=keepdims)


def reduce_mean(x, *, axis, keepdims):
    return torch.mean(x, dim=axis, keepdim=keepdims)


def reduce_max(x, *, axis, keepdims, initial=None):
    dims = range(x.dim()) if axis is None else axis
    if initial is not None and any(x.shape[d] == 0 for d in dims):  # (torch.amax refuses)
        shape = [1 if d in dims else n for d, n in enumerate(x.shape) if keepdims or d not in dims]
        return torch.full(shape, initial, dtype=x.dtype, device=x.device)
    return torch.amax(x, dim=() if axis is None else axis, keepdim=keepdims)


def reduce_min(x, *, axis, keepdims):
    return torch.amin(x, dim=() if axis is None else axis, keepdim=keepdims)


def reduce_prod(x, *, axis, keepdims):
    if x.dtype == torch.float16:
        # torch multiplies float16 in float16 (quirk "prod"): in float32, rounded once
        return reduce_prod(x.float(), axis=axis, keepdims=keepdims).half()
    if axis is None:
        out = torch.prod(x, dtype=x.dtype)  # dtype: torch would widen int32 to int64
        return out.reshape((1,) * x.dim()) if keepdims else out
    if len(axis) == 1:
        return torch.prod(x, dim=axis[0], keepdim=keepdims, dtype=x.dtype)
    # torch.prod takes one dim: move the reduced dims last, flatten them, reduce once.
    rest = [i for i in range(x.dim()) if i not in axis]
    # (the merged size named, not -1: torch cannot infer it when a kept dim is 0)
    moved = x.permute(rest + list(axis)).reshape(
        [x.shape[i] for i in rest] + [math.prod(x.shape[i] for i in axis)])
    out = torch.prod(moved, dim=-1, dtype=x.dtype)
    if keepdims:
        out = out.reshape([1 if i in axis else d for i, d in enumerate(x.shape)])
    return out


def cumsum(x, *, axis):
    return torch.cumsum(x, dim=axis, dtype=x.dtype)  # torch widens int32 by default


def argmax(x, *, axis, keepdims):
    # torch.argmax returns the first maximum among ties and counts a NaN as the maximum.
    return torch.argmax(x, dim=axis, keepdim=keepdims)


# -- shape ------------------------------------------------------------------------------------


def reshape(x, sizes=None, *, shape):
    # With `sizes` (open dims' sizes, computed when the program runs) torch takes them as ints.
    return torch.reshape(x, shape if sizes is None else sizes.tolist())


def transpose(x, *, perm):
    return torch.permute(x, perm)


def concat(*xs, axis):
    return torch.cat(xs, dim=axis)


def stack(*xs, axis):
    return torch.stack(xs, dim=axis)


def squeeze(x, *, axis):
    out = torch.squeeze(x, dim=axis)  # a tuple of dims; () squeezes none, as in NumPy
    if out.dim() != x.dim() - len(axis):
        # torch keeps a dim that is not 1; the op's inference checked the known sizes, so
        # this is a dim left open by input_spec, not 1 when the program runs
        raise ShapeError(f"squeeze: axis {[a for a in axis if x.shape[a] != 1][0]} of a "
                         f"tensor of shape {list(x.shape)} is not 1 (it was left open by "
                         "input_spec; only size-1 axes can be squeezed)")
    return out


def expand_dims(x, *, axis):
    return torch.unsqueeze(x, axis)


def broadcast_to(x, *, shape):
    return torch.broadcast_to(x, shape)


def slice_(x, *, begin, end, stride):
    return x[tuple(builtins.slice(b, e, s) for b, e, s in zip(begin, end, stride))]


def _check_indices(op, indices, size, axis=None):
    """Refuse an index outside [0, size) with unigraph's error (index_select's names no
    value): one min/max reduction per call (a quarter of the cost of a comparison, an or
    and an any). Skipped while torch.export traces, where the values are unknown (the
    exported program keeps torch's own check)."""
    if indices.numel() and not torch.compiler.is_compiling():
        low, high = torch.aminmax(indices)
        if low.item() < 0 or high.item() >= size:
            check_indices(op, indices.cpu().numpy(), size, axis)  # builds the message


def take(x, indices, *, axis):
    _check_indices("take", indices, x.shape[axis], axis)
    if indices.dim() == 1:
        return torch.index_select(x, axis, indices)
    # index_select takes 1-D indices only: gather flat, then lay the indices' shape out.
    picked = torch.index_select(x, axis, indices.reshape(-1))
    return picked.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1:])


def one_hot(indices, *, depth, dtype):
    # A comparison, not F.one_hot: an index outside [0, depth) must give a row of zeros
    # (F.one_hot raises), and the result dtype is the op's, not int64.
    positions = torch.arange(depth, dtype=indices.dtype, device=indices.device)
    return (indices.unsqueeze(-1) == positions).to(TORCH_DTYPES[dtype])


def scatter_add(x, indices, updates, *, axis):
    # index_add, not index_add_: a new tensor, so x is never written and autograd sees both.
    return torch.index_add(x, axis, indices, updates)


def print_(*xs, message, texts=None):
    # The host values, formatted by unigraph (the same text on every target); generated
    # torch:static code calls this too, so a print in a loop body prints per iteration.
    emit(message, *[x.detach().cpu().numpy() for x in xs], texts=texts)
    return xs[0]


def full(*, shape, value, dtype):
    return torch.full(shape, value, dtype=TORCH_DTYPES[dtype])


def full_like(x, *, value, dtype):
    return torch.full_like(x, value, dtype=TORCH_DTYPES[dtype])


def flip(x, *, axes):
    return torch.flip(x, list(axes))


def constant(*, value):
    # A copy, so no tensor ever aliases the graph's attr array.
    return torch.from_numpy(np.array(value))


# -- nn ---------------------------------------------------------------------------------------


def relu(x):
    out = torch.relu(x)
    # _tracks_grad(x), inline and requires_grad first: most eager relus track nothing.
    if not x.requires_grad or not torch.is_grad_enabled() or not torch.isnan(out.sum()):
        return out
    # torch.relu's backward passes the gradient through a NaN (a quirk): the op's gradient
    # is 1 only where x > 0, so multiply by that mask. The value stays relu's, NaN included
    # (NaN * 0 is NaN). Only with a NaN present (one sum of the output, >= 0 or NaN, says
    # so): the mask costs three kernels, 3x relu's own forward and backward.
    return out * (x > 0)


def softmax(x, *, axis):
    return torch.softmax(x, axis)


def log_softmax(x, *, axis):
    return torch.log_softmax(x, axis)


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    return F.conv2d(x, w, bias, stride, padding, dilation, groups)


def conv_transpose2d(x, w, bias=None, *, stride, padding, output_padding, dilation, groups):
    return F.conv_transpose2d(x, w, bias, stride, padding, output_padding, groups, dilation)


def _pool_padded(x, fill, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    """x with the pool's padding, and its ceil-mode cells after it, written in as `fill`."""
    _, ((t, b), (left, r)), (eh, ew) = pool_geometry(
        tuple(x.shape[2:]), kernel, stride, padding, dilation, ceil_mode)
    return F.pad(x, (left, r + ew, t, b + eh), value=fill)


def max_pool2d(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    # torch pads max pooling with -inf, like the reference; padding <= kernel // 2 is checked
    # by the op record, which is also torch's limit. Among tied values torch's kernel keeps
    # the first, as the op says; among NaNs it keeps the last (a quirk): with a NaN present
    # and a gradient wanted, pick the first maximum ourselves. torch pads both sides alike:
    # asymmetric padding is written in first (its ceil-mode rule is the record's).
    (t, b), (left, r) = pool_pads(padding)
    geometry = (kernel, stride, padding, dilation, ceil_mode)
    if _tracks_grad(x) and bool(torch.isnan(x).any()):
        padded = _pool_padded(x, -math.inf, *geometry)
        return _max_pool2d_first_maximum(padded, kernel, stride, dilation)
    if (t, left) == (b, r):
        return F.max_pool2d(x, kernel, stride, (t, left), dilation, ceil_mode=ceil_mode)
    return F.max_pool2d(_pool_padded(x, -math.inf, *geometry), kernel, stride, 0, dilation)


def _max_pool2d_first_maximum(padded, kernel, stride, dilation):
    """max_pool2d (VALID, over the padded input) as a gather at torch.argmax of each window
    (the first maximum, the first NaN counting as the maximum), so autograd sends the
    gradient there."""
    n, c, height, width = padded.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    windows = F.unfold(padded.reshape(n * c, 1, height, width), kernel, dilation=dilation,
                       stride=stride)
    out = torch.gather(windows, 1, torch.argmax(windows, dim=1, keepdim=True))
    return out.reshape(n, c, (height - dh * (kh - 1) - 1) // sh + 1,
                       (width - dw * (kw - 1) - 1) // sw + 1)


def avg_pool2d(x, *, kernel, stride, padding, ceil_mode=False, count_include_pad=True):
    (t, b), (left, r) = pool_pads(padding)
    if (t, left) == (b, r):  # torch's own options are the record's
        return F.avg_pool2d(x, kernel, stride, (t, left), ceil_mode, count_include_pad)
    # Asymmetric: zeros written in, then each window's sum over the cells it counts (a
    # mask of ones pooled the same way; both pools divide by kh * kw, which cancels).
    _, _, (eh, ew) = pool_geometry(tuple(x.shape[2:]), kernel, stride, padding, (1, 1),
                                   ceil_mode)
    total = F.avg_pool2d(F.pad(x, (left, r + ew, t, b + eh)), kernel, stride)
    if count_include_pad and (eh, ew) == (0, 0):
        return total
    h, w = x.shape[2:]
    if count_include_pad:
        mask = F.pad(x.new_ones((1, 1, h + t + b, w + left + r)), (0, ew, 0, eh))
    else:
        mask = F.pad(x.new_ones((1, 1, h, w)), (left, r + ew, t, b + eh))
    return total / F.avg_pool2d(mask, kernel, stride)


def sparse_softmax_cross_entropy(logits, labels):
    _check_indices("sparse_softmax_cross_entropy", labels, logits.shape[-1])
    # cross_entropy wants int64 class indices; .long() is free when they already are.
    return F.cross_entropy(logits, labels.long(), reduction="none")


def sub_(param, delta):
    """`param - delta`, written into `param` when nothing else holds its memory: the eager
    optimizers' update, as torch.optim does it (no new parameter tensor per step). Not an op
    record: `unigraph.optim` looks it up by name. With a view or a second holder of the
    storage (a tensor sliced or reshaped from the parameter), a new tensor, as `torch.sub`."""
    return _in_place_or_new(param, delta, torch.Tensor.sub_, torch.sub)


def _in_place_or_new(x, y, write, make):
    """`write(x, y)` (x's in-place method) when `_sole_holder(x)`, else `make(x, y)`, a new
    tensor; under no_grad, except where nothing is tracked (it would change nothing, ~2 us)."""
    if _sole_holder(x):
        if _untracked(y):
            return write(x, y)
        with torch.no_grad():
            return write(x, y)
    with torch.no_grad():
        return make(x, y)


def _untracked(y) -> bool:
    """Whether `y` (a tensor or a number) is no tensor autograd tracks."""
    return not getattr(y, "requires_grad", False)


def _sole_holder(x) -> bool:
    """Whether autograd does not track `x` and no other tensor (a view, a slice, a reshape)
    holds its storage: then an in-place op on it changes no value anyone else sees."""
    # 2: the tensor's own reference plus the temporary storage object asked about.
    return not x.requires_grad and torch._C._storage_Use_Count(
        x.untyped_storage()._cdata) == 2


def add_(x, y):
    """`x + y`, written into `x` when nothing else holds its memory (see `sub_`): the eager
    optimizers' state updates (a momentum buffer, Adam's moments). Not an op record."""
    return _in_place_or_new(x, y, torch.Tensor.add_, torch.add)


def mul_(x, y):
    """`x * y`, written into `x` when nothing else holds its memory (see `add_`)."""
    return _in_place_or_new(x, y, torch.Tensor.mul_, torch.mul)


def div_(x, y):
    """`x / y`, written into `x` when nothing else holds its memory (see `add_`)."""
    return _in_place_or_new(x, y, torch.Tensor.div_, torch.div)


def sqrt_(x):
    """`sqrt(x)`, written into `x` when nothing else holds its memory (see `add_`)."""
    if _sole_holder(x):
        return x.sqrt_()
    with torch.no_grad():
        return torch.sqrt(x)



def _adam_numbers(lr, step, beta1, beta2) -> tuple:
    """torch.optim.Adam's Python floats (`_single_tensor_adam`, lr and t as Python floats):
    (-lr / (1 - beta1 ** t), (1 - beta2 ** t) ** 0.5); lr and step 0-d tensors or numbers."""
    step, lr = float(step), float(lr)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    return -step_size, bias_correction2 ** 0.5


def _adam_into(param, grad, m, v, lr, step, beta1, beta2, eps, out: tuple) -> tuple:
    """`unigraph.ops.updates.adam_update`: the kernels of torch.optim.Adam's default CPU
    path, `m.lerp_(g, 1 - b1)`, `v.mul_(b2).addcmul_(g, g, value=1 - b2)`,
    `denom = (v.sqrt() / sqrt(c2)).add_(eps)`, `p.addcdiv_(m, denom, value=-lr / c1)`
    (c1, c2 the bias corrections as Python floats), the new param, m and v written into
    `out` (the inputs themselves, or new tensors: the same kernels, the same bits). float16:
    those kernels on float32 copies, each result rounded to float16 once (as torch's fused
    Adam; in float16 an eps of 1e-8 is 0: `ug.optim.Adam`)."""
    if param.dtype == torch.float16:
        wide = tuple(x.float() for x in (param, grad, m, v))
        results = _adam_into(*wide, lr, step, beta1, beta2, eps, (wide[0], wide[2], wide[3]))
        with torch.no_grad():
            for target, result in zip(out, results):
                target.copy_(result)
        return out
    step_size, bias_correction2_sqrt = _adam_numbers(lr, step, beta1, beta2)
    new_param, new_m, new_v = out
    with torch.no_grad():
        torch.lerp(m, grad, 1 - beta1, out=new_m)
        torch.mul(v, beta2, out=new_v).addcmul_(grad, grad, value=1 - beta2)
        denominator = (new_v.sqrt() / bias_correction2_sqrt).add_(eps)
        torch.addcdiv(param, new_m, denominator, value=step_size, out=new_param)
    return new_param, new_m, new_v


def adam_update(param, grad, m, v, lr, step, beta1, beta2, eps):
    """`_adam_into` new tensors: returns (param, m, v); the inputs are not written."""
    out = (torch.empty_like(param), torch.empty_like(m), torch.empty_like(v))
    return _adam_into(param, grad, m, v, lr, step, beta1, beta2, eps, out)


def adam_update_(param, grad, m, v, lr, step, beta1, beta2, eps):
    """`adam_update` written into param, m and v, as torch.optim.Adam writes them, when
    nothing else holds their memory and autograd tracks none of them (see `sub_`); else
    `adam_update`'s new tensors. Not an op record: `unigraph.optim` looks it up by name."""
    if grad.requires_grad or not (_sole_holder(param) and _sole_holder(m) and
                                  _sole_holder(v)):
        return adam_update(param, grad, m, v, lr, step, beta1, beta2, eps)
    return _adam_into(param, grad, m, v, lr, step, beta1, beta2, eps, (param, m, v))


def topk(x, *, k, axis, largest):
    """The first k of the stable sort: torch.topk orders equal values by no rule of their
    index (quirk "topk"); a stable descending sort keeps them in index order, NaN first."""
    order = torch.sort(x, dim=axis, descending=largest, stable=True).indices
    return torch.narrow(order, axis, 0, k)


LOWERINGS = {
    # elementwise
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "pow": torch.pow,
    "maximum": maximum,
    "minimum": minimum,
    "equal": torch.eq,
    "not_equal": torch.ne,
    "less": torch.lt,
    "less_equal": torch.le,
    "greater": torch.gt,
    "greater_equal": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "logical_not": torch.logical_not,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "stop_gradient": torch.Tensor.detach,
    "where": torch.where,
    "cast": cast,
    # math
    "mod": torch.remainder,  # floor semantics (the sign of y), as NumPy
    "floor_divide": floor_divide,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,  # halves to even, as NumPy
    "atan2": torch.atan2,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "erf": torch.erf,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "softplus": softplus,
    # linalg
    "matmul": torch.matmul,
    "einsum": einsum,
    "tril": lambda x, *, k: torch.tril(x, diagonal=k),
    "triu": lambda x, *, k: torch.triu(x, diagonal=k),
    # reductions
    "sum": reduce_sum,
    "mean": reduce_mean,
    "max": reduce_max,
    "min": reduce_min,
    "prod": reduce_prod,
    "cumsum": cumsum,
    "argmax": argmax,
    "argsort": lambda x, *, axis: torch.argsort(x, dim=axis, stable=True),  # NaN last
    "topk": topk,
    "any": reduce_any,
    "all": reduce_all,
    # shape
    "reshape": reshape,
    "transpose": transpose,
    "concat": concat,
    "stack": stack,
    "squeeze": squeeze,
    "ensure_shape": check_shape,  # (torch:static's code calls it too, on every run)
    "ensure_size": check_size,  # (open dims: checked before the run)
    "expand_dims": expand_dims,
    "broadcast_to": broadcast_to,
    "slice": slice_,
    "take": take,
    "one_hot": one_hot,
    "scatter_add": scatter_add,
    "constant": constant,
    "full": full,
    "full_like": full_like,
    "flip": flip,
    "print": print_,
    # nn
    "relu": relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softmax": softmax,
    "log_softmax": log_softmax,
    "conv2d": conv2d,
    "conv_transpose2d": conv_transpose2d,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
    # in place, for the eager optimizers (not an op record)
    "sub_": sub_,
    "add_": add_,
    "mul_": mul_,
    "div_": div_,
    "sqrt_": sqrt_,
    # optimizers' fused updates (`unigraph.ops.updates`; the second in place)
    "adam_update": adam_update,
    "adam_update_": adam_update_,
}
