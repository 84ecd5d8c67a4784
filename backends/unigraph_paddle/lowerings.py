"""The lowering table: op name -> Paddle function, one entry per op record.

The same table serves dygraph (`paddle:eager`, on `paddle.Tensor`) and PIR programs
(`paddle:static`, on `pir.Value`): every entry calls only Paddle APIs that exist in both
modes. Each entry is called as `LOWERINGS[op](*inputs, **attrs)` with the attrs the op
record defines (already normalised by the frontend: non-negative axes, tuples). Where
Paddle's own function differs from the op record (saturating softmax kernels, NaN dropped,
a gradient through an int cast), the entry composes the answer from other Paddle ops; each
such case is a record in `unigraph_paddle.quirks`.

float16 on CPU: Paddle 3.3.1 has no CPU float16 kernel for many ops (even `add`). Their
entries are wrapped by `widen_half`, which casts float16 inputs up to float32, runs the op
and casts the result back: one rounding, as NumPy's own float16 ufuncs do. On a GPU place
`lowerings_for(on_gpu=True)` unwraps them.

This module imports paddle: the backend imports it only from `PaddleBackend.load`, after
the ordered framework import.
"""

from __future__ import annotations

import math

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import _C_ops

from unigraph.index_checks import check_indices
from unigraph.printing import emit
from unigraph.shape_checks import TAGS, check_size, check_tag
from unigraph.shape_checks import check as check_shape
from unigraph_paddle import ranks
from unigraph_paddle.adam import adam_update, adam_update_
from unigraph_paddle.backend import GRAD_DEPTH
from unigraph_paddle.images import avg_pool2d, conv2d, conv_transpose2d, max_pool2d
from unigraph_paddle.inplace import in_place_or
from unigraph_paddle.program_scalars import EXPAND_FROM

_FLOATS = (paddle.float16, paddle.float32, paddle.float64)
_EAGER_TENSOR = paddle.Tensor


def widen_half(fn=None, *, dtype_input: int = 0):
    """Mark a lowering as lacking a CPU float16 kernel: it runs in float32 when input
    `dtype_input` is float16, and the result is cast back. Only the float16 inputs are cast
    (bool conditions and int indices pass through); an int result (argmax) stays as it is.

    >>> "add": widen_half(paddle.add)
    """
    if fn is None:
        return lambda f: widen_half(f, dtype_input=dtype_input)
    float16, float32 = paddle.float16, paddle.float32

    def lowered(*xs, **attrs):
        x = xs[dtype_input]
        dtype = x.dtype
        # An eager Tensor's dtype is the very object `paddle.float16` (an identity test,
        # ~0.05 us); a PIR Value's is only equal to it (`==` costs ~1 us).
        if dtype is not float16 and (type(x) is _EAGER_TENSOR or dtype != float16):
            return fn(*xs, **attrs)
        wide = [paddle.cast(x, float32) if x.dtype == float16 else x for x in xs]
        out = fn(*wide, **attrs)
        return paddle.cast(out, float16) if out.dtype == float32 else out

    lowered.__name__ = getattr(fn, "__name__", "lowered")
    lowered.__wrapped__ = fn
    lowered.widens_half = True
    return lowered


def widen_half_for_grad(fn):
    """Mark a lowering whose CPU float16 forward kernel exists but whose backward kernel
    does not (Paddle 3.3.1: exp_grad, log_grad): it runs in float32 when its input is
    float16, as `widen_half`, so that its backward does too; the result is rounded back
    once (CPU_HALF_GRAD_MISSING; the GPU table calls `fn` itself).

    >>> "log": widen_half_for_grad(paddle.log)
    """
    lowered = widen_half(fn)
    lowered.widens_half = False  # the forward kernel is there: not in CPU_HALF_MISSING
    lowered.widens_half_for_grad = True
    return lowered


def widen_small_ints(fn=None, *, dtype_input: int = 0):
    """Run a lowering in int32 when input `dtype_input` is int8, uint8 or int16, and cast
    the int32 result back: Paddle 3.3.1 lacks most CPU kernels for these dtypes (quirk
    "small ints" in unigraph_paddle.quirks). Casting back wraps modulo 2**bits, so the
    result is NumPy's wrapping arithmetic. Only inputs of that dtype are cast (bool
    conditions and int32/int64 indices pass through); a bool or int64 result is kept.

    >>> "mul": widen_small_ints(widen_half(paddle.multiply))
    """
    if fn is None:
        return lambda f: widen_small_ints(f, dtype_input=dtype_input)
    int8, uint8, int16, int32 = paddle.int8, paddle.uint8, paddle.int16, paddle.int32
    small = (int8, uint8, int16)

    def lowered(*xs, **attrs):
        dtype = xs[dtype_input].dtype
        # Eager dtypes are the interned objects (identity tests are cheap); PIR Values'
        # dtypes only compare equal, at build time.
        if type(xs[dtype_input]) is _EAGER_TENSOR:
            if dtype is not int8 and dtype is not uint8 and dtype is not int16:
                return fn(*xs, **attrs)
        elif dtype not in small:
            return fn(*xs, **attrs)
        wide = [paddle.cast(x, int32) if x.dtype == dtype else x for x in xs]
        out = fn(*wide, **attrs)
        return paddle.cast(out, dtype) if out.dtype == int32 else out

    lowered.__name__ = getattr(fn, "__name__", "lowered")
    lowered.widens_small_ints = True
    if getattr(fn, "widens_half", False):  # keep widen_half's marks (CPU_HALF_MISSING, GPU)
        lowered.widens_half = True
        lowered.__wrapped__ = widen_small_ints(fn.__wrapped__, dtype_input=dtype_input)
    return lowered


_F32, _F64, _I32, _I64 = paddle.float32, paddle.float64, paddle.int32, paddle.int64


def eager_direct(c_op, general, *, any_dtype: bool = False):
    """A lowering that calls `c_op` (a `_C_ops` kernel) on two eager Tensors of one dtype
    that needs no widening (float32, float64, int32, int64; any dtype with `any_dtype`),
    and `general` otherwise (a Program, float16, small ints, mixed dtypes). The `paddle.*`
    function calls that same kernel in dygraph after ~2 us of Python (its decorator, the
    mode test, our widening wrappers): most of a scalar op's cost (the counter's loop).
    `general`'s float16 marks are kept (CPU_HALF_MISSING, the GPU table).

    >>> "add": eager_direct(_C_ops.add, widen_small_ints(widen_half(paddle.add)))
    """

    def lowered(x, y):
        if type(x) is _EAGER_TENSOR and type(y) is _EAGER_TENSOR:
            dtype = x.dtype
            # Identity tests: eager dtypes are the interned objects.
            if dtype is y.dtype and (any_dtype or dtype is _F32 or dtype is _F64
                                     or dtype is _I64 or dtype is _I32):
                return c_op(x, y)
        return general(x, y)

    lowered.__name__ = getattr(general, "__name__", "lowered")
    if getattr(general, "widens_half", False):
        lowered.widens_half = True
        lowered.__wrapped__ = eager_direct(c_op, general.__wrapped__, any_dtype=any_dtype)
    return lowered


def _is_float(x) -> bool:
    return x.dtype in _FLOATS


def _axes(axis):
    return None if axis is None else list(axis)


# -- elementwise ------------------------------------------------------------------------------


def cast(x, *, dtype):
    if _is_float(x) and dtype in ("int8", "uint8", "int16"):
        # Detaching an int16 (int8, uint8) in a Program has no share_data_ kernel (quirk
        # "small ints"): through int32, detached there (in-range values are exact).
        return paddle.cast(cast(x, dtype="int32"), dtype)
    out = paddle.cast(x, dtype)
    if _is_float(x) and not _is_float(out):
        # Paddle's cast backward passes the gradient through a float -> int cast; the op
        # record (and every other framework) gives 0: the int result is cut off.
        out = out.detach()
    return out


def _eager_without_gradient(*xs) -> bool:
    """True for eager Tensors none of which takes a gradient: a workaround that only fixes
    a gradient can be skipped (a Program's values are always built for one)."""
    return all(type(x) is _EAGER_TENSOR and x.stop_gradient for x in xs)


def _eager_finite(x) -> bool:
    """True for an eager Tensor with no inf or NaN in it: sum(x * 0) is 0 (a scale, a sum
    and a sync: ~35 us per 1e5 float32 elements; Paddle's any of isinf took ~180 us); False
    for a Program's value, which any run may fill with one."""
    if type(x) is not _EAGER_TENSOR:
        return False
    return float(_C_ops.sum(_C_ops.scale(x, 0.0, 0.0, True), None, None, False)) == 0.0


def _nan_if_either(fn):
    """maximum/minimum: Paddle's own value propagates NaN but its gradient there is 0; the
    record gives NaN to both inputs where the result is NaN. (s * s has the gradient 2s = NaN
    in both inputs, as s = x + y is NaN there.) Ties already split equally, as the record.
    s is 0 where neither is NaN: there s * s gets a 0 cotangent, and 0 * 2s is NaN where s
    is infinite (maximum(inf, 1) had the gradient NaN, not [1, 0])."""

    def lowered(x, y):
        out = fn(x, y)
        if not _is_float(out) or _eager_without_gradient(x, y):
            return out  # (the value already propagates NaN; only the gradient needs more)
        either = paddle.logical_or(paddle.isnan(x), paddle.isnan(y))
        s = paddle.add(x, y)
        if not _eager_finite(s):  # a Program's values: always
            s = paddle.where(either, s, paddle.zeros_like(out))
        return paddle.where(either, paddle.multiply(s, s), out)

    lowered.__name__ = fn.__name__
    return lowered


def absolute(x):
    """|x|. Paddle's abs backward is NaN at +-inf, where the record's sign(x) is +-1 (quirk
    "abs"): infinities go through x times a constant +-1 (paddle.sign's backward would be
    inf * 0 there), the others through abs of x with the infinities masked out of it."""
    if not _is_float(x) or _eager_without_gradient(x) or _eager_finite(x):
        return paddle.abs(x)
    # Eagerly _C_ops.where (x and its masks share one shape): paddle.where's broadcasting
    # checks cost ~1 ms per 1e5 elements. (With a gradient: ~2 ms per 1e5 elements in all,
    # where paddle.abs takes 16 us; eagerly only for an x holding an inf.)
    where = _C_ops.where if type(x) is _EAGER_TENSOR else paddle.where
    infinite = paddle.isinf(x)
    ones = paddle.ones_like(x)
    sign = where(paddle.greater_than(x, paddle.zeros_like(x)), ones, -ones)  # x: no gradient
    finite = where(infinite, paddle.zeros_like(x), x)
    return where(infinite, paddle.multiply(x, sign), paddle.abs(finite))


maximum = _nan_if_either(paddle.maximum)
minimum = _nan_if_either(paddle.minimum)


def eager_multiply(x, y):
    """x * y on two eager Tensors of one dtype (`eager_direct`'s kernel for "mul"). A 0-d
    float times a tensor, neither needing a gradient (an optimizer's lr * g), runs Paddle's
    `scale` kernel: the same products, ~5x faster than its broadcasting multiply (3.3.1,
    784x256 float32: 22 us against 105). The bias is -0.0, the identity of IEEE addition
    (a -0.0 product stays -0.0)."""
    if x.ndim != y.ndim:
        scalar, tensor = (x, y) if x.ndim == 0 else (y, x)
        dtype = scalar.dtype
        if (scalar.ndim == 0 and (dtype is _F32 or dtype is _F64)
                and scalar.stop_gradient and tensor.stop_gradient):
            return _C_ops.scale(tensor, scalar, -0.0, True)
    return _C_ops.multiply(x, y)


def _scalar_and_tensor(x, y):
    """(0-d, tensor) when one of two eager Tensors of one dtype is a 0-d float32 or float64,
    the other has EXPAND_FROM elements or more, and neither needs a gradient; else None."""
    if x.ndim == y.ndim or not (x.stop_gradient and y.stop_gradient):
        return None
    scalar, tensor = (x, y) if x.ndim == 0 else (y, x)
    dtype = scalar.dtype
    if scalar.ndim != 0 or not (dtype is _F32 or dtype is _F64) or tensor.size < EXPAND_FROM:
        return None
    return scalar, tensor


def eager_add(x, y):
    """x + y on two eager Tensors of one dtype (`eager_direct`'s kernel for "add"). A 0-d
    float plus a large tensor, neither needing a gradient, runs Paddle's `scale` kernel as
    x * 1.0 + c: x * 1.0 is x, so each element is the one rounding of the sum, as in the
    broadcasting add, which is ~5x slower (3.3.1, 784x256 float32: 40 us against 215 with
    the 0-d, 105 with it expanded). The bias is a number in dygraph (in a Program an IR
    attribute: see unigraph_paddle.program_scalars)."""
    pair = _scalar_and_tensor(x, y)
    if pair is not None:
        return _C_ops.scale(pair[1], 1.0, pair[0].item(), True)
    return _C_ops.add(x, y)


# The exponent range of a power of two each dtype holds (subnormals included).
_POWERS = {_F32: (-149, 127), _F64: (-1074, 1023)}


def exact_reciprocal(value: float, dtype):
    """1 / value when value is a power of two whose reciprocal `dtype` holds, else None: then
    x / value and x * (1 / value) are one rounding of the same number, for every x."""
    fraction, exponent = math.frexp(value)  # value = fraction * 2**exponent
    if fraction != 0.5 and fraction != -0.5:  # not a power of two (nor 0, inf, NaN)
        return None
    low, high = _POWERS[dtype]
    power = 1 - exponent  # 1 / value = +-2**power
    return math.ldexp(fraction * 2.0, power) if low <= power <= high else None


def eager_divide(x, y):
    """x / y on two eager Tensors of one dtype (`eager_direct`'s kernel for "div"). A large
    tensor divided by a 0-d float that is a power of two (Adam's 1 - beta1 ** t is 1.0 in
    float32 from step 165 on), neither needing a gradient, runs `scale` by the reciprocal:
    the same quotients, ~6x faster than Paddle's broadcasting divide (3.3.1, 784x256 float32:
    40 us against 250). Other divisors keep the divide: Paddle's same-shape divide is not
    correctly rounded, and no other kernel divides. The bias is -0.0 (see eager_multiply)."""
    if y.ndim == 0 and x.ndim != 0:
        pair = _scalar_and_tensor(x, y)
        if pair is not None:
            reciprocal = exact_reciprocal(y.item(), y.dtype)
            if reciprocal is not None:
                return _C_ops.scale(x, reciprocal, -0.0, True)
    return _C_ops.divide(x, y)


def softplus(x):
    # F.softplus is log(1 + exp(x)) as written: below about -17 (float32) or -37 (float64) the
    # 1 + exp(x) rounds to 1 and the result is 0, not exp(x) (quirk "softplus"); its threshold
    # returned x itself above 20. Written as max(x, 0) + log1p(exp(-|x|)), exp never
    # overflows; -|x| is taken as where(x > 0, -x, x), whose gradient is +-1 (also at 0, where
    # abs' is 0), so the gradient is sigmoid(x) everywhere, 0.5 at 0.
    positive = x > 0
    toward_zero = paddle.where(positive, -x, x)
    # exp, not paddle.exp: Paddle's exp(-inf) is 2.94e-39 (float32), not 0 (see exp below).
    return paddle.where(positive, x, paddle.zeros_like(x)) + paddle.log1p(exp(toward_zero))


# -- linalg -----------------------------------------------------------------------------------


def matmul(a, b):
    # Paddle's matmul_grad fails on a zero-size operand that has no memory (a constant, or
    # what paddle:static's `cond` makes of an empty result): "Required tensor shall not be
    # nullptr". With a zero-size operand the product is all zeros and every gradient is
    # zero (or empty), so the product is zeros of its shape, with no backward.
    if 0 in a.shape or 0 in b.shape:
        return paddle.zeros_like(paddle.matmul(a, b))
    # Paddle's matmul_grad fails when both operands have batch dims but different ranks
    # ([2, 1, 3, 4] @ [3, 4, 2]); leading size-1 dims make the ranks equal.
    extra = a.ndim - b.ndim
    if extra and a.ndim > 2 and b.ndim > 2:
        if extra > 0:
            b = paddle.unsqueeze(b, list(range(extra)))
        else:
            a = paddle.unsqueeze(a, list(range(-extra)))
    return paddle.matmul(a, b)


# -- reductions -------------------------------------------------------------------------------
# A node's axis is never (): the frontend returns x for axis=() (Paddle would read "all axes").


def reduce_sum(x, *, axis, keepdims):
    # paddle.sum widens int32 to int64 by default; ours keeps the dtype.
    return paddle.sum(x, axis=_axes(axis), keepdim=keepdims, dtype=x.dtype)


def reduce_any(x, *, axis, keepdims):
    return paddle.any(x, axis=_axes(axis), keepdim=keepdims)


def reduce_all(x, *, axis, keepdims):
    return paddle.all(x, axis=_axes(axis), keepdim=keepdims)


def reduce_mean(x, *, axis, keepdims):
    return paddle.mean(x, axis=_axes(axis), keepdim=keepdims)


def reduce_max(x, *, axis, keepdims, initial=None):
    # Paddle's max propagates NaN and splits tied gradients equally: the record's rule.
    # (On a 2-D view where Paddle's backward is wrong: ranks.max_or_min.)
    if initial is not None:
        x = _with_initial(x, axis, initial)
    return ranks.max_or_min(paddle.max, x, _axes(axis), keepdims)


def _with_initial(x, axis, initial):
    """x with a slab of `initial` after each reduced axis that is empty or unknown until the
    run (a Program's -1): Paddle's max refuses an empty axis, and the slab makes it give
    `initial` there (the max elsewhere: `initial` is -inf, the record's one value)."""
    for a in range(len(x.shape)) if axis is None else axis:
        if x.shape[a] > 0:
            continue
        slab = paddle.full_like(paddle.sum(x, axis=a, keepdim=True), initial)
        x = paddle.concat([x, slab], axis=a)
    return x


def reduce_min(x, *, axis, keepdims):
    return ranks.max_or_min(paddle.min, x, _axes(axis), keepdims)


def reduce_prod(x, *, axis, keepdims):
    # dtype: paddle.prod would widen int32 to int64. Eagerly, only an x that takes a gradient
    # and holds a zero needs the route (elsewhere the same ops as ever); a Program cannot tell.
    # (NumPy looks for the zero: Paddle's x == 0 on a tensor that takes a gradient costs ~50 us.)
    if not _is_float(x) or (paddle.in_dynamic_mode() and (
            x.stop_gradient or not (x.numpy() == 0).any())):
        return paddle.prod(x, axis=_axes(axis), keepdim=keepdims, dtype=x.dtype)
    rank = len(x.shape)
    reduced = sorted(a % rank for a in axis) if axis is not None else list(range(rank))
    if any(x.shape[a] < 0 for a in reduced):  # a dim to reduce unknown until the run
        return _prod_of_zeros_by_counts(x, axis, keepdims, reduced)
    return _prod_of_zeros_by_multiplies(x, axis, keepdims, reduced)


def _prod_of_zeros_by_multiplies(x, axis, keepdims, reduced):
    """paddle.prod, but a slice holding a zero is multiplied out by multiplies on a 2-D
    [kept, reduced] view: Paddle's prod_grad divides the product by each element, so the
    gradient at a zero is NaN (0/0) where it is the product of the others. The other slices
    are Paddle's prod, whose gradient is right there; each side sees 1 in place of the
    other's elements (so neither gradient reads a 0/0). `reduced`: the reduced dims, sorted
    and non-negative, each of known size."""
    rank = len(x.shape)
    n = math.prod(x.shape[a] for a in reduced)
    if n == 1:  # the product of one element is that element (prod_grad would divide by it)
        return paddle.squeeze(x, axis=reduced) if reduced and not keepdims else \
            paddle.assign(x)
    if n < 2:
        return paddle.prod(x, axis=_axes(axis), keepdim=keepdims, dtype=x.dtype)
    # x itself is read once (a copy serves both sides), so its gradient from here is one
    # term, summed with the program's others as Paddle's own prod_grad was
    x = paddle.assign(x)
    # where's operands of one shape: a Program's where broadcasts by adding zeros (-0.0 + 0.0
    # is +0.0: the sign of a zero product was lost)
    zero = paddle.expand_as(paddle.any(x == 0, axis=reduced, keepdim=True), x)
    ones = paddle.ones_like(x)
    out = paddle.prod(paddle.where(zero, ones, x), axis=_axes(axis), keepdim=keepdims,
                      dtype=x.dtype)
    kept = [a for a in range(rank) if a not in reduced]
    view = paddle.transpose(paddle.where(zero, x, ones), kept + reduced)
    view = paddle.reshape(view, [-1, n])  # 2-D: Paddle slices at most 6 dims
    while n > 1:  # halves multiplied pairwise, an odd one out carried over
        half = n // 2
        pairs = view[:, :half] * view[:, half:2 * half]
        view = paddle.concat([pairs, view[:, 2 * half:]], axis=1) if n % 2 else pairs
        n = half + n % 2
    shape = out.shape if all(d >= 0 for d in out.shape) else paddle.shape(out)
    # each side is 1 where the other's slice is: their product is exact, and needs no where
    return paddle.reshape(view, shape) * out


def _prod_of_zeros_by_counts(x, axis, keepdims, reduced):
    """paddle.prod with no size of a reduced dim needed (one left open by input_spec): the
    product is z * nz, nz Paddle's prod of the slice with 1 in place of its zeros (no zero
    inside: its gradient is right) and z the product of the zeros: 1 with none, the zero
    itself with one (the largest of the zeros and -1s, by topk: its value, sign included,
    and a gradient of 1; paddle.max's backward took ~7 ms on [64, 256], topk's ~0.1 ms), with
    two or more a zero of their signs' product (z_one squared: gradient 0). Every where
    takes operands of one shape: a Program's where broadcasts by adding zeros, which turns
    -0.0 into +0.0. `reduced`: the reduced dims, sorted and non-negative."""
    kept = [a for a in range(len(x.shape)) if a not in reduced]
    zero = x == 0
    ones, minus_ones = paddle.full_like(x, 1.0), paddle.full_like(x, -1.0)
    x = paddle.assign(x)  # read once: one gradient term, as Paddle's own prod_grad was
    nz = paddle.prod(paddle.where(zero, ones, x), axis=_axes(axis), keepdim=keepdims,
                     dtype=x.dtype)
    # [kept..., reduced] (flatten merges the reduced: a reshape's -1 is ambiguous when a
    # kept dim is 0), then one -1 more in each slice: an empty slice has no zero either
    view = paddle.transpose(paddle.where(zero, x, minus_ones), kept + reduced)
    view = paddle.flatten(view, start_axis=len(kept))
    view = paddle.concat([view, paddle.full_like(paddle.sum(view, -1, keepdim=True), -1.0)], -1)
    z_one = paddle.squeeze(paddle.topk(view, 1, axis=-1)[0], -1)
    if keepdims:
        z_one = paddle.unsqueeze(z_one, reduced)
    negative_zero = paddle.logical_and(zero, ones / x < 0)  # 1 / -0.0 is -inf
    signs = paddle.prod(paddle.where(negative_zero, minus_ones, ones), axis=_axes(axis),
                        keepdim=keepdims)
    z_many = signs * (z_one * z_one)  # with no zero: 1 * (-1 * -1)
    zeros = paddle.sum(paddle.cast(zero, "int32"), axis=_axes(axis), keepdim=keepdims)
    return paddle.where(zeros == 1, z_one, z_many) * nz


def where(condition, x, y):
    """paddle.where. In a Program, paddle.where broadcasts operands of different shapes by
    adding zeros, and -0.0 + 0.0 is +0.0: a selected -0.0 came out +0.0 (quirk "where").
    There operands are broadcast here by subtracting those zeros instead (x - 0.0 is x,
    -0.0 included), and the condition by an or with False; dygraph broadcasts by
    broadcast_to, which keeps every value. A Program's paddle.where takes operands of
    equal traced shapes as they are, and an open dim (-1) in each may be 1 in one and not
    in another when it runs: those are broadcast here too (bools as int32)."""
    shape = list(x.shape)
    if paddle.in_dynamic_mode() or (
            list(condition.shape) == shape == list(y.shape) and -1 not in shape):
        return paddle.where(condition, x, y)
    if x.dtype == paddle.bool:
        x, y = paddle.cast(x, "int32"), paddle.cast(y, "int32")
        return paddle.cast(where(condition, x, y), "bool")
    zeros = paddle.zeros_like(x) + paddle.zeros_like(y) + paddle.zeros_like(condition, x.dtype)
    condition = paddle.logical_or(condition, paddle.zeros_like(zeros, "bool"))
    return paddle.where(condition, x - zeros, y - zeros)


def atan2(x, y):
    """paddle.atan2. In a Program its gradient fails to reduce a broadcast over a dim left
    open (-1) with a raw InvalidArgumentError ("expanded size (-1) ... for expand_v2"):
    there both operands are broadcast first, by subtracting zeros of the result's shape
    (exact, -0.0 kept, as `where`), and the subtraction's gradient reduces them."""
    if paddle.in_dynamic_mode() or -1 not in list(x.shape) + list(y.shape):
        return paddle.atan2(x, y)
    zeros = paddle.zeros_like(x) + paddle.zeros_like(y)
    return paddle.atan2(x - zeros, y - zeros)


def cumsum(x, *, axis):
    return paddle.cumsum(x, axis=axis, dtype=x.dtype)


def argmax(x, *, axis, keepdims):
    # Above rank 6 (Paddle's limit) on a 3-D view: ranks.on_a_view.
    return ranks.on_a_view(lambda x, axis: _argmax(x, axis, keepdims), x, axis, keepdims)


def _argmax(x, axis, keepdims):
    out = paddle.argmax(x, axis=axis, keepdim=keepdims, dtype="int64")
    if not _is_float(x):
        return out
    # The record counts a NaN as the maximum (NumPy's rule); Paddle's kernel skips it. Where
    # there is a NaN the answer is the first NaN (reading NaN as +inf would lose to an
    # earlier +inf).
    nan = paddle.isnan(x)
    first_nan = paddle.argmax(nan.astype("int32"), axis=axis, keepdim=keepdims, dtype="int64")
    return paddle.where(paddle.any(nan, axis=axis, keepdim=keepdims), first_nan, out)


# -- shape ------------------------------------------------------------------------------------


def reshape(x, sizes=None, *, shape):
    if sizes is None:
        return paddle.reshape(x, list(shape))
    if type(x) is _EAGER_TENSOR:  # (every size is known eagerly)
        dims = [int(d) for d in sizes.tolist()]
        if 0 in dims:  # a listed 0 copies x's dim, and a shape tensor [0] fails eagerly
            return paddle.zeros(dims, x.dtype)  # (quirk "take (empty result, eager)")
        return paddle.reshape(x, dims)
    # A Program: the dims known while tracing stay known to it (ints, but 0, which to
    # Paddle's reshape means "copy x's dim"), the others are read from `sizes` at run time.
    return paddle.reshape(x, [d if d else sizes[i] for i, d in enumerate(shape)])


def transpose(x, *, perm):
    return paddle.transpose(x, list(perm))


def by_minus_one_safe(fn):
    """An int `floor_divide` or `mod` lowering that never divides by -1: Paddle 3.3.1's
    integer kernels kill the process (SIGFPE) for the smallest int32 or int64 divided by
    -1, eager and in a Program (quirk "floor_divide (mod)"). A divisor -1 is 1 there, and
    the quotient is negated (x // -1 is -x, which wraps for the smallest int as NumPy;
    x % -1 and x % 1 are both 0)."""
    quotient = fn is paddle.floor_divide

    def lowered(x, y):
        if x.dtype != paddle.int32 and x.dtype != paddle.int64:
            return fn(x, y)
        minus_one = paddle.cast(paddle.equal(y, paddle.full([], -1, y.dtype)), y.dtype)
        out = fn(x, y + minus_one * 2)
        return out * (1 - minus_one * 2) if quotient else out

    lowered.__name__ = fn.__name__
    return lowered


def concat(*xs, axis):
    return paddle.concat(list(xs), axis=axis)


def stack(*xs, axis):
    # Paddle's eager stack_grad segfaults on zero-size operands when one of them takes no
    # gradient (a constant, an input not differentiated). The stack of zero-size operands is
    # empty and every gradient is empty: it is made as zeros of its shape, with no backward.
    if 0 in xs[0].shape:
        return paddle.zeros_like(paddle.stack(list(xs), axis=axis))
    return paddle.stack(list(xs), axis=axis)


def slice_(x, *, begin, end, stride):
    # Above rank 6 (Paddle's limit) one axis at a time: ranks.strided_slice. A Program has no
    # CPU float16 strided_slice_grad kernel (3.3.1; dygraph has one): there a float16 slice
    # runs in float32, exact (a slice rounds nothing), and is cast back.
    if type(x) is not _EAGER_TENSOR and x.dtype == paddle.float16:
        wide = ranks.strided_slice(paddle.cast(x, paddle.float32), begin, end, stride)
        return paddle.cast(wide, paddle.float16)
    return ranks.strided_slice(x, begin, end, stride)


def squeeze(x, *, axis):
    dims = list(x.shape)  # (-1: left open by input_spec, known when the program runs)
    if all(dims[a] == 1 for a in axis):
        return paddle.squeeze(x, axis=list(axis))
    # paddle.squeeze keeps a dim that is not 1: a reshape to the other dims refuses it when
    # the program runs (the op's inference checked the known sizes)
    kept = [d for i, d in enumerate(dims) if i not in axis]
    if -1 in kept:  # another open dim: the sizes read when the program runs (a -1 in the
        shape = paddle.shape(x)  # target shape would take the squeezed dim's elements)
        kept = paddle.concat([shape[i:i + 1] for i in range(len(dims)) if i not in axis])
    return paddle.reshape(x, kept)


def expand_dims(x, *, axis):
    dims = list(x.shape)
    if dims.count(-1) > 1:  # several dims unknown until the program runs
        return paddle.unsqueeze(x, axis)
    # reshape, not unsqueeze: PIR on CPU has no float16 kernel for unsqueeze (3.3.1).
    return paddle.reshape(x, dims[:axis] + [1] + dims[axis:])


def ensure_shape(x, *others, shape, message):
    if type(x) is _EAGER_TENSOR:
        return check_shape(x, *others, shape=shape, message=message)
    # A Program: each value whose dims the check knows and the Program does not is reshaped,
    # when it runs, to its own shape where those dims agree, else to -2 - (each size * TAGS
    # + the check's tag), which Paddle refuses printing that shape ("must not be negative
    # ... received shape = [-4194306, ...]"), where its Assert would print its data to
    # stdout, not into the error, and its error names no op; translate_check_error reads
    # the check and the sizes back. The reshapes are ops of the block, run with it; x flows
    # on, given the sizes the check knows (below).
    tag = check_tag(message)
    for value in (x, *others):
        open_dims = [i for i, want in enumerate(shape) if want is not None and value.shape[i] < 0]
        if open_dims:
            if value.dtype == paddle.int16:  # no shape kernel (quirk "small ints")
                value = paddle.cast(value, paddle.int32)
            actual = paddle.shape(value)
            agree = paddle.all(paddle.stack([actual[i] == shape[i] for i in open_dims]))
            paddle.reshape(value, paddle.where(agree, actual, -2 - (actual * TAGS + tag)))
    if any(want is not None and d < 0 for want, d in zip(shape, x.shape)):
        # The Program's x gets the sizes the trace now knows, as later ops that check sizes
        # while building need (index_add: "-1 must be equal to 3"); it runs after the check
        # above. A dim left open stays its run-time size: not reshape's 0, "keep this dim",
        # which of a value with no elements Paddle makes a size 0 (quirk "ensure_shape").
        readable = paddle.cast(x, paddle.int32) if x.dtype == paddle.int16 else x
        sizes = paddle.shape(readable)
        return paddle.reshape(x, [sizes[i] if want is None and d < 0 else
                                  d if want is None else want
                                  for i, (want, d) in enumerate(zip(shape, x.shape))])
    return x


def broadcast_to(x, *, shape):
    return paddle.broadcast_to(x, list(shape))


def _checked_indices(op, indices, x, x_axis, axis=None):
    """`indices` into axis `x_axis` of `x`, refused with unigraph's error when one lies
    outside [0, size). Eager: checked at once, by the smallest and largest index (two
    reductions, ~8 us; `paddle.any` of comparisons and `bool()` cost ~40). Static (no
    Assert op that can print a value): each negative index i becomes i - size, which
    Paddle's gather refuses (it would wrap i), printing the value;
    `unigraph.index_checks.translate_run_error` reads it."""
    if type(indices) is _EAGER_TENSOR:
        size = x.shape[x_axis]
        if 0 not in indices.shape and (_C_ops.min(indices, [], False).item() < 0
                                       or _C_ops.max(indices, [], False).item() >= size):
            check_indices(op, indices.numpy(), size, axis)  # builds the message
        return indices
    known = x.shape[x_axis]  # -1: unknown until the run
    if known >= 0:  # one `full` op, where reading the shape at run time costs five
        size = paddle.full([], known, indices.dtype)
    else:
        size = paddle.cast(paddle.shape(x)[x_axis], indices.dtype)
    return paddle.where(indices < 0, indices - size, indices)


def take(x, indices, *, axis):
    indices = _checked_indices("take", indices, x, axis, axis)
    # paddle.gather takes a 1-D index; gather the flat indices, then restore their shape.
    flat = paddle.reshape(indices, [-1])
    x_shape, index_shape = list(x.shape), list(indices.shape)
    dims = x_shape[:axis] + index_shape + x_shape[axis + 1:]
    if type(x) is _EAGER_TENSOR:
        if 0 in dims:  # (quirk "take (empty result, eager)"; the indices are checked above)
            return paddle.zeros(dims, x.dtype)  # no elements: its shape is all it holds
    elif 0 in x.shape:
        return _take_of_nothing(x, indices, flat, axis, dims)
    if -1 in x.shape:  # unknown until the run, maybe 0 (a gather would check nothing there)
        gathered = paddle.index_select(x, flat, axis=axis)  # (quirk: take, an empty axis)
    else:
        gathered = paddle.gather(x, flat, axis=axis)
    # several dims unknown until the program runs, or an empty one: a listed 0 would
    # mean "copy that dim of the input" to Paddle's reshape; one read from a tensor does not
    if dims.count(-1) > 1 or 0 in dims:
        shape = paddle.shape
        dims = paddle.concat([shape(x)[:axis], shape(indices), shape(x)[axis + 1:]])
    return paddle.reshape(gathered, dims)


def _take_of_nothing(x, indices, flat, axis, dims):
    """take of a Program value with no elements (quirk "take (no elements)"): Paddle's
    gather gives a value of other sizes, or one holding no memory, which the reshape after
    it refuses. The result has no elements either: zeros of its shape (x's gradient is
    empty). The indices are still checked, by a gather of the axis's row numbers (an op of
    the block, run with it). `dims`: the result's shape in the Program (-1: open)."""
    known = x.shape[axis]
    rows = paddle.arange(known if known >= 0 else paddle.shape(x)[axis], dtype=flat.dtype)
    paddle.gather(rows, flat)
    if -1 in dims:  # open dims: their sizes when the program runs
        sizes = [paddle.shape(x)[i] for i in range(len(x.shape))]
        index_sizes = [paddle.shape(indices)[i] for i in range(len(indices.shape))]
        every = sizes[:axis] + index_sizes + sizes[axis + 1:]
        dims = [every[i] if d < 0 else d for i, d in enumerate(dims)]
    return paddle.zeros(dims, x.dtype)


def one_hot(indices, *, depth, dtype):
    # F.one_hot raises on an index outside [0, depth); ours gives a row of zeros.
    classes = paddle.arange(depth, dtype=indices.dtype)
    return paddle.cast(paddle.equal(paddle.unsqueeze(indices, -1), classes), dtype)


def scatter_add(x, indices, updates, *, axis):
    if x.dtype == paddle.float16:
        # index_add's float16 kernel adds repeats in float16 (quirk "scatter_add"): in
        # float32, rounded once. (Not widen_half: that marks a kernel Paddle lacks.)
        wide = _scatter_add(paddle.cast(x, paddle.float32), indices,
                            paddle.cast(updates, paddle.float32), axis)
        return paddle.cast(wide, paddle.float16)
    return _scatter_add(x, indices, updates, axis)


def _scatter_add(x, indices, updates, axis):
    others = [i for i in range(len(x.shape)) if i != axis]
    if all(x.shape[i] == updates.shape[i] for i in others):
        return paddle.index_add(x, indices, axis, updates)  # a new tensor: x is not written
    # A dim input_spec leaves open (-1 in a Program) in one of x and updates and known in
    # the other: index_add's build-time check refuses it; scatter_nd_add writes along the
    # leading axis and checks when it runs (`axis` moved first, then back).
    perm = [axis, *others]
    if axis:
        x, updates = paddle.transpose(x, perm), paddle.transpose(updates, perm)
    out = paddle.scatter_nd_add(x, paddle.unsqueeze(indices, -1), updates)
    return paddle.transpose(out, np.argsort(perm).tolist()) if axis else out


def _printable(x):
    # paddle.static.Print takes no int8, uint8 or int16, nor can they be detached (quirk
    # "cast (float to int8, uint8, int16)"): printed as int32.
    return paddle.cast(x, "int32") if x.dtype in (paddle.int8, paddle.uint8, paddle.int16) else x


def print_(*xs, message, texts=None):
    if type(xs[0]) is _EAGER_TENSOR:
        emit(message, *[x.numpy() for x in xs], texts=texts)
        return xs[0]
    # A Program has no Python callback in Paddle 3.3.1 (py_func is refused under PIR: quirk
    # "print"): Paddle's own Print op, its text reduced to the message and the data (with
    # `texts`, a Python print's: each value's message is the text before it).
    # Printing detached copies: Paddle's Print prints the gradient too when one flows
    # through it, whatever print_phase says; the result then depends on the prints.
    messages = [message] * len(xs) if texts is None else [t.strip() for t in texts[:-1]]
    printed = [paddle.static.Print(
        _printable(x).detach(), message=text, summarize=-1, print_tensor_name=False,
        print_tensor_type=False, print_tensor_shape=False, print_tensor_layout=False,
        print_tensor_lod=False) for x, text in zip(xs, messages)]
    zero = paddle.cast(paddle.zeros_like(printed[0]), xs[0].dtype)
    if xs[0].dtype == paddle.bool:
        return paddle.logical_or(xs[0], zero)
    return LOWERINGS["add"](xs[0], zero)  # the table's add: small ints have no kernel


def full(*, shape, value, dtype):
    return paddle.full(list(shape), value, dtype)


def full_like(x, *, value, dtype):
    return paddle.full_like(x, value, dtype)


def flip(x, *, axes):
    return paddle.flip(x, list(axes))


def einsum(*xs, equation):
    if not paddle.in_dynamic_mode():
        # A Program's einsum gradient is wrong where an operand is also the first operand
        # of an add or subtract (quirk "einsum (gradient)"); a copy of it is not.
        xs = [paddle.assign(x) for x in xs]
    return paddle.einsum(equation, *xs)


def constant(*, value):
    if value.ndim == 0 and not (value.dtype == "int64" and abs(int(value)) > 2**53):
        # One `full` op; `assign` of an array costs two in a Program. (`full` carries its
        # value as a double: exact for every dtype but int64 beyond 2**53.)
        return paddle.full([], value.item(), value.dtype.name)
    if value.dtype.kind == "f" and not paddle.in_dynamic_mode() and \
            np.signbit(value[value == 0]).any():
        return _with_negative_zeros(value)
    if value.dtype == "float16":  # assign takes no float16 array; float32 holds it exactly
        return paddle.cast(paddle.assign(value.astype("float32")), "float16")
    if value.dtype.name in ("int8", "uint8", "int16"):  # nor these (quirk "small ints")
        return paddle.cast(paddle.assign(value.astype("int32")), value.dtype.name)
    return paddle.assign(value)


def _with_negative_zeros(value):
    """An array constant holding -0.0, in a Program: assign's values are IR float
    attributes, and the IR keeps one attribute for 0.0 and -0.0 (quirk "constant"), so a
    -0.0 ran as +0.0. Made as the array with +0.0 there times an array of 1s and -1s
    (0.0 * -1.0 is -0.0, v * 1.0 is v); float16 in float32 (no CPU float16 multiply), cast
    back."""
    wide = value.astype(np.float32) if value.dtype == np.float16 else value
    negative = (wide == 0) & np.signbit(wide)
    magnitudes = constant(value=np.where(negative, 0, wide).astype(wide.dtype))
    signed = magnitudes * constant(value=np.where(negative, -1, 1).astype(wide.dtype))
    return signed if wide is value else paddle.cast(signed, "float16")


# -- nn ---------------------------------------------------------------------------------------


def relu(x):
    # F.relu(NaN) is 0; the record keeps NaN, with gradient 0 there, as F.relu gives.
    if type(x) is _EAGER_TENSOR:
        # No NaN where the sum is finite (a NaN makes it NaN): F.relu alone, one op forward
        # and one backward (the sum, of a detached alias, costs ~4 us: the NaN-keeping form
        # below costs ~30 more on a 128x256 step, forward and backward).
        if math.isfinite(_C_ops.sum(x.detach(), [], None, False).item()):
            return _C_ops.relu(x)
        # The NaN is x's own, detached: no full-size tensor of NaNs to fill (1.5x faster).
        # Not in a Program: there these ops gave 0 for a NaN of a constant x (3.3.1; the
        # alias, a share_data_ op, is not kept apart from relu's buffer).
        return _C_ops.where(_C_ops.isnan(x), x.detach(), _C_ops.relu(x))
    return paddle.where(paddle.isnan(x), paddle.full_like(x, float("nan")), F.relu(x))


def exp(x):
    # Paddle's vectorised exp (8 elements or more) never goes below its floor (3.3.1:
    # float64 5.56e-309, float32 2.94e-39; exp(-inf) is that, not 0). Below -745.2
    # (float64) or -103.98 (float32) even the smallest subnormal rounds to 0, so the result
    # is 0 there; above that, down to -708.4 / -88.72 (subnormal results), the floor stays,
    # off by under 1e-308 / 3e-39. A mask multiplied in, not a `where`, so a NaN cotangent
    # still reaches those elements.
    dtype = x.dtype
    if dtype == paddle.float64 or dtype == paddle.float32:
        bound = -745.2 if dtype == paddle.float64 else -103.98
        # Eagerly, where nothing lies below the bound (one reduction; a NaN fails it), no
        # mask: one op forward and one backward instead of four and two.
        if (type(x) is _EAGER_TENSOR and 0 not in x.shape
                and _C_ops.min(x.detach(), [], False).item() >= bound):
            return _C_ops.exp(x)
        return _C_ops.multiply(_C_ops.exp(x), _C_ops.cast(x >= bound, dtype))
    return paddle.exp(x)


def softmax(x, *, axis):
    # F.softmax floors x - max at -64 (3.3.1: softmax([0, -80]) gives 1.2e-28 for e**-80 and
    # a -inf gives 1.2e-28, not 0): composed as the record says, exp(x - max) / sum, the max
    # detached as in log_softmax. A row holding +inf is NaN (inf - inf), as the record says.
    if x.shape[axis] == 0:  # paddle.max refuses an empty axis; the result is empty anyway
        return x
    top = paddle.max(_maybe_empty(x, axis), axis=axis, keepdim=True).detach()
    exps = exp(paddle.subtract(x, top))
    return paddle.divide(exps, paddle.sum(exps, axis=axis, keepdim=True))


def _maybe_empty(x, axis):
    """x, for the max along `axis` that shifts a softmax; in a Program where input_spec
    leaves that axis open (-1) it may be empty when the Program runs, where Paddle's max
    refuses (InvalidArgumentError): there one -inf more in each slice (the max of the
    others unchanged; of none, -inf, and the result is empty anyway)."""
    if x.shape[axis] >= 0 or paddle.in_dynamic_mode():
        return x
    low = paddle.full_like(_C_ops.sum(x, [axis], None, True), float("-inf"))
    return paddle.concat([x, low], axis=axis)


def _shifted_and_log_total(x, axis):
    """(x - max, log(sum(exp(x - max)))) along `axis`, the sum kept as a size-1 axis.
    The max is a constant shift (no gradient of its own: the terms cancel), so it is
    detached rather than differentiated to ~1e-16. `_C_ops` (the kernels the `paddle.*`
    functions call, in dygraph and in a Program alike) skip ~3-15 us of Python checks per
    op, which is most of an eager op's cost at these sizes."""
    shifted = _C_ops.subtract(x, _C_ops.max(_maybe_empty(x, axis), [axis], True).detach())
    return shifted, _C_ops.log(_C_ops.sum(exp(shifted), [axis], None, True))


def log_softmax(x, *, axis):
    # F.log_softmax saturates (3.3.1: [1000, 0] -> [0, -64]): composed as the record says,
    # (x - max) - log(sum(exp(x - max))).
    if x.shape[axis] == 0:  # paddle.max refuses an empty axis; the result is empty anyway
        return x
    shifted, log_total = _shifted_and_log_total(x, axis)
    return _C_ops.subtract(shifted, log_total)


# e**-60: a row of Paddle's fused softmax whose every probability is at least this has
# x - max >= -60 everywhere, above the -64 where the kernel floors it.
_UNFLOORED = 8.75651076269652e-27


def _fused_cross_entropy(logits, labels, classes):
    """Eager: Paddle's fused kernel (F.cross_entropy's: one op forward and one backward,
    where the composed form runs 12 and 8, ~65 us of a softmax-regression step), kept
    only where it floors nothing: every probability >= e**-60 (one reduction; NaN fails
    it). Else None, and the caller composes (a saturated row, a NaN, an infinity). Its loss
    is -log(p[label]): within one rounding of p (~6e-8 in float32) of the exact one. Labels
    are checked before. No second derivative (3.3.1): not under a nested gradient."""
    if getattr(GRAD_DEPTH, "value", 0) > 1:
        return None
    softmax, loss = _C_ops.cross_entropy_with_softmax(
        logits, _C_ops.unsqueeze(labels, [classes]), False, True, True, -100, classes)
    if _C_ops.min(softmax, [], False).item() >= _UNFLOORED:
        return _C_ops.squeeze(loss, [classes])
    return None


def sparse_softmax_cross_entropy(logits, labels):
    # F.cross_entropy saturates like F.log_softmax ([[1000, 0]], [1] -> 64, not 1000):
    # composed as -log_softmax(logits)[label], written log_total - shifted[label], which
    # rounds the same (a - b is -(b - a) exactly) and picks before subtracting: one
    # [N, C] op fewer, forward and backward, and no negation. Eagerly, Paddle's fused
    # kernel where it saturates nothing (`_fused_cross_entropy`).
    classes = len(logits.shape) - 1
    labels = _checked_indices("sparse_softmax_cross_entropy", labels, logits, classes)
    if logits.shape[classes] == 0:  # no class: every label is refused above; empty result
        return paddle.neg(paddle.squeeze(paddle.take_along_axis(
            logits, paddle.unsqueeze(labels, -1), axis=-1), axis=[-1]))
    if type(logits) is _EAGER_TENSOR and 0 not in logits.shape:
        loss = _fused_cross_entropy(logits, labels, classes)
        if loss is not None:
            return loss
    shifted, log_total = _shifted_and_log_total(logits, classes)
    picked = _C_ops.take_along_axis(shifted, _C_ops.unsqueeze(labels, [classes]), classes)
    return _C_ops.squeeze(_C_ops.subtract(log_total, picked), [classes])


def multiply_in_place(x, y):
    """x *= y (`in_place_or` has checked x). By a 0-d y of x's dtype needing no gradient (a
    momentum or Adam factor): Paddle's `scale_`, the same products (bias -0.0, see
    `eager_multiply`), ~20x faster than its broadcasting `multiply_` on a 784x256 slot."""
    if y.ndim == 0 and x.ndim != 0 and y.dtype is x.dtype and y.stop_gradient:
        return _C_ops.scale_(x, y, -0.0, True)
    return _C_ops.multiply_(x, y)


def add_in_place(x, y):
    """x += y (`in_place_or` has checked x). A 0-d y of x's dtype needing no gradient (Adam's
    eps) on a large x: Paddle's `scale_` as x * 1.0 + y, the same sums (see `eager_add`),
    ~2.5x faster than `add_` of y expanded to x's shape, ~5x than the broadcasting `add_`."""
    if (y.ndim == 0 and x.ndim != 0 and y.dtype is x.dtype and y.stop_gradient
            and x.size >= EXPAND_FROM):
        return _C_ops.scale_(x, 1.0, y.item(), True)
    return _C_ops.add_(x, y)


def divide_in_place(x, y):
    """x /= y (`in_place_or` has checked x). By a 0-d power of two of x's dtype needing no
    gradient, on a large x: `scale_` by its reciprocal, the same quotients (`eager_divide`)."""
    if (y.ndim == 0 and x.ndim != 0 and y.dtype is x.dtype and y.stop_gradient
            and x.size >= EXPAND_FROM):
        reciprocal = exact_reciprocal(y.item(), y.dtype)
        if reciprocal is not None:
            return _C_ops.scale_(x, reciprocal, -0.0, True)
    return _C_ops.divide_(x, y)


_SQRT = widen_half(paddle.sqrt)
_sqrt_or_new = in_place_or(lambda x, _: _C_ops.sqrt_(x), lambda x, _: _SQRT(x))


@widen_half
def exact_sqrt(x):
    """The op `sqrt`: Paddle's float32 kernel (Eigen's fast x * rsqrt(x) on a vector) gives
    NaN at +inf and +0.0 at -0.0 (quirk "sqrt"); its float64 kernel is correctly rounded, and
    so is its result rounded to float32. Adam's sqrt_ keeps the float32 kernel (finite v)."""
    if x.dtype == paddle.float32:
        return paddle.cast(paddle.sqrt(paddle.cast(x, paddle.float64)), paddle.float32)
    return paddle.sqrt(x)


_NEG_OF_INTS = widen_small_ints(paddle.neg)
_MULTIPLY = widen_half(paddle.multiply)


def neg(x):
    """-x. paddle.neg of a float is a scale with a +0.0 bias, so -(+0.0) is +0.0 (quirk
    "neg"); a product by -1 keeps IEEE's sign."""
    if x.dtype in _FLOATS:
        return _MULTIPLY(x, paddle.full_like(x, -1.0))
    return _NEG_OF_INTS(x)


def sqrt_(x):
    """`sqrt(x)`, written into `x` when nothing else sees it (`in_place_or`'s rule): the
    eager Adam's temporaries. Not an op record."""
    return _sqrt_or_new(x, None)


def detach(x):
    """x with stop_gradient set: `Tensor.detach` in dygraph, `Value.detach` (a
    `share_data_` op whose result stops the gradient) in a Program. An int or bool x has no
    gradient to stop, and a Program has no int16 share_data_ kernel (quirk "small ints"):
    it is x itself."""
    return x.detach() if _is_float(x) else x


def topk(x, *, k, axis, largest):
    """The first k of the stable argsort: paddle.topk orders equal values by no rule of
    their index (quirk "topk"); a stable descending argsort keeps them in index order, NaN
    first."""
    order = paddle.argsort(x, axis=axis, descending=largest, stable=True)
    return paddle.slice(order, axes=[axis], starts=[0], ends=[k])


LOWERINGS = {
    # elementwise
    # (in a Program, with a 0-d operand: see unigraph_paddle.program_scalars)
    "add": eager_direct(eager_add, widen_small_ints(widen_half(paddle.add))),
    "sub": eager_direct(_C_ops.subtract, widen_small_ints(widen_half(paddle.subtract))),
    "mul": eager_direct(eager_multiply, widen_small_ints(widen_half(paddle.multiply))),
    "div": eager_direct(eager_divide, widen_half(paddle.divide)),
    "pow": widen_half(paddle.pow),
    "maximum": widen_small_ints(widen_half(maximum)),
    "minimum": widen_small_ints(widen_half(minimum)),
    "equal": eager_direct(_C_ops.equal, paddle.equal, any_dtype=True),
    "not_equal": eager_direct(_C_ops.not_equal, paddle.not_equal, any_dtype=True),
    "less": eager_direct(_C_ops.less_than, paddle.less_than, any_dtype=True),
    "less_equal": eager_direct(_C_ops.less_equal, paddle.less_equal, any_dtype=True),
    "greater": eager_direct(_C_ops.greater_than, paddle.greater_than, any_dtype=True),
    "greater_equal": eager_direct(_C_ops.greater_equal, paddle.greater_equal,
                                  any_dtype=True),
    "logical_and": paddle.logical_and,
    "logical_or": paddle.logical_or,
    "logical_xor": paddle.logical_xor,
    "logical_not": paddle.logical_not,
    "isnan": paddle.isnan,
    "isinf": paddle.isinf,
    "isfinite": paddle.isfinite,
    "neg": neg,
    "abs": widen_small_ints(widen_half(absolute)),
    "exp": widen_half_for_grad(exp),
    "log": widen_half_for_grad(paddle.log),
    "sqrt": exact_sqrt,
    "stop_gradient": detach,
    # x decides, after the bool cond
    "where": widen_small_ints(widen_half(where, dtype_input=1), dtype_input=1),
    "cast": cast,
    # math
    # floor semantics (the sign of y), as NumPy
    "mod": widen_small_ints(widen_half(by_minus_one_safe(paddle.remainder))),
    # floor, ints and floats; no gradient (0)
    "floor_divide": widen_small_ints(by_minus_one_safe(paddle.floor_divide)),
    "floor": paddle.floor,
    "ceil": paddle.ceil,
    "round": widen_half(paddle.round),  # halves to even, as NumPy
    "atan2": atan2,
    "sin": widen_half(paddle.sin),
    "cos": widen_half(paddle.cos),
    "tan": widen_half(paddle.tan),
    "asin": widen_half(paddle.asin),
    "acos": widen_half(paddle.acos),
    "atan": widen_half(paddle.atan),
    "sinh": widen_half(paddle.sinh),
    "cosh": widen_half(paddle.cosh),
    "erf": paddle.erf,
    "log1p": paddle.log1p,
    "expm1": paddle.expm1,
    "softplus": widen_half(softplus),
    # linalg
    "matmul": widen_half(matmul),
    "einsum": widen_half(einsum),
    # no int8, uint8 or int16 kernels (quirk "small ints")
    "tril": widen_small_ints(lambda x, *, k: paddle.tril(x, k)),
    "triu": widen_small_ints(lambda x, *, k: paddle.triu(x, k)),
    # reduction
    "sum": widen_small_ints(reduce_sum),
    "mean": widen_half(reduce_mean),
    "max": widen_small_ints(widen_half(reduce_max)),
    "min": widen_small_ints(widen_half(reduce_min)),
    "prod": widen_small_ints(widen_half(reduce_prod)),
    "cumsum": widen_small_ints(widen_half(cumsum)),
    "argmax": widen_small_ints(widen_half(argmax)),
    "argsort": widen_small_ints(lambda x, *, axis: paddle.argsort(x, axis=axis, stable=True)),
    "topk": widen_small_ints(topk),
    "any": reduce_any,
    "all": reduce_all,
    # shape
    "reshape": reshape,
    "transpose": transpose,
    "concat": widen_small_ints(concat),
    "stack": widen_small_ints(stack),
    "squeeze": squeeze,
    "ensure_shape": ensure_shape,
    "ensure_size": check_size,  # (open dims: checked before the run)
    "expand_dims": expand_dims,
    "broadcast_to": broadcast_to,
    "slice": slice_,
    "take": widen_small_ints(widen_half(take)),
    "one_hot": one_hot,
    "scatter_add": scatter_add,
    "constant": constant,
    "full": full,
    "full_like": full_like,
    "flip": widen_small_ints(widen_half(flip)),
    "print": print_,
    # nn
    "relu": widen_half(relu),
    "sigmoid": widen_half(F.sigmoid),
    "tanh": widen_half(paddle.tanh),
    "softmax": widen_half(softmax),
    "log_softmax": widen_half(log_softmax),
    "conv2d": widen_half(conv2d),
    "conv_transpose2d": widen_half(conv_transpose2d),
    "max_pool2d": widen_half(max_pool2d),
    "avg_pool2d": avg_pool2d,
    "sparse_softmax_cross_entropy": widen_half(sparse_softmax_cross_entropy),
    # The fused update of ug.optim.Adam(fused=True): Paddle's own Adam kernel (a Program
    # calls them from `ProgramBuilder`'s handlers: several outputs).
    "adam_update": adam_update,
    "adam_update_": adam_update_,
    # in place when nothing else sees the parameter, for the eager optimizers (not an op record)
    "sub_": in_place_or(paddle._C_ops.subtract_, widen_small_ints(widen_half(paddle.subtract))),
    "add_": in_place_or(add_in_place, widen_small_ints(widen_half(paddle.add))),
    "mul_": in_place_or(multiply_in_place, widen_small_ints(widen_half(paddle.multiply))),
    "div_": in_place_or(divide_in_place, widen_half(paddle.divide)),
    "sqrt_": sqrt_,
}

# The ops whose CPU float16 kernel paddlepaddle 3.3.1 lacks. tests/test_backend_paddle.py
# checks that each still fails natively, so the list shrinks when Paddle catches up.
CPU_HALF_MISSING = frozenset(
    name for name, fn in LOWERINGS.items() if getattr(fn, "widens_half", False)
)

# The ops whose CPU float16 backward kernel paddlepaddle 3.3.1 lacks (the forward is
# there); tests/test_backend_paddle.py checks that each backward still fails natively.
CPU_HALF_GRAD_MISSING = frozenset(
    name for name, fn in LOWERINGS.items() if getattr(fn, "widens_half_for_grad", False)
)

# The table on a GPU place, which has float16 kernels: no widening.
_GPU_LOWERINGS = {name: getattr(fn, "__wrapped__", fn)
                  if name in CPU_HALF_MISSING | CPU_HALF_GRAD_MISSING else fn
                  for name, fn in LOWERINGS.items()}


def lowerings_for(on_gpu: bool) -> dict:
    """The table for a place: `LOWERINGS` on a CPU, without the float16 widening on a GPU.

    >>> lowerings_for(paddle.get_device().startswith("gpu"))["add"]
    """
    return _GPU_LOWERINGS if on_gpu else LOWERINGS
