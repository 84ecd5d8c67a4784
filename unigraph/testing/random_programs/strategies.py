"""Hypothesis strategies for random *valid* unigraph programs.

`programs()` draws a `Program`: float inputs of small shapes, then statements built from
the op records' families, each valid by construction (shapes broadcast, axes exist, conv
and pool windows fit, indices and labels are in range):

* elementwise ops with Python scalars or broadcasting tensors, `where`, casts (float ->
  int -> float, comparisons -> float), the math family (trigonometric, hyperbolic, erf,
  softplus, floor / ceil / round, mod, floor_divide, atan2) and composed activations
  (silu, gelu, elu, leaky_relu, clip, sign);
* integer arithmetic in int32, int64, int8, uint8 and int16 (`to_int`, `int_arithmetic`,
  `int_reduce`, `from_int`): floats floored, rounded or truncated into small ints, then
  `+ - *`, `//` and `%` by nonzero divisors of either sign, minimum / maximum, abs,
  negation, sign, clip, comparisons and `where`, `**` (computed in float64, cast back),
  mixed int dtypes (promoted as NumPy: int8 with uint8 is int16), casts between int
  dtypes, wrapping on overflow, sum / prod / max / min / cumsum / argmax / argmin, and back
  to the program's float dtype beside a float value (so outputs and gradients use them; a
  small int promotes to the float's dtype), or as the indices of `ug.take` / `x[i]`
  (`int_take`);
* reductions (sum mean max min prod logsumexp var std norm over axes, argmax, argmin), reshape /
  transpose / slicing / expand_dims / squeeze / broadcast_to / concat / stack / take /
  cumsum / flip / tile / pad / split;
* matmul (also of a transpose, and as einsum), softmax, log_softmax,
  sparse_softmax_cross_entropy;
* conv2d (groups, stride, padding, dilation, optional bias; sometimes a zero-size batch),
  max_pool2d, avg_pool2d;
* conv_transpose2d, one_hot, scatter / scatter_add, ensure_shape, the creation functions
  (zeros, ones, full and their *_like, arange, linspace, eye), logical_not / logical_or /
  logical_and, selu, and `ug.random` draws (uniform, normal, randint in any int dtype) at
  the top of the program or of a helper called there, which the harness seeds before each
  call (`model.call_seeded`: `ug.manual_seed`, or a `ug.random.seeded` block around the
  call);
* `x.at[index].set(v)` / `.add(v)` at ints, slices, `None`, an int list, a NumPy boolean
  mask, a traced int scalar or a traced int array (alone or after a full slice), v a
  number or a value broadcasting to the selection (`at_update`); `ug.where` whose mask
  broadcasts against both values, a number on one side, and `x[mask]` of a NumPy boolean
  mask (`masked`);
* `ug.cond` (whose branches may return a tuple or a dict of two values) /
  `ug.while_loop` with nested functions, Python `if` / `while` that autograph converts,
  and calls of a helper `@ug.function`, nested up to `max_depth`, loops with a bounded
  trip count; Python `for` loops with `break` / `continue` and calls of plain helper
  functions (`autograph_draws`);
* a program that returns a tuple or a dict of its outputs;
* a `grad_program` that takes `ug.grad` of the loss, or `ug.value_and_grad` (the loss and
  the gradients);
* an `input_spec` that leaves some dims of the inputs open (None), so static targets
  trace without knowing those sizes (`OPEN_DIMS`);
* instead of a program of ops, about one draw in five, training: a small `ug.nn` model, a
  loss and 1-3 `ug.optim` steps (`training.trainings`).

Every choice is a hypothesis draw, so hypothesis shrinks programs: fewer statements,
simpler ops (each list of choices starts with the simplest), smaller shapes, no nesting.
Numerical trouble (ties, kinks, overflow) is not avoided here but filtered out after a
float64 run: see `runner.hazards`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from unigraph.testing.random_programs.model import (
    Assign,
    Block,
    Branch,
    Call,
    Input,
    Loop,
    Program,
    Var,
    reads,
)
from unigraph.testing.random_programs.training import trainings

SCALARS = [0.5, 2.0, -1.5, 0.25, 3.0]


class Builder:
    """The state of one draw: names, inputs made so far, nesting depth."""

    def __init__(self, draw, dtype: str, max_depth: int):
        self.draw = draw
        self.dtype = dtype
        self.max_depth = max_depth
        self.inputs: list = []
        self.count = 0
        self.tags = 0
        # The depth at which `ug.random` may draw: the program's top (0), or the body of a
        # helper called there (`call`), not inside a branch or loop (a draw there is refused)
        self.free_depth = 0

    def name(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def tag(self) -> int:
        self.tags += 1
        return self.tags

    def new_input(self, shape, kind="normal") -> Var:
        var = Var(f"x{len(self.inputs)}", tuple(shape))
        seed = self.draw(st.integers(0, 2**16), label="input seed")
        self.inputs.append(Input(var, seed, kind))
        return var

    def shape(self, min_rank=0, max_rank=3, max_dim=4) -> tuple:
        return tuple(self.draw(st.lists(st.integers(1, max_dim), min_size=min_rank,
                                        max_size=max_rank)))

    def pick(self, candidates):
        return self.draw(st.sampled_from(candidates))

    def operand(self, candidates):
        """One of `candidates` (variables, oldest first), the newest half the time:
        programs chain their statements rather than spread over many inputs."""
        if self.draw(st.booleans(), label="newest"):
            return candidates[-1]
        return self.draw(st.sampled_from(candidates[::-1]))


def _floats(env) -> list:
    return [v for v in env if v.is_float]


def _nonempty(env) -> list:
    """Float variables with at least one element (the first input always has one)."""
    return [v for v in _floats(env) if 0 not in v.shape]


def _broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    return all(d in (1, t) for d, t in zip(shape[::-1], target[::-1]))


def _broadcast(a, b) -> tuple:
    return tuple(np.broadcast_shapes(a, b))


def _assign(b: Builder, shape, expr: str, uses, dtype="float") -> Assign:
    return Assign(Var(b.name(), tuple(shape), dtype), expr, tuple(uses))


# -- elementwise -------------------------------------------------------------------------------
UNARY = [
    "ug.tanh({a})", "ug.sigmoid({a})", "-{a}", "ug.relu({a})", "ug.abs({a})", "abs({a})",
    "ug.exp({a})", "ug.log({a} * {a} + 0.5)", "ug.sqrt(ug.sigmoid({a}) + 0.1)", "{a} ** 2",
    "ug.pow(ug.sigmoid({a}) + 0.5, {a})", "ug.neg({a})",
    "ug.sin({a})", "ug.cos({a})", "ug.atan({a})", "ug.erf({a})", "ug.softplus({a})",
    "ug.sinh({a})", "ug.cosh({a})", "ug.silu({a})", 'ug.gelu({a}, approximate="tanh")',
    "ug.gelu({a})", "ug.elu({a})", "ug.leaky_relu({a})", "ug.clip({a}, -0.5, 1.0)",
    "ug.floor({a} * 2.0) + {a}", "ug.round({a} * 3.0) * {a}", "ug.ceil({a}) - {a}",
    "ug.sign({a}) * {a}", "ug.asin(ug.tanh({a}) * 0.9)", "ug.acos(ug.tanh({a}) * 0.9)",
    "ug.tan(ug.tanh({a}))", "{a} % 0.75", "{a} // 0.5 + {a}",
]
WITH_SCALAR = [
    "{a} + {c}", "{a} * {c}", "{c} - {a}", "{a} / {c}", "{c} / ({a} * {a} + 1.0)",
    "ug.maximum({a}, {c})", "ug.minimum({a}, {c})", "{a} - {c}",
]
BINARY = [
    "{a} + {b}", "{a} * {b}", "{a} - {b}", "{a} / ({b} * {b} + 0.5)", "ug.maximum({a}, {b})",
    "ug.minimum({a}, {b})", "ug.add({a}, {b})", "ug.where({a} > {b}, {a}, 2.0 * {b})",
    "ug.sub({a}, {b})", "ug.mul({a}, {b})",
    "ug.atan2({a}, {b})", "{a} % ({b} * {b} + 0.5)", "ug.where({a} <= {b}, {a}, {b} * {b})",
    "ug.where({a} != {b}, {a} * {b}, {b})", "ug.where({a} >= {b}, ug.sin({a}), {b})",
]


def unary(b: Builder, env, depth):
    a = b.operand(_floats(env))
    return _assign(b, a.shape, b.pick(UNARY).format(a=a.name), [a.name])


def with_scalar(b: Builder, env, depth):
    a = b.operand(_floats(env))
    expr = b.pick(WITH_SCALAR).format(a=a.name, c=b.pick(SCALARS))
    return _assign(b, a.shape, expr, [a.name])


def _partner_shape(b: Builder, shape) -> tuple:
    """A shape that broadcasts with `shape`: equal, a suffix, some dims 1, or more dims."""
    how = b.pick(["same", "suffix", "ones", "leading"])
    if how == "suffix":
        return shape[b.draw(st.integers(0, len(shape))):]
    if how == "ones":
        return tuple(1 if b.draw(st.booleans()) else d for d in shape)
    if how == "leading" and len(shape) < 4:
        return (b.draw(st.integers(1, 3)),) + shape
    return shape


def _partner(b: Builder, env, a: Var) -> Var:
    """A float operand that broadcasts with `a`: an existing variable or a new input."""
    fits = [v for v in _floats(env) if _broadcasts_to(v.shape, a.shape)
            or _broadcasts_to(a.shape, v.shape)]
    if fits and b.draw(st.booleans()):
        return b.pick(fits)
    return b.new_input(_partner_shape(b, a.shape))


def binary(b: Builder, env, depth):
    a = b.operand(_floats(env))
    other = _partner(b, env, a)
    expr = b.pick(BINARY).format(a=a.name, b=other.name)
    return _assign(b, _broadcast(a.shape, other.shape), expr, [a.name, other.name])


def cast(b: Builder, env, depth):
    a = b.operand(_floats(env))
    expr = b.pick([
        'ug.cast(ug.cast({a} * 4.0, "int32"), {a}.dtype)',
        "ug.cast({a} > 0.25, {a}.dtype) * {a}",
        'ug.cast(ug.cast({a} * 3.0, "int64"), {a}.dtype) + {a}',
    ]).format(a=a.name)
    return _assign(b, a.shape, expr, [a.name])


# -- reductions --------------------------------------------------------------------------------
def _axes(b: Builder, rank: int):
    """None, an int (maybe negative) or a tuple of distinct axes of a rank-`rank` tensor."""
    if rank == 0:
        return None
    how = b.pick(["all", "one", "several"])
    if how == "all":
        return None
    if how == "one":
        axis = b.draw(st.integers(0, rank - 1))
        return axis - rank if b.draw(st.booleans()) else axis
    return tuple(sorted(b.draw(st.sets(st.integers(0, rank - 1), min_size=1))))


def _reduced(shape, axis, keepdims) -> tuple:
    axes = range(len(shape)) if axis is None else (
        [axis % len(shape)] if isinstance(axis, int) else axis)
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def reduce(b: Builder, env, depth):
    op = b.pick(["sum", "mean", "max", "min", "prod", "logsumexp", "var", "std", "norm"])
    # max and min of nothing is an error; sum, mean and prod of nothing are 0, NaN and 1.
    a = b.pick(_floats(env) if op in ("sum", "mean", "prod", "norm") else _nonempty(env))
    axis = _axes(b, len(a.shape))
    keepdims = b.draw(st.booleans())
    expr = f"ug.{op}({a.name}, axis={axis!r}, keepdims={keepdims})"
    return _assign(b, _reduced(a.shape, axis, keepdims), expr, [a.name])


def argmax_take(b: Builder, env, depth):
    """`take` along an axis of x at the argmax indices of y (in range by construction),
    or at constant indices."""
    xs = [v for v in _nonempty(env) if v.shape]
    if not xs:
        return None
    x = b.pick(xs)
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    size = x.shape[axis]
    sources = [(v, k) for v in _nonempty(env) for k, d in enumerate(v.shape) if d <= size]
    if sources and b.draw(st.booleans()):
        y, y_axis = b.pick(sources)
        indices = f"ug.argmax({y.name}, axis={y_axis})"
        index_shape = y.shape[:y_axis] + y.shape[y_axis + 1:]
        uses = [x.name, y.name]
    else:
        values = b.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4))
        indices, index_shape, uses = f"np.array({values})", (len(values),), [x.name]
    shape = x.shape[:axis] + index_shape + x.shape[axis + 1:]
    return _assign(b, shape, f"ug.take({x.name}, {indices}, axis={axis})", uses)


def argmax(b: Builder, env, depth):
    xs = [v for v in _nonempty(env) if v.shape]
    if not xs:
        return None
    x = b.pick(xs)
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    op = b.pick(["argmax", "argmin"])
    return _assign(b, x.shape[:axis] + x.shape[axis + 1:],
                   f"ug.{op}({x.name}, axis={axis})", [x.name], dtype="int64")


# -- integers ----------------------------------------------------------------------------------
# Integer arithmetic in int32, int64 and the small ints int8, uint8, int16 (README "Dtype
# rules", "Small integers"): floor semantics for // and %, NumPy's promotion (int32 with
# int64 is int64, int8 with uint8 is int16; a Python int keeps the tensor's dtype, so each
# constant is one that fits: no negative ones with uint8), wrapping on overflow. Values
# start small (|v| <= 10) so that a statement grows them only where it means to test
# wrapping (`INT_WRAP`, and products and casts of small ints).
INT_DTYPES = ["int32", "int64", "int8", "uint8", "int16"]
SMALL_INTS = ("int8", "uint8", "int16")
INT_SCALARS = [2, -3, 1, 5, -1, 0]
INT_DIVISORS = [2, -3, 1, 4, -1, -7]  # nonzero, some negative: floor semantics
TO_INT = [
    'ug.cast(ug.floor(ug.tanh({a}) * {k}), "{t}")',
    'ug.cast(ug.tanh({a}) * {k}, "{t}")',  # truncation toward zero
    'ug.cast(ug.ceil(ug.tanh({a}) * {k}), "{t}")',
    'ug.cast(ug.round(ug.tanh({a}) * {k}), "{t}")',
    'ug.cast({a} * {k}, "{t}")',  # as large as the float: int32 and int64 only
]
# Into uint8 from [0, k): a float cast out of a dtype's range is undefined (README).
TO_UINT8 = [
    'ug.cast(ug.floor(ug.sigmoid({a}) * {k}), "uint8")',
    'ug.cast(ug.sigmoid({a}) * {k}, "uint8")',
]
INT_UNARY = [
    "-{i}", "abs({i})", "ug.abs({i})", "ug.neg({i})", "{i} * {i}", "ug.sign({i})",
    "ug.clip({i}, {lo}, 4)", "ug.where({i} > 0, {i}, {k} * {i})",
    "ug.where({i} % 2 == 0, {i}, 0)",
]
# ints ** compute in float64, cast back: only where the power fits (a float cast out of
# range is undefined), so not for the small ints, which wrap to any value of theirs.
WIDE_UNARY = ['ug.cast({i} ** 2, "{t}")', 'ug.cast({i} ** 3, "{t}")']
INT_WITH_SCALAR = [
    "{i} + {c}", "{i} - {c}", "{c} - {i}", "{i} * {c}", "{i} // {d}", "{i} % {d}",
    "ug.minimum({i}, {c})", "ug.maximum({i}, {c})", "ug.floor_divide({i}, {d})",
    "ug.mod({i}, {d})", "{c} // ({i} * {i} + 1)", "{c} % -({i} * {i} + 1)",
]
# Divisors drawn from another int tensor, never 0: positive, negative, or either sign.
INT_NONZERO = ["({j} * {j} + 1)", "-({j} * {j} + 1)", "ug.where({j} == 0, 1, {j})"]
INT_BINARY = [
    "{i} + {j}", "{i} - {j}", "{i} * {j}", "ug.minimum({i}, {j})", "ug.maximum({i}, {j})",
    "{i} // {nz}", "{i} % {nz}", "ug.where({i} > {j}, {i}, {j})",
    'ug.cast({i} >= {j}, "{t}") * {i}', "ug.where({i} != {j}, {i} - {j}, {i} + {j})",
    "ug.where({i} <= {j}, {i}, {j} * {j})", "ug.where({i} == {j}, 2 * {i}, {j})",
]
# Wrapping on overflow, as NumPy (README "Small integers"), then back to small values; the
# constants fit the dtype (a Python int that does not is an error).
INT_WRAP = [
    "({i} * {p} * {q}) % {m}", "({i} * {p} * {q} + {r}) // {s} % 37",
    "ug.prod({i} + 13) % {m}",
]
WRAP_CONSTANTS = {"wide": dict(p=999983, q=4093, m=1009, r=2147, s=65536),
                  "small": dict(p=97, q=89, m=101, r=21, s=16)}
# An int value cast to another int dtype: wraps modulo 2**bits as NumPy where it does not
# fit (times 37 first, so that it often does not).
INT_CAST = ['ug.cast({i}, "{t}")', 'ug.cast({i} * 37, "{t}")']
FROM_INT = [  # back to the program's float dtype, so outputs and gradients use the ints
    "ug.cast({i}, {a}.dtype) * {a}", "{a} + ug.cast({i}, {a}.dtype)",
    "ug.where({i} % 2 == 0, {a}, -{a})", "ug.where({i} > 0, {a}, {a} * 0.5)",
]
# A small int with a float32 or float64 value promotes to the float's dtype (NumPy: int8,
# uint8 and int16 fit float32; int32 with float32 would be float64).
FROM_SMALL_INT = ["{a} * {i}", "{i} + {a}", "{a} - {i}"]


def _ints(env) -> list:
    return [v for v in env if v.dtype in INT_DTYPES]


def _int_result(*dtypes) -> str:
    return str(np.result_type(*dtypes))


def _fitting(values, dtype) -> list:
    """The Python ints of `values` that `dtype` holds (uint8: no negative ones)."""
    return [v for v in values if v >= 0] if dtype == "uint8" else list(values)


def to_int(b: Builder, env, depth):
    """A float value into an int dtype, about as large as the drawn scale."""
    a = b.operand(_floats(env))
    dtype = b.pick(INT_DTYPES)
    templates = TO_UINT8 if dtype == "uint8" else TO_INT[:-1] if dtype in SMALL_INTS else TO_INT
    expr = b.pick(templates).format(a=a.name, k=b.pick([3.0, 5.0, 10.0]), t=dtype)
    return _assign(b, a.shape, expr, [a.name], dtype=dtype)


def int_arithmetic(b: Builder, env, depth):
    """Integer ops on an int value: unary, with a Python int, with a second int value of a
    shape that broadcasts (mixed dtypes promote), wrapping on overflow, or a cast to
    another int dtype."""
    ints = _ints(env)
    if not ints:
        return to_int(b, env, depth)
    i = b.operand(ints)
    how = b.pick(["unary", "scalar", "binary", "wrap", "cast"])
    if how == "binary":
        fits = [v for v in ints if _broadcasts_to(v.shape, i.shape)
                or _broadcasts_to(i.shape, v.shape)]
        j = b.pick(fits)
        dtype = _int_result(i.dtype, j.dtype)
        nonzero = b.pick(INT_NONZERO).format(j=j.name)
        expr = b.pick(INT_BINARY).format(i=i.name, j=j.name, nz=nonzero, t=dtype)
        return _assign(b, _broadcast(i.shape, j.shape), expr, [i.name, j.name], dtype=dtype)
    if how == "wrap":
        constants = WRAP_CONSTANTS["small" if i.dtype in SMALL_INTS else "wide"]
        expr = b.pick(INT_WRAP).format(i=i.name, **constants)
        shape = () if "prod" in expr else i.shape
        return _assign(b, shape, expr, [i.name], dtype=i.dtype)
    if how == "cast":
        dtype = b.pick([t for t in INT_DTYPES if t != i.dtype])
        expr = b.pick(INT_CAST).format(i=i.name, t=dtype)
        return _assign(b, i.shape, expr, [i.name], dtype=dtype)
    if how == "scalar":
        expr = b.pick(INT_WITH_SCALAR).format(i=i.name, c=b.pick(_fitting(INT_SCALARS, i.dtype)),
                                              d=b.pick(_fitting(INT_DIVISORS, i.dtype)))
    else:
        unsigned = i.dtype == "uint8"
        templates = INT_UNARY + ([] if i.dtype in SMALL_INTS else WIDE_UNARY)
        expr = b.pick(templates).format(i=i.name, t=i.dtype, lo=1 if unsigned else -3,
                                        k=2 if unsigned else -2)
    return _assign(b, i.shape, expr, [i.name], dtype=i.dtype)


def int_reduce(b: Builder, env, depth):
    """sum, prod, max, min over axes (sum keeps the dtype), cumsum, or argmax / argmin
    (ties are common among ints: each takes the first) of an int value."""
    ints = _ints(env)
    if not ints:
        return to_int(b, env, depth)
    i = b.operand(ints)
    op = b.pick(["sum", "prod", "max", "min", "cumsum", "argmax", "argmin"])
    along = op in ("cumsum", "argmax", "argmin")
    if (along and not i.shape) or (op not in ("sum", "prod", "cumsum") and 0 in i.shape):
        op = "sum"  # no axis to go along; max, min, argmax, argmin of nothing are errors
    if op in ("cumsum", "argmax", "argmin"):
        axis = b.draw(st.integers(-len(i.shape), len(i.shape) - 1))
        if op == "cumsum":
            return _assign(b, i.shape, f"ug.cumsum({i.name}, axis={axis})", [i.name],
                           dtype=i.dtype)
        shape = i.shape[:axis % len(i.shape)] + i.shape[axis % len(i.shape) + 1:]
        return _assign(b, shape, f"ug.{op}({i.name}, axis={axis})", [i.name], dtype="int64")
    axis = _axes(b, len(i.shape))
    keepdims = b.draw(st.booleans())
    expr = f"ug.{op}({i.name}, axis={axis!r}, keepdims={keepdims})"
    return _assign(b, _reduced(i.shape, axis, keepdims), expr, [i.name], dtype=i.dtype)


def from_int(b: Builder, env, depth):
    """An int value back in the program's float dtype, alone or with a float value."""
    ints = _ints(env)
    if not ints:
        return to_int(b, env, depth)
    i = b.operand(ints)
    fits = [v for v in _floats(env) if _broadcasts_to(v.shape, i.shape)
            or _broadcasts_to(i.shape, v.shape)]
    if not fits:
        a = _floats(env)[0]  # only its dtype
        return _assign(b, i.shape, f"ug.cast({i.name}, {a.name}.dtype)", [i.name, a.name])
    a = b.pick(fits)
    expr = b.pick(FROM_INT + (FROM_SMALL_INT if i.dtype in SMALL_INTS else [])).format(
        i=i.name, a=a.name)
    return _assign(b, _broadcast(i.shape, a.shape), expr, [i.name, a.name])


def int_take(b: Builder, env, depth):
    """`ug.take` along an axis of a float value, or `x[i]`, at indices computed from an int
    value (`% size` puts them in range; minus size, from the end): repeated indices are
    common, so the gradient adds several slices into one."""
    ints = [v for v in _ints(env) if len(v.shape) <= 2]
    xs = [v for v in _nonempty(env) if v.shape and len(v.shape) <= 3]
    if not ints or not xs:
        return to_int(b, env, depth)
    i, x = b.operand(ints), b.pick(xs)
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    size = x.shape[axis]
    # (uint8: in [0, n) only; n - 1 - that would wrap, and -n does not fit)
    forms = ["{i} % {n}"] if i.dtype == "uint8" else ["{i} % {n}", "{i} % {n} - {n}",
                                                      "{i} % -{n}"]
    index = b.pick(forms).format(i=i.name, n=size)
    shape = x.shape[:axis] + i.shape + x.shape[axis + 1:]
    if axis == 0 and b.draw(st.booleans()):
        return _assign(b, shape, f"{x.name}[{index}]", [x.name, i.name])
    return _assign(b, shape, f"ug.take({x.name}, {index}, axis={axis})", [x.name, i.name])


# -- shapes ------------------------------------------------------------------------------------
def _factor_shape(b: Builder, size: int) -> tuple:
    """A random shape of `size` elements (1 to 3 dims)."""
    if size == 0:
        return (0,)
    factors, rest, p = [], size, 2
    while rest > 1:
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    shape = [1] * b.draw(st.integers(1, 3))
    for factor in b.draw(st.permutations(factors)):
        shape[b.draw(st.integers(0, len(shape) - 1))] *= factor
    return tuple(shape)


def _slice_index(b: Builder, shape) -> tuple:
    index = []
    for d in shape:
        how = b.pick(["all", "int", "range", "step", "newaxis"]) if d else "all"
        if how == "int":
            index.append(b.draw(st.integers(-d, d - 1)))
        elif how == "range":
            start = b.draw(st.integers(0, d - 1))
            index.append(slice(start, b.draw(st.integers(start + 1, d))))
        elif how == "step":
            index.append(slice(None, None, 2))
        else:
            if how == "newaxis":
                index.append(None)
            index.append(slice(None))
    return tuple(index)


def _index_text(index) -> str:
    parts = []
    for item in index:
        if item is None:
            parts.append("None")
        elif isinstance(item, int):
            parts.append(str(item))
        else:
            text = ("" if item.start is None else str(item.start)) + ":" + (
                "" if item.stop is None else str(item.stop))
            parts.append(text + (f":{item.step}" if item.step else ""))
    return ", ".join(parts) if parts else "..."


def reshape(b: Builder, env, depth):
    a = b.operand(_floats(env))
    size = int(np.prod(a.shape, dtype=np.int64))
    how = b.pick(["reshape", "transpose", "slice", "expand", "squeeze", "broadcast", "flat",
                  "cumsum", "flip", "tile", "pad", "split"])
    if how == "cumsum" and a.shape:
        axis = b.draw(st.integers(-len(a.shape), len(a.shape) - 1))
        return _assign(b, a.shape, f"ug.cumsum({a.name}, axis={axis})", [a.name])
    if how == "flip":
        axis = _axes(b, len(a.shape))
        return _assign(b, a.shape, f"ug.flip({a.name}, axis={axis!r})", [a.name])
    if how == "tile":
        reps = tuple(b.draw(st.lists(st.integers(1, 2), min_size=1, max_size=3)))
        full = (1,) * (len(reps) - len(a.shape)) + a.shape
        reps_full = (1,) * (len(full) - len(reps)) + reps
        shape = tuple(d * r for d, r in zip(full, reps_full))
        return _assign(b, shape, f"ug.tile({a.name}, {reps!r})", [a.name])
    if how == "pad" and a.shape:
        widths = tuple((b.draw(st.integers(0, 2)), b.draw(st.integers(0, 2))) for _ in a.shape)
        mode = b.pick(["constant", "edge", "reflect"])
        if mode == "reflect" and any(max(w) >= d for w, d in zip(widths, a.shape)):
            mode = "edge"
        if mode == "edge" and 0 in a.shape:
            mode = "constant"
        shape = tuple(d + sum(w) for d, w in zip(a.shape, widths))
        return _assign(b, shape, f"ug.pad({a.name}, {widths!r}, mode={mode!r})", [a.name])
    if how == "split" and a.shape and a.shape[0] >= 2:
        cut = b.draw(st.integers(1, a.shape[0] - 1))
        piece = b.draw(st.integers(0, 1))
        shape = ((cut,) if piece == 0 else (a.shape[0] - cut,)) + a.shape[1:]
        return _assign(b, shape, f"ug.split({a.name}, [{cut}], axis=0)[{piece}]", [a.name])
    if how == "reshape":
        shape = _factor_shape(b, size)
        written = list(shape)
        if size and b.draw(st.booleans()):
            written[b.draw(st.integers(0, len(shape) - 1))] = -1
        return _assign(b, shape, f"ug.reshape({a.name}, {tuple(written)!r})", [a.name])
    if how == "flat":
        return _assign(b, (size,), f"{a.name}.reshape(-1)", [a.name])
    if how == "transpose" and len(a.shape) >= 2:
        perm = tuple(b.draw(st.permutations(range(len(a.shape)))))
        if b.draw(st.booleans()):
            return _assign(b, a.shape[::-1], f"{a.name}.T", [a.name])
        shape = tuple(a.shape[p] for p in perm)
        return _assign(b, shape, f"ug.transpose({a.name}, {perm!r})", [a.name])
    if how == "slice" and a.shape:
        index = _slice_index(b, a.shape)
        shape = np.empty(a.shape)[index].shape
        return _assign(b, shape, f"{a.name}[{_index_text(index)}]", [a.name])
    if how == "squeeze" and 1 in a.shape:
        shape = tuple(d for d in a.shape if d != 1)
        if b.draw(st.booleans()):  # every size-1 axis, named (a trace may not know them)
            axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
            return _assign(b, shape, f"ug.squeeze({a.name}, axis={axes!r})", [a.name])
        return _assign(b, shape, f"ug.squeeze({a.name})", [a.name])
    if how == "broadcast":
        shape = (b.draw(st.integers(1, 3)),) + tuple(
            b.draw(st.integers(1, 3)) if d == 1 else d for d in a.shape)
        return _assign(b, shape, f"ug.broadcast_to({a.name}, {shape!r})", [a.name])
    axis = b.draw(st.integers(0, len(a.shape)))
    shape = a.shape[:axis] + (1,) + a.shape[axis:]
    return _assign(b, shape, f"ug.expand_dims({a.name}, {axis})", [a.name])


def join(b: Builder, env, depth):
    a = b.pick([v for v in _floats(env)])
    if not a.shape or b.draw(st.booleans()):
        same = [v for v in _floats(env) if v.shape == a.shape]
        other = b.pick(same) if b.draw(st.booleans()) else b.new_input(a.shape)
        axis = b.draw(st.integers(0, len(a.shape)))
        shape = a.shape[:axis] + (2,) + a.shape[axis:]
        return _assign(b, shape, f"ug.stack([{a.name}, {other.name}], axis={axis})",
                       [a.name, other.name])
    axis = b.draw(st.integers(0, len(a.shape) - 1))
    extra = b.draw(st.integers(1, 3))
    other_shape = a.shape[:axis] + (extra,) + a.shape[axis + 1:]
    fits = [v for v in _floats(env) if v.shape == other_shape]
    other = b.pick(fits) if fits and b.draw(st.booleans()) else b.new_input(other_shape)
    shape = a.shape[:axis] + (a.shape[axis] + extra,) + a.shape[axis + 1:]
    return _assign(b, shape, f"ug.concat([{a.name}, {other.name}], axis={axis})",
                   [a.name, other.name])


# -- linear algebra and nn ---------------------------------------------------------------------
def matmul(b: Builder, env, depth):
    matrices = [v for v in _floats(env) if len(v.shape) >= 2]
    a = b.pick(matrices) if matrices and b.draw(st.booleans()) else b.new_input(b.shape(2, 2))
    transpose = len(a.shape) == 2 and b.draw(st.booleans())
    m, k = (a.shape[-1], a.shape[-2]) if transpose else a.shape[-2:]
    fits = [v for v in _floats(env) if len(v.shape) == 2 and v.shape[0] == k]
    other = b.pick(fits) if fits and b.draw(st.booleans()) else b.new_input(
        (k, b.draw(st.integers(1, 4))))
    left = f"ug.transpose({a.name})" if transpose else a.name
    lead = "abcd"[:len(a.shape) - 2]
    einsum = f"ug.einsum('{lead}ij,jk->{lead}ik', {{l}}, {{r}})"
    expr = b.pick(["ug.matmul({l}, {r})", "{l} @ {r}", einsum]).format(l=left, r=other.name)
    shape = a.shape[:-2] + (m, other.shape[1])
    return _assign(b, shape, expr, [a.name, other.name])


def softmax(b: Builder, env, depth):
    xs = [v for v in _floats(env) if v.shape]
    if not xs:
        return None
    a = b.pick(xs)
    axis = b.draw(st.integers(-len(a.shape), len(a.shape) - 1))
    op = b.pick(["softmax", "log_softmax"])
    return _assign(b, a.shape, f"ug.{op}({a.name}, axis={axis})", [a.name])


def cross_entropy(b: Builder, env, depth):
    matrices = [v for v in _nonempty(env) if len(v.shape) == 2]
    a = b.pick(matrices) if matrices and b.draw(st.booleans()) else b.new_input(b.shape(2, 2))
    n, classes = a.shape
    labels = b.draw(st.lists(st.integers(0, classes - 1), min_size=n, max_size=n))
    return _assign(b, (n,), f"ug.sparse_softmax_cross_entropy({a.name}, np.array({labels}))",
                   [a.name])


def _image(b: Builder, env) -> Var:
    images = [v for v in _floats(env) if len(v.shape) == 4 and min(v.shape[2:]) >= 3]
    if images and b.draw(st.booleans()):
        return b.pick(images)
    batch = b.pick([1, 2, 0])  # a zero-size batch is valid too
    return b.new_input((batch, b.draw(st.integers(1, 4)), b.draw(st.integers(3, 6)),
                        b.draw(st.integers(3, 6))))


def conv2d(b: Builder, env, depth):
    x = _image(b, env)
    channels, height, width = x.shape[1:]
    groups = b.pick([g for g in (1, 2, 3, 4) if channels % g == 0])
    out_channels = groups * b.draw(st.integers(1, 2))
    pairs = {}
    for name, low, high in (("stride", 1, 2), ("padding", 0, 1), ("dilation", 1, 2)):
        pairs[name] = (b.draw(st.integers(low, high)), b.draw(st.integers(low, high)))
    kernel = []
    for size, pad, dil in zip((height, width), pairs["padding"], pairs["dilation"]):
        largest = (size + 2 * pad - 1) // dil + 1
        kernel.append(b.draw(st.integers(1, min(3, largest))))
    w = b.new_input((out_channels, channels // groups, *kernel))
    uses = [x.name, w.name]
    bias = ""
    if b.draw(st.booleans()):
        bias_var = b.new_input((out_channels,))
        bias, uses = f", {bias_var.name}", uses + [bias_var.name]
    out_hw = [(size + 2 * p - (d * (k - 1) + 1)) // s + 1 for size, p, d, k, s in zip(
        (height, width), pairs["padding"], pairs["dilation"], kernel, pairs["stride"])]
    attrs = ", ".join(f"{name}={value!r}" for name, value in pairs.items())
    expr = f"ug.conv2d({x.name}, {w.name}{bias}, {attrs}, groups={groups})"
    return _assign(b, (x.shape[0], out_channels, *out_hw), expr, uses)


def pool(b: Builder, env, depth):
    x = _image(b, env)
    op = b.pick(["max_pool2d", "avg_pool2d"])
    kernel = (b.draw(st.integers(1, 3)), b.draw(st.integers(1, 3)))
    stride = (b.draw(st.integers(1, 2)), b.draw(st.integers(1, 2)))
    padding = tuple(b.draw(st.integers(0, k // 2)) for k in kernel)
    out_hw = [(size + 2 * p - k) // s + 1
              for size, p, k, s in zip(x.shape[2:], padding, kernel, stride)]
    expr = f"ug.{op}({x.name}, {kernel!r}, stride={stride!r}, padding={padding!r})"
    return _assign(b, (*x.shape[:2], *out_hw), expr, [x.name])


# -- the families drawn since s16: transposed conv, one_hot, scatter, ensure_shape, creation,
# logical ops, selu, ug.random ---------------------------------------------------------------
def conv_transpose2d(b: Builder, env, depth):
    """`ug.conv_transpose2d` (groups, stride, padding, output_padding below the stride or
    the dilation, dilation, optional bias); its output size is never below 1 here."""
    x = _image(b, env)
    channels, height, width = x.shape[1:]
    groups = b.pick([g for g in (1, 2, 3, 4) if channels % g == 0])
    per_group = b.draw(st.integers(1, 2))
    pairs = {}
    for name, low, high in (("stride", 1, 2), ("padding", 0, 1), ("dilation", 1, 2)):
        pairs[name] = (b.draw(st.integers(low, high)), b.draw(st.integers(low, high)))
    pairs["output_padding"] = tuple(b.draw(st.integers(0, max(s, d) - 1)) for s, d in zip(
        pairs["stride"], pairs["dilation"]))
    kernel = (b.draw(st.integers(1, 3)), b.draw(st.integers(1, 3)))
    w = b.new_input((channels, per_group, *kernel))
    uses = [x.name, w.name]
    bias = ""
    if b.draw(st.booleans()):
        bias_var = b.new_input((groups * per_group,))
        bias, uses = f", {bias_var.name}", uses + [bias_var.name]
    out_hw = [(size - 1) * s - 2 * p + d * (k - 1) + o + 1 for size, s, p, d, k, o in zip(
        (height, width), pairs["stride"], pairs["padding"], pairs["dilation"], kernel,
        pairs["output_padding"])]
    attrs = ", ".join(f"{name}={value!r}" for name, value in pairs.items())
    expr = f"ug.conv_transpose2d({x.name}, {w.name}{bias}, {attrs}, groups={groups})"
    return _assign(b, (x.shape[0], groups * per_group, *out_hw), expr, uses)


def _indices(b: Builder, env, size: int) -> tuple[str, tuple, list]:
    """(int indices in [0, size) as an expression, their shape, the names they read): the
    argmax of a variable along an axis no longer than `size` (known only at run time) or
    constants."""
    sources = [(v, k) for v in _nonempty(env) for k, d in enumerate(v.shape) if d <= size]
    if sources and b.draw(st.booleans()):
        y, axis = b.pick(sources)
        return f"ug.argmax({y.name}, axis={axis})", y.shape[:axis] + y.shape[axis + 1:], [
            y.name]
    values = b.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4))
    return f"np.array({values})", (len(values),), []


def one_hot(b: Builder, env, depth):
    """`ug.one_hot` of in-range indices, in the program's dtype, times a variable of its
    shape (so a gradient flows), or alone."""
    size = b.draw(st.integers(1, 4))
    indices, shape, uses = _indices(b, env, size)
    shape = shape + (size,)
    like = b.operand(_floats(env))  # its dtype: the float64 reference computes in float64
    expr = f"ug.one_hot({indices}, {size}, dtype={like.name}.dtype)"
    uses = uses + [like.name]
    if b.draw(st.booleans()):
        other = b.new_input(shape)
        expr, uses = f"{expr} * {other.name}", uses + [other.name]
    return _assign(b, shape, expr, uses)


def scatter(b: Builder, env, depth):
    """`ug.scatter` ("replace" or "add") and `ug.scatter_add` along an axis of x, at
    in-range indices (repeats allowed: "replace" keeps the last), updates of `take`'s
    shape there or broadcasting to it."""
    xs = [v for v in _floats(env) if v.shape and v.shape[0]]
    if not xs:
        return None
    x = b.operand(xs)
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    if not x.shape[axis]:
        axis = 0
    indices, index_shape, uses = _indices(b, env, x.shape[axis])
    taken = x.shape[:axis] + index_shape + x.shape[axis + 1:]
    updates = b.new_input(_partner_shape(b, taken) if b.draw(st.booleans()) else taken)
    if not _broadcasts_to(updates.shape, taken):
        updates = b.new_input(taken)
    how = b.pick([f"ug.scatter({{x}}, {{i}}, {{u}}, axis={axis})",
                  f'ug.scatter({{x}}, {{i}}, {{u}}, axis={axis}, reduction="add")',
                  f"ug.scatter_add({{x}}, {{i}}, {{u}}, axis={axis})"])
    expr = how.format(x=x.name, i=indices, u=updates.name)
    return _assign(b, x.shape, expr, [x.name, updates.name] + uses)


def ensure_shape(b: Builder, env, depth):
    """`ug.ensure_shape(a, shape)` with a's sizes, some of them None (any size)."""
    a = b.operand(_floats(env))
    shape = tuple(None if b.draw(st.booleans()) else d for d in a.shape)
    return _assign(b, a.shape, f"ug.ensure_shape({a.name}, {shape!r})", [a.name])


def creation(b: Builder, env, depth):
    """zeros/ones/full (and their *_like), arange, linspace and eye in the program's
    dtype, combined with a variable (broadcasting along its last dims)."""
    a = b.operand(_floats(env))
    c = b.pick(SCALARS)
    made = ["ug.zeros_like({a}) - {a}", f"ug.ones_like({{a}}) * {c} + {{a}}",
            f"ug.full_like({{a}}, {c}) * {{a}}"]
    shape = _partner_shape(b, a.shape)
    made += [f"{{a}} + ug.zeros({shape!r}, {{a}}.dtype)",
             f"{{a}} * ug.ones({shape!r}, dtype={{a}}.dtype)",
             f"{{a}} - ug.full({shape!r}, {c}, {{a}}.dtype)"]
    if a.shape:
        n = a.shape[-1]
        made += [f"{{a}} * ug.arange({n}, dtype={{a}}.dtype)",
                 f"{{a}} + ug.arange(0.5, {n} * 0.5 + 0.5, 0.5, dtype={{a}}.dtype)",
                 f"{{a}} * ug.linspace(-1.0, 2.0, {n}, dtype={{a}}.dtype)",
                 f"{{a}} + ug.linspace(0.0, 1.0, {n}, endpoint=False, dtype={{a}}.dtype)"]
    if len(a.shape) >= 2:
        m, n = a.shape[-2:]
        k = b.draw(st.integers(-max(m - 1, 0), max(n - 1, 0)))
        made += [f"{{a}} * ug.eye({m}, {n}, {k}, dtype={{a}}.dtype)",
                 f"{{a}} + ug.eye({m}, {n}, dtype={{a}}.dtype) * {c}"]
    expr = b.pick(made)
    out = _broadcast(a.shape, shape) if "ug.zeros(" in expr or "ug.ones(" in expr or \
        "ug.full(" in expr else a.shape
    return _assign(b, out, expr.format(a=a.name), [a.name])


LOGICAL = [
    "ug.where(ug.logical_not({a} > {b}), {a}, {b} * 0.5)",
    "ug.where(ug.logical_or({a} > 0.5, {b} < -0.5), {a} * {b}, {a})",
    "ug.where(ug.logical_and({a} < {b}, {a} > -0.5), {a}, 1.0 - {b})",
    "ug.cast(ug.logical_or({a} > {b}, ug.logical_not({a} > 0.0)), {a}.dtype) * {b}",
]


def logical(b: Builder, env, depth):
    """`logical_not`/`logical_or`/`logical_and` of comparisons, into `where` or a cast."""
    a = b.operand(_floats(env))
    other = _partner(b, env, a)
    expr = b.pick(LOGICAL).format(a=a.name, b=other.name)
    return _assign(b, _broadcast(a.shape, other.shape), expr, [a.name, other.name])


def selu(b: Builder, env, depth):
    a = b.operand(_floats(env))
    expr = b.pick(["ug.selu({a})", "ug.selu({a} * 2.0) - {a}"]).format(a=a.name)
    return _assign(b, a.shape, expr, [a.name])


RANDOM = [
    "{a} * ug.random.uniform({shape}, {a}.dtype)",
    "{a} + ug.random.uniform({shape}, {a}.dtype, low=-1.0, high=1.0)",
    "{a} + ug.random.normal({shape}, {a}.dtype, std=0.5)",
    "{a} * ug.random.normal({shape}, {a}.dtype, mean=1.0, std=0.25)",
    "ug.where(ug.random.uniform({shape}, {a}.dtype) < 0.5, {a} * 2.0, 0.0 * {a})",
]


def random_draw(b: Builder, env, depth):
    """A `ug.random` draw (uniform, normal, randint) combined with a variable, or ints of
    `randint` in any int dtype. Only at the top of the program (a draw inside a cond branch
    or loop body is refused) and with known sizes: the harness seeds the generator
    (`model.call_seeded`, with `ug.manual_seed` or inside `ug.random.seeded`: `programs`)
    before each call, so every target draws the same numbers (README: random numbers).
    Also in the body of a helper `@ug.function` called there (`Builder.free_depth`)."""
    if depth != b.free_depth:
        return None
    a = b.operand(_floats(env))
    how = b.pick(["float", "take", "ints"])
    if how == "ints":
        dtype = b.pick(INT_DTYPES)
        low, high = b.pick([(0, 3), (-5, 6), (0, None), (-128, 128)] if dtype != "uint8"
                           else [(0, 3), (2, 9), (0, None), (0, 256)])
        bounds = f"{low + 7}" if high is None else f"{low}, {high}"
        expr = f'ug.random.randint({a.shape!r}, {bounds}, dtype="{dtype}")'
        return _assign(b, a.shape, expr, [], dtype=dtype)
    if how == "take" and a.shape and a.shape[0]:
        axis = b.draw(st.integers(0, len(a.shape) - 1))
        if a.shape[axis]:
            count = b.draw(st.integers(1, 4))
            shape = a.shape[:axis] + (count,) + a.shape[axis + 1:]
            expr = f"ug.take({a.name}, ug.random.randint(({count},), 0, {a.shape[axis]}), " \
                f"axis={axis})"
            return _assign(b, shape, expr, [a.name])
    shape = _partner_shape(b, a.shape)
    expr = b.pick(RANDOM).format(a=a.name, shape=repr(shape))
    return _assign(b, _broadcast(a.shape, shape), expr, [a.name])


# -- functional updates and masks --------------------------------------------------------------
def _mask_index(b: Builder, x: Var) -> tuple[str, tuple]:
    """(a NumPy boolean mask over x's leading dims as written, the shape it selects)."""
    rank = b.draw(st.integers(1, len(x.shape)))
    size = int(np.prod(x.shape[:rank]))
    bits = b.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    mask = np.array(bits, dtype=bool).reshape(x.shape[:rank])
    return f"np.array({mask.tolist()})", (int(mask.sum()),) + x.shape[rank:]


def _at_index(b: Builder, env, x: Var) -> tuple[str, tuple, list]:
    """(an index of x as written, the shape it selects, the names it reads) for
    `x.at[index]` (README "Indexing"): ints, slices and `None` known while tracing; an int
    list (repeats and negative entries) along an axis after full slices; a NumPy boolean
    mask over the leading dims; a traced int scalar (`_update_row`: the whole index); or a
    traced int array alone or after full slices (`ug.scatter` along that axis)."""
    how = b.pick(["basic", "list", "mask", "scalar", "array"])
    ints = [v for v in _ints(env) if len(v.shape) <= 2]
    if how == "scalar" and ints:
        i, n = b.operand(ints), x.shape[0]
        row = b.pick(["ug.sum({i}) % {n}", "ug.max({i}) % {n} - {n}", "ug.argmax({i})"])
        fits = {"ug.max({i}) % {n} - {n}": i.dtype != "uint8" and 0 not in i.shape,
                "ug.argmax({i})": len(i.shape) == 1 and 0 < i.shape[0] <= n}
        if not fits.get(row, True):  # (uint8 - n wraps; a max of nothing; a flat argmax)
            row = "ug.sum({i}) % {n}"
        return row.format(i=i.name, n=n), x.shape[1:], [i.name]
    if how == "array" and ints:
        i = b.operand(ints)
        axis = b.draw(st.integers(0, min(len(x.shape), 2) - 1))
        n = x.shape[axis]
        forms = ["{i} % {n}"] if i.dtype == "uint8" else ["{i} % {n}", "{i} % {n} - {n}"]
        text = ":, " * axis + b.pick(forms).format(i=i.name, n=n)
        return text, x.shape[:axis] + i.shape + x.shape[axis + 1:], [i.name]
    if how == "list":
        axis = b.draw(st.integers(0, len(x.shape) - 1))
        n = x.shape[axis]
        values = b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
        return ":, " * axis + repr(values), x.shape[:axis] + (len(values),) + \
            x.shape[axis + 1:], []
    if how == "mask":
        return _mask_index(b, x) + ([],)
    index = _slice_index(b, x.shape)
    return _index_text(index), np.empty(x.shape)[index].shape, []


def at_update(b: Builder, env, depth):
    """`x.at[index].set(v)` / `.add(v)` (`_at_index`), v a Python number, a value of the
    selected shape or one broadcasting to it: an updated copy, gradients to x and v."""
    xs = [v for v in _floats(env) if v.shape and 0 not in v.shape]
    if not xs:
        return None
    x = b.operand(xs)
    index, selected, uses = _at_index(b, env, x)
    method = b.pick(["set", "add"])
    how = b.pick(["scalar", "value", "partner"])
    if how == "scalar":
        value, uses = str(b.pick(SCALARS)), [x.name] + uses
    else:
        shape = selected if how == "value" else _partner_shape(b, selected)
        if not _broadcasts_to(shape, selected):
            shape = selected
        fits = [v for v in _floats(env) if v.shape == shape and v is not x]
        other = b.pick(fits) if fits and b.draw(st.booleans()) else b.new_input(shape)
        value, uses = other.name, [x.name, other.name] + uses
    return _assign(b, x.shape, f"{x.name}.at[{index}].{method}({value})", uses)


MASKED = [  # (the mask's value where it holds, where it does not): a value or a number
    ("{a}", "{b}"), ("{b}", "{a} * {a}"), ("{a}", "{k}"), ("{k}", "{a}"),
]


def masked(b: Builder, env, depth):
    """`ug.where` whose mask broadcasts against both values (fewer dims, dims of 1, or more
    dims than either: the result takes them all, and each gradient sums back to its
    operand's shape), a Python number on one side; or `x[mask]`, a NumPy boolean mask over
    x's leading dims (a selection every mode takes: README "Indexing")."""
    a = b.operand(_floats(env))
    if a.shape and 0 not in a.shape and b.draw(st.booleans(), label="select"):
        index, shape = _mask_index(b, a)
        return _assign(b, shape, f"{a.name}[{index}]", [a.name])
    yes, no = b.pick(MASKED)
    shape, uses, names = a.shape, [a.name], {"a": a.name, "k": b.pick(SCALARS)}
    if "{b}" in yes + no:
        other = _partner(b, env, a)
        shape, uses, names["b"] = _broadcast(shape, other.shape), uses + [other.name], other.name
    m = b.new_input(_partner_shape(b, shape))
    mask = b.pick(["{m} > {c}", "{m} <= {c}"]).format(m=m.name, c=b.pick(THRESHOLDS))
    yes, no = yes.format(**names), no.format(**names)
    shape, uses = _broadcast(shape, m.shape), uses + [m.name]
    return _assign(b, shape, f"ug.where({mask}, {yes}, {no})", uses)


# -- control flow ------------------------------------------------------------------------------
PREDICATES = ["ug.sum({a}) > {c}", "ug.mean({a}) < {c}", "ug.max({a}) > {c}"]
THRESHOLDS = [0.0, 0.5, -0.5, 1.0]


def _predicate(b: Builder, env) -> tuple[str, list]:
    a = b.operand(_nonempty(env))
    text = b.pick(PREDICATES).format(a=a.name, c=b.pick(THRESHOLDS))
    return text, [a.name]


def _block(b: Builder, env, depth, shape, params=(), pack="") -> Block:
    """A few statements, then a result of `shape`, preferring the block's own values; with
    `pack` ("tuple" or "dict"), a pair of such results, `(a, b)` or `{"a": a, "b": b}`."""
    local = list(env) + list(params)
    made = []
    for _ in range(b.draw(st.integers(0, 3), label="block length")):
        stmt = statement(b, local, depth)
        made.append(stmt)
        local.append(stmt.out)
    own = [s.out for s in made] + list(params)
    candidates = [v for v in own + _floats(env) if v.is_float and _broadcasts_to(v.shape, shape)]
    texts, uses = [], []
    for _ in range(2 if pack else 1):
        r = b.pick(candidates)
        text = r.name if r.shape == shape else f"ug.broadcast_to({r.name}, {shape!r})"
        texts.append(b.pick(["{r}", "ug.tanh({r})"]).format(r=text))
        uses.append(r.name)
    if pack == "tuple":
        return Block(made, f"({texts[0]}, {texts[1]})", tuple(uses))
    if pack == "dict":
        return Block(made, f'{{"a": {texts[0]}, "b": {texts[1]}}}', tuple(uses))
    return Block(made, texts[0], tuple(uses))


def branch(b: Builder, env, depth):
    anchor = b.operand(_floats(env))
    pred, uses = _predicate(b, env)
    style = b.pick(["cond", "if"])
    # ug.cond's branches may return a tuple or a dict of two values (`Branch.pack`)
    pack = b.pick(["", "tuple", "dict"]) if style == "cond" else ""
    then = _block(b, env, depth + 1, anchor.shape, pack=pack)
    orelse = _block(b, env, depth + 1, anchor.shape, pack=pack)
    return Branch(Var(b.name(), anchor.shape), pred, tuple(uses), then, orelse, style, b.tag(),
                  pack)


def loop(b: Builder, env, depth):
    init = b.operand(_floats(env))
    style = b.pick(["while_loop", "while"])
    out = Var(b.name(), init.shape)
    param = Var(b.name(), init.shape) if style == "while_loop" else out
    trips = b.draw(st.integers(0, 3))
    body = _block(b, env, depth + 1, init.shape, (param,))
    extra = b.pick(["", "ug.sum({v}) < 40.0"])
    carry = b.pick(["", "dict"]) if style == "while_loop" else ""
    return Loop(out, init.name, param, trips, body, style, b.tag(), extra, carry)


def call(b: Builder, env, depth):
    """`fn(a[, c])`: the program calls a helper `@ug.function` (`model.Call`), whose body
    is a block over its parameters. A value the body makes a new input of (a partner, a
    weight) is passed to it as one more argument, under the same name."""
    a = b.operand(_nonempty(env))  # a branch in the body needs a nonempty value
    args = [a]
    if b.draw(st.booleans(), label="second argument"):
        args.append(_partner(b, env, a))
    params = [Var(b.name(), v.shape) for v in args]
    made = len(b.inputs)
    free = b.free_depth
    if depth == free:  # called where it may draw: so may the helper's body
        b.free_depth = depth + 1
    body = _block(b, [], depth + 1, a.shape, params)
    b.free_depth = free
    new = [i.var for i in b.inputs[made:]]
    return Call(Var(b.name(), a.shape), tuple(v.name for v in args + new),
                tuple(params + new), body, b.tag())


# Simplest first: hypothesis shrinks a choice toward the start of the list.
OPERATIONS = [unary, with_scalar, binary, reduce, reshape, softmax, matmul, cast, join,
              argmax_take, argmax, cross_entropy, conv2d, pool, conv_transpose2d, one_hot,
              scatter, ensure_shape, creation, logical, selu, random_draw,
              to_int, int_arithmetic, int_reduce, from_int, int_take, at_update, masked]
CONTROL_FLOW = [branch, loop, call]

# The draws added in s19 (`more_draws`), after the helpers they use are defined above.
from unigraph.testing.random_programs import more_draws  # noqa: E402

OPERATIONS += more_draws.OPERATIONS
CONTROL_FLOW += more_draws.CONTROL_FLOW

# The draws added in s20 (`autograph_draws`): `for` loops, break / continue, plain helpers.
from unigraph.testing.random_programs import autograph_draws  # noqa: E402

CONTROL_FLOW += autograph_draws.CONTROL_FLOW


def statement(b: Builder, env, depth):
    """One statement over the variables of `env`, valid by construction; about one in
    five is control flow while nesting is below `max_depth`."""
    nest = depth < b.max_depth and b.draw(st.integers(0, 4), label="nest") == 4
    generator = b.draw(st.sampled_from(CONTROL_FLOW if nest else OPERATIONS), label="kind")
    return generator(b, env, depth) or unary(b, env, depth)


# Which dims a program's input_spec leaves open (None), simplest first: none (no
# input_spec, every dim known to the trace), the leading (batch) dim of every input, a
# drawn set of dims of each input, every dim.
OPEN_DIMS = ["none", "batch", "some", "all"]


def _open_dims(draw, inputs: list) -> list:
    """`inputs` with the axes their input_spec leaves open. Any dim may be open: the
    inputs keep their sizes, so the program stays valid, and the trace must not assume
    what it cannot know (that an open dim is not 1, that two open dims are equal)."""
    how = draw(st.sampled_from(OPEN_DIMS), label="open dims")
    opened = []
    for item in inputs:
        rank = len(item.var.shape)
        if how == "none" or rank == 0:
            axes = ()
        elif how == "batch":
            axes = (0,)
        elif how == "all":
            axes = tuple(range(rank))
        else:
            axes = tuple(sorted(draw(st.sets(st.integers(0, rank - 1)), label="open axes")))
        opened.append(dataclasses.replace(item, open=axes))
    return opened


@st.composite
def programs(draw, dtypes=("float32", "float64"), max_statements=8, max_depth=2,
             open_dims=True, training=True) -> Program:
    """A random valid `Program` (see the module docstring). It returns every value no
    other statement uses, so nothing it computes is dead code. With `open_dims`, its
    input_spec may leave dims of its inputs open (`OPEN_DIMS`); without, it has none.
    With `training`, about one draw in five is a training program instead
    (`training.trainings`: a `ug.nn` model, a loss and `ug.optim` steps); with
    `training="only"`, every draw is one.

    >>> from hypothesis import given
    >>> @given(programs())
    ... def test_renders(program):
    ...     assert "def program" in render(program)
    """
    if training == "only" or (training and draw(st.integers(0, 4), label="training") == 4):
        return draw(trainings(dtypes, open_dims))
    b = Builder(draw, draw(st.sampled_from(list(dtypes)), label="dtype"), max_depth)
    env = [b.new_input(b.shape())]
    stmts = []
    for _ in range(draw(st.integers(1, max_statements), label="statements")):
        stmt = statement(b, env, 0)
        stmts.append(stmt)
        env.append(stmt.out)
    used = set().union(*(set(reads(s)) for s in stmts))
    outputs = [s.out.name for s in stmts if s.out.name not in used]
    if not any(s.out.is_float and s.out.name in outputs for s in stmts):
        outputs.append(_floats(env)[-1].name)
    inputs = _open_dims(draw, b.inputs) if open_dims else b.inputs
    grad_form = draw(st.sampled_from(["grad", "value_and_grad"]), label="grad form")
    # None: each call after `ug.manual_seed`; else inside `ug.random.seeded(that)`
    seeded = draw(st.one_of(st.none(), st.integers(1, 2**16)), label="seeded")
    result = draw(st.sampled_from(["tuple", "dict"]), label="result")
    return Program(b.dtype, inputs, stmts, outputs, grad_form, seeded, result)
