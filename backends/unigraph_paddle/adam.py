"""Adam with Paddle's own kernel (`_C_ops.adam_`), for `ug.optim.Adam(fused=True)`: the
numbers of `paddle.optimizer.Adam`, bit for bit, on paddle:eager and paddle:static.

The kernel (3.3.1 CPU) takes the bias corrections as two accumulators, beta1 ** t and
beta2 ** t, and computes (in the parameter's dtype)

    m <- beta1 * m + (1 - beta1) * g;  v <- beta2 * v + (1 - beta2) * g * g
    lr_t = lr * sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    p <- p - lr_t * m / (sqrt(v) + eps * sqrt(1 - beta2 ** t))

the documented algebra (m_hat / (sqrt(v_hat) + eps)) with its own roundings. beta1, beta2
and eps are rounded to the dtype first, so (1 - beta2) is 1 - float32(0.999) = 0.00099998713
in float32, not float32(1 - 0.999): v is 1.3e-5 smaller, relatively, than the formula's
(paddle.optimizer.Adam's own numbers; the parameters differ far less).
`paddle.optimizer.Adam` starts each accumulator at beta and multiplies it by beta after
every step, in the parameter's dtype: beta ** t is a product rounded t - 1 times, not
beta ** t rounded once (in float32 they differ from t = 2 on). unigraph keeps the step
count instead (a float64 `step` slot per parameter; the state_dict format stays), so the
accumulators are read from a table of those products (`beta_powers`), indexed by the step:
eagerly by its value, in a Program by a `gather` from the table stored in the Scope. The
kernel gets them with `use_global_beta_pow=True`, so it never writes them.

The table stops at the first power p with 1 - p == 1 in the dtype (float32: t = 165 for
0.9, 17321 for 0.999; float64: 356 and 37412): every later power gives the kernel the same
numbers, so the last entry stands for them. A beta so close to 1 that this takes more than
`LONGEST` steps (above ~0.99993 in float32, ~0.99985 in float64) has a shorter table, and
from there on beta ** t rounded once: the documented formula, no longer Paddle's bits.

float16 (the CPU kernel has float32 and float64) runs in float32, each result cast back, as
`lowerings.widen_half` runs the ops lacking a float16 kernel.
"""

from __future__ import annotations

import functools

import numpy as np
import paddle
from paddle import _C_ops

from unigraph_paddle.inplace import sole_owner

LONGEST = 1 << 18  # entries in a table at most (1 MiB in float32)
_FLOATS = ("float32", "float64")
_FLOAT32, _FLOAT64 = paddle.float32, paddle.float64


@functools.cache
def beta_powers(beta: float, dtype: str) -> np.ndarray:
    """[beta, beta ** 2, ...] in `dtype` as `paddle.optimizer.Adam`'s accumulator holds them
    before steps 1, 2, ... (each entry the previous one times beta, rounded), up to the
    first power p with 1 - p == 1 in `dtype`, or LONGEST entries.

    >>> beta_powers(0.9, "float32")[:3]
    array([0.9 , 0.81, 0.729], dtype=float32)
    """
    kind = np.dtype(dtype).type
    # multiply.accumulate multiplies in order, each product rounded: beta, beta * beta, ...
    powers = np.multiply.accumulate(np.full(LONGEST, beta, dtype=kind))
    done = np.flatnonzero(kind(1) - powers == kind(1))
    table = powers[:done[0] + 1].copy() if done.size else powers
    table.flags.writeable = False
    return table


def complete(table: np.ndarray) -> bool:
    """Whether `table`'s last entry stands for every later power (1 - p == 1)."""
    one = table.dtype.type(1)
    return bool(one - table[-1] == one)


def beta_power(beta: float, dtype: str, t: float):
    """beta ** t as Paddle's accumulator holds it before step t (t >= 1), a NumPy scalar;
    a finite t below 1 reads the first entry, a NaN or infinite t the last (as in a Program).

    >>> beta_power(0.9, "float32", 2.0)
    0.80999994
    """
    table = beta_powers(beta, dtype)
    if not 1.0 <= t <= table.size:  # a step count loaded from elsewhere: below 1, NaN, past
        if t > table.size and not complete(table):  # the documented beta ** t there
            return table.dtype.type(beta ** t)
        t = 1.0 if -np.inf < t < 1.0 else float(table.size)  # the ends, as in a Program
    return table[int(t) - 1]


class EagerScalars:
    """The kernel's scalar tensors on paddle:eager, made from the values of the op's lr and
    t (`.item()`, ~2 us) and kept while those stay: the learning rate in the parameter's
    dtype (`full` of the float64 value rounds it as `cast` does), and the two accumulators
    as [1] CPU tensors. Every parameter of an eager step shares them (the same lr and t),
    and so does the next step for the learning rate; the kernel only reads them."""

    def __init__(self):
        self._rates = {}  # dtype -> (lr's value, the tensor)
        self._powers = {}  # (beta1, beta2, dtype) -> (t, (beta1 ** t, beta2 ** t))

    def rate(self, lr, dtype: str):
        value = lr.item()
        found = self._rates.get(dtype)
        if found is None or found[0] != value:
            # Where lr lies: a GPU kernel reads it on the device (the accumulators it takes
            # on the CPU, where Paddle's optimizer keeps them).
            found = self._rates[dtype] = (value, _C_ops.full(
                [], value, getattr(paddle, dtype), lr.place))
        return found[1]

    def powers(self, beta1: float, beta2: float, dtype: str, t: float) -> tuple:
        key = (beta1, beta2, dtype)
        found = self._powers.get(key)
        if found is None or found[0] != t:
            # `full` carries its value as a double: exact in float32 and float64.
            found = self._powers[key] = (t, tuple(
                _C_ops.full([1], float(beta_power(beta, dtype, t)), getattr(paddle, dtype),
                            paddle.CPUPlace()) for beta in (beta1, beta2)))
        return found[1]


_EAGER_SCALARS = EagerScalars()


def run_kernel(param, grad, m, v, lr, beta1_pow, beta2_pow, *, beta1, beta2, eps) -> tuple:
    """`_C_ops.adam_`, writing `param`, `m` and `v` (float32 or float64, one dtype; `lr` a
    0-d of it, the accumulators one-element tensors or Values of it; the betas and eps
    floats, or 0-d Values in a Program): (param, m, v) written."""
    param, m, v, *_ = _C_ops.adam_(
        param, grad, lr, m, v, None, beta1_pow, beta2_pow, None, None, beta1, beta2, eps,
        False,  # lazy_mode: only the rows of a sparse gradient; ours are dense
        1000,  # min_row_size_to_use_multithread: sparse gradients only
        False,  # multi_precision: no float32 master copy (float32 and float64 only)
        True,  # use_global_beta_pow: read the accumulators, never write them
        False)  # amsgrad
    return param, m, v


def _writable(x) -> bool:
    """Whether the eager kernel may write `x` itself: nothing else sees its memory and
    autograd does not track it (`unigraph_paddle.inplace.sole_owner`)."""
    return x.stop_gradient and sole_owner(x)


def adam_update_(param, grad, m, v, lr, step, *, beta1, beta2, eps, program=None) -> tuple:
    """The `adam_update_` lowering: the update written into `param`, `m` and `v`; returns
    them. Eagerly only where nothing else sees one (each otherwise into a copy); in a
    Program (`program`: the builder's `ProgramAdam`) where `updates.plan_fused` chose it.
    `lr` and `step` (t) are float64 0-d, as the op takes them.

    >>> p, m, v = adam_update_(p, g, m, v, lr, t, beta1=0.9, beta2=0.999, eps=1e-8)
    """
    return _update(param, grad, m, v, lr, step, beta1, beta2, eps, True, program)


def adam_update(param, grad, m, v, lr, step, *, beta1, beta2, eps, program=None) -> tuple:
    """The `adam_update` lowering: the kernel writes copies; the inputs are never written."""
    return _update(param, grad, m, v, lr, step, beta1, beta2, eps, False, program)


def _update(param, grad, m, v, lr, step, beta1, beta2, eps, write, program) -> tuple:
    dtype = _dtype_name(param)
    if dtype not in _FLOATS:
        return _widened(param, grad, m, v, lr, step, beta1, beta2, eps, program)
    if program is None and not paddle.in_dynamic_mode():
        program = ProgramAdam(None)  # a Program of someone else's: no shared constants
    if program is not None:
        if not write:
            param, m, v = (paddle.assign(x) for x in (param, m, v))
        # The betas and eps as 0-d Values of the dtype: the numbers the kernel rounds the
        # floats to, without a `full` op each per parameter.
        return run_kernel(param, grad, m, v, program.rate(lr, dtype),
                          *program.powers(step, beta1, beta2, dtype),
                          beta1=program.constant(beta1, dtype),
                          beta2=program.constant(beta2, dtype), eps=program.constant(eps, dtype))
    if not (write and _writable(param) and _writable(m) and _writable(v)):
        param, m, v = (x if write and _writable(x) else x.detach().clone()
                       for x in (param, m, v))
    # Paddle's optimizer holds lr in the parameter's dtype.
    return run_kernel(param, grad, m, v, _EAGER_SCALARS.rate(lr, dtype),
                      *_EAGER_SCALARS.powers(beta1, beta2, dtype, step.item()),
                      beta1=beta1, beta2=beta2, eps=eps)


def _widened(param, grad, m, v, lr, step, beta1, beta2, eps, program) -> tuple:
    """float16 (the kernel has float32 and float64): the update in float32, each result
    cast back, as `lowerings.widen_half` runs the ops lacking a float16 kernel."""
    wide = [paddle.cast(x, "float32") for x in (param, grad, m, v)]
    outs = _update(*wide, lr, step, beta1, beta2, eps, True, program)
    return tuple(paddle.cast(x, param.dtype) for x in outs)


def _dtype_name(value) -> str:
    dtype = value.dtype
    # An eager Tensor's dtype is the very object `paddle.float32` (an identity test; its
    # `str` costs ~5 us); a PIR Value's prints as "paddle.float32".
    if dtype is _FLOAT32:
        return "float32"
    if dtype is _FLOAT64:
        return "float64"
    return str(dtype).rsplit(".", 1)[-1]


def same_length_powers(beta1: float, beta2: float, dtype: str) -> tuple:
    """The two tables (`beta_powers`) at one length, for one index into both in a Program:
    each after a leading entry that no step reads (index t reads the power before step t),
    the shorter one extended with its last entry (which stands for every later power)."""
    tables = [beta_powers(beta, dtype) for beta in (beta1, beta2)]
    size = max(table.size for table in tables)
    return tuple(np.concatenate([table[:1], table, np.full(size - table.size, table[-1])])
                 for table in tables)


@functools.cache
def step_bounds(size: int) -> np.ndarray:
    """[1.0, 2.0, ..., size] in float64: what a Program's step count is sought among."""
    bounds = np.arange(1, size + 1, dtype=np.float64)
    bounds.flags.writeable = False
    return bounds


class ProgramAdam:
    """What the update needs in a Program, made once per `ProgramBuilder` (`builder`;
    None: a Program of someone else's, each made where asked): the scalars (bounds, betas,
    eps) as the builder's shared constants, the power tables as its stored arrays, and the
    cast of a learning rate once for every parameter it updates."""

    def __init__(self, builder):
        self.builder = builder
        self._casts = {}  # (id(lr Value), dtype) -> (the Value, its cast), top-level block

    def constant(self, value, dtype: str):
        """A 0-d `value` of `dtype`: one `full` op per value and dtype in the top level."""
        if self.builder is None:
            return paddle.full([], value, dtype)
        return self.builder.lowerings["full"](shape=(), value=value, dtype=dtype)

    def stored(self, array: np.ndarray):
        if self.builder is None:
            return paddle.assign(array)
        return self.builder.scalars.stored_array(array)

    def rate(self, lr, dtype: str):
        """lr in the parameter's dtype (Paddle's optimizer holds it so)."""
        if self.builder is None or self.builder.block_depth:
            return _C_ops.cast(lr, getattr(paddle, dtype))
        found = self._casts.get((id(lr), dtype))
        if found is None or found[0] is not lr:
            found = self._casts[(id(lr), dtype)] = (lr, _C_ops.cast(lr, getattr(paddle, dtype)))
        return found[1]

    def powers(self, t, beta1: float, beta2: float, dtype: str) -> list:
        """The accumulators before step t (a float64 0-d Value), gathered from the tables."""
        tables = same_length_powers(beta1, beta2, dtype)
        last = float(tables[0].size - 1)
        # The index as `beta_power` reads the table, in one op: searchsorted counts the
        # bounds 1, 2, ..., last at or below t: k for t in [k, k + 1), 0 below 1 (the
        # leading entry: the first power again), `last` past the table and, as Paddle's
        # searchsorted does for them, for a NaN or infinite t. (fmin, fmax and a cast took
        # three ops; a NaN cast to int64 is -2**63, outside the table.)
        index = _C_ops.searchsorted(self.stored(step_bounds(tables[0].size - 1)), t, False,
                                    True)
        found = []
        for beta, table in zip((beta1, beta2), tables):
            power = _C_ops.gather(self.stored(table), index, self.constant(0, "int64"))
            if not complete(table):  # the documented beta ** t beyond the table
                rounded_once = _C_ops.cast(
                    _C_ops.elementwise_pow(self.constant(beta, "float64"), t),
                    getattr(paddle, dtype))
                power = _C_ops.where(_C_ops.greater_than(t, self.constant(last, "float64")),
                                     rounded_once, power)
            found.append(power)
        return found


def program_handlers(builder, lowerings: dict) -> dict:
    """`ProgramBuilder`'s handlers of the update's nodes (several outputs), {op:
    handler(node, args)}: each calls the table's entry (`lowerings`) with the builder's
    `ProgramAdam`. write_adam_update (`updates.plan_fused`) is "adam_update_"."""
    program = ProgramAdam(builder)

    def adam_update(node, args):
        return lowerings["adam_update"](*args, **node.attrs, program=program)

    def write_adam_update(node, args):
        return lowerings["adam_update_"](*args, **node.attrs, program=program)

    return {"adam_update": adam_update, "write_adam_update": write_adam_update}
