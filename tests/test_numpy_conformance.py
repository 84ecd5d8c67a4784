"""The `ug.*` functions that carry NumPy's names against NumPy itself (not the op records), on
all 9 targets: hypothesis draws the argument forms a NumPy user writes (negative axes, axis
tuples, axis=None, keepdims, empty and size-1 dims, 0-d inputs, Python scalars beside
arrays, bool and int inputs, negative split points, indices and repeats), and each call,
inside `@ug.function` so that the static targets trace it, must give NumPy's value, dtype
and shape, or raise a clear error (naming the function) where NumPy raises.

Where unigraph differs on purpose the expected dtype or the refusal follows the README
line that says so (quoted at each `README_*` rule below). The draws are derandomized, so
every target and every run sees the same cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import unigraph as ug

_SETTINGS = settings(max_examples=12, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


def SETTINGS(test):  # noqa: N802 (used as a decorator, as hypothesis' `settings`)
    """Hypothesis settings plus a fixed seed: every target (each a parametrization of one
    test) is given the same drawn cases, in every run (derandomize would seed each
    parametrization apart)."""
    return seed(20)(_SETTINGS(test))

# README "Dtype rules": "`sum`, `prod` and `cumsum` keep an int input's dtype (NumPy widens
# int32 to int64); of bools they count in int64, as NumPy".
README_KEEPS_INT = {"sum", "prod", "cumsum"}
# README "Dtype rules": "`div`, `pow`, `mean`, `exp`, `log`, `sqrt`, `sigmoid`, `tanh` of
# integers compute in float64"; "`floor`, `ceil`, `round` and the trig functions of integers
# and bools compute in float64"; "`matmul` and `einsum` of integers compute in float64".
README_INT_TO_FLOAT64 = {"power", "sqrt", "exp", "sin", "floor", "ceil", "round", "matmul",
                         "einsum"}
# README "Dtype rules": "Arithmetic on bools (`abs`, `sign`, `neg`, `add`, `sub`, `mul`,
# `maximum`, `minimum`, `mod`, `floor_divide`) is refused with an error naming the cast".
README_NO_BOOL_ARITHMETIC = {"abs", "sign", "add", "subtract", "multiply", "maximum",
                             "minimum", "mod", "floor_divide"}

DTYPES = ["float64", "float32", "int32", "int8", "bool"]
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)


def values(dtype, shape):
    """Arrays of `dtype` and `shape` with small values (no overflow, exact float sums)."""
    if dtype == "bool":
        elements = st.booleans()
    elif dtype.startswith("int"):
        elements = st.integers(-4, 4)
    else:
        elements = st.sampled_from([-2.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.0, 3.25])
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def array(draw, dtypes=DTYPES, shapes=SHAPES):
    return draw(values(draw(st.sampled_from(dtypes)), draw(shapes)))


@st.composite
def axis_for(draw, ndim: int, tuples: bool = True, none: bool = True):
    """An axis a NumPy user writes for a rank-`ndim` array: None, an int (negative ones
    too, now and then one out of range), or a tuple of distinct (sometimes repeated) axes."""
    forms = ["int"] + (["none"] if none else []) + (["tuple"] if tuples else [])
    form = draw(st.sampled_from(forms))
    if form == "none":
        return None
    low, high = -max(ndim, 1) - 1, max(ndim, 1)  # one past each end: NumPy's AxisError
    if form == "int":
        return draw(st.integers(low, high))
    return tuple(draw(st.lists(st.integers(-ndim, ndim - 1), max_size=ndim + 1))) if ndim \
        else ()


def numpy_result(np_fn, *args):
    """NumPy's result, or the exception it raised."""
    with np.errstate(all="ignore"):
        try:
            return np_fn(*args)
        except (ValueError, TypeError, IndexError, np.exceptions.AxisError) as error:
            return error


def expected_dtype(op: str, want: np.ndarray, inputs) -> np.dtype:
    kinds = {np.asarray(x).dtype.kind for x in inputs}
    if op in README_KEEPS_INT and want.dtype.kind in "iu" and kinds <= set("iu"):
        return np.result_type(*inputs)
    if op in README_INT_TO_FLOAT64 and kinds <= set("iub"):
        return np.dtype("float64")
    if op in README_INT_TO_FLOAT64 and want.dtype == np.float16:  # int8 or bool beside int
        return np.dtype("float64")
    return want.dtype


def agree(target: str, op: str, ug_fn, np_fn, *arrays, dtype_of=None):
    """`ug_fn(*arrays)` run on `target` inside `@ug.function` gives `np_fn(*arrays)`'s value,
    dtype and shape (each piece of a list), or raises an error naming `op` where NumPy
    raises."""
    want = numpy_result(np_fn, *arrays)
    function = ug.function(ug_fn)
    if isinstance(want, Exception):
        with pytest.raises((ug.UnigraphError, ValueError, TypeError, IndexError)) as raised:
            run_on(target, function, *arrays)
        # (argmin is an argmax of the reversed x: an empty axis is argmax's error, as
        # tests/test_open_dim_empty_max_and_reshape.py pins)
        names = (op, "argmax") if op == "argmin" else (op,)
        assert any(name in str(raised.value) for name in names), (
            f"NumPy raised {want!r}; unigraph's error does not name {op}: {raised.value!r}")
        return
    got = run_on(target, function, *arrays)
    pieces = list(want) if isinstance(want, list | tuple) else [want]
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(pieces), f"{len(got)} pieces, NumPy gives {len(pieces)}"
    for out, expected in zip(got, pieces, strict=True):
        expected = np.asarray(expected)
        dtype = (dtype_of or expected_dtype)(op, expected, arrays)
        assert out.shape == expected.shape, f"shape {out.shape}, NumPy's {expected.shape}"
        assert out.dtype == dtype, f"dtype {out.dtype}, NumPy's {expected.dtype} ({dtype})"
        if expected.dtype.kind == "f" or out.dtype.kind == "f":
            tolerance = 1e-3 if np.float16 in (out.dtype, expected.dtype) else \
                2e-6 if np.float32 in (out.dtype, expected.dtype) else 1e-12
            np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64),
                                       rtol=tolerance, atol=tolerance)
        else:
            np.testing.assert_array_equal(out, expected)


def refused_bool(target: str, op: str, ug_fn, *arrays):
    """README_NO_BOOL_ARITHMETIC: a bool operand is refused with an error naming the op."""
    with pytest.raises((ug.UnigraphError, TypeError), match=op.replace("subtract", "sub")
                       .replace("multiply", "mul").replace("power", "pow")):
        run_on(target, ug.function(ug_fn), *arrays)


# -- reductions ---------------------------------------------------------------------------
@st.composite
def reduction_case(draw):
    x = draw(array(["float64", "int32", "bool"]))
    return x, draw(axis_for(x.ndim)), draw(st.booleans())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@SETTINGS
@given(case=reduction_case())
def test_reductions(target, op, case):
    x, axis, keepdims = case
    agree(target, op, lambda x: getattr(ug, op)(x, axis=axis, keepdims=keepdims),
          lambda x: getattr(np, op)(x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["var", "std"])
@SETTINGS
@given(case=reduction_case(), ddof=st.integers(0, 2))
def test_var_std(target, op, case, ddof):
    x, axis, keepdims = case
    x = x.astype(np.int32) if x.dtype == bool else x  # (NumPy's var of bools raises)
    agree(target, op, lambda x: getattr(ug, op)(x, axis=axis, keepdims=keepdims, ddof=ddof),
          lambda x: getattr(np, op)(x, axis=axis, keepdims=keepdims, ddof=ddof), x)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@SETTINGS
@given(x=array(["float64", "int32", "int8", "bool"]), data=st.data())
def test_argmax_argmin(target, op, x, data):
    axis = data.draw(axis_for(x.ndim, tuples=False))
    keepdims = data.draw(st.booleans())
    agree(target, op, lambda x: getattr(ug, op)(x, axis=axis, keepdims=keepdims),
          lambda x: getattr(np, op)(x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(["float64", "int32", "bool"]), data=st.data())
def test_cumsum(target, x, data):
    axis = data.draw(axis_for(x.ndim, tuples=False))
    agree(target, "cumsum", lambda x: ug.cumsum(x, axis=axis), lambda x: np.cumsum(x, axis=axis),
          x)


# -- elementwise --------------------------------------------------------------------------
BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "maximum": "maximum",
          "minimum": "minimum", "mod": "mod", "floor_divide": "floor_divide", "power": "pow"}


@st.composite
def operand(draw, shape):
    """An array of `shape`, or (now and then) a Python int, float or bool."""
    kind = draw(st.sampled_from(["array", "array", "array", "int", "float", "bool"]))
    if kind == "int":
        return draw(st.integers(-3, 3))
    if kind == "float":
        return draw(st.sampled_from([-1.5, 0.5, 2.0]))
    if kind == "bool":
        return draw(st.booleans())
    return draw(values(draw(st.sampled_from(DTYPES)), shape))


def call_with(fn, operands):
    """`fn` on `operands` with the arrays as the @ug.function's inputs and the Python
    numbers kept as they are (closed over: a number passed in would be a float32 input)."""
    arrays = [x for x in operands if isinstance(x, np.ndarray)]

    def run(*inputs):
        it = iter(inputs)
        return fn(*[next(it) if isinstance(x, np.ndarray) else x for x in operands])

    return run, arrays


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", list(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary(target, op, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    a, b = (data.draw(operand(shape)) for shape in shapes.input_shapes)
    if not any(isinstance(x, np.ndarray) for x in (a, b)):
        a = np.asarray(a)
    kinds = {np.asarray(x).dtype.kind for x in (a, b)}
    if op in ("mod", "floor_divide") and kinds <= set("iub"):
        # An int divided by 0: NumPy gives 0 with a warning, each framework its own.
        b = np.where(np.asarray(b) == 0, 1, b).astype(np.asarray(b).dtype) \
            if isinstance(b, np.ndarray) else (b or 1)
    if op == "power" and kinds <= set("iub"):
        # NumPy refuses an int to a negative int power; README_INT_TO_FLOAT64 computes it.
        b = np.abs(b) if isinstance(b, np.ndarray) else abs(b)
    ug_fn, arrays = call_with(getattr(ug, BINARY[op]), (a, b))
    if op in README_NO_BOOL_ARITHMETIC and all(
            np.asarray(x).dtype == np.bool_ for x in (a, b)):
        refused_bool(target, BINARY[op], ug_fn, *arrays)
        return
    np_fn, _ = call_with(getattr(np, op), (a, b))
    agree(target, op, ug_fn, np_fn, *arrays,
          dtype_of=lambda op_, want, _: _binary_dtype(op, want, a, b))


def _binary_dtype(op, want, a, b):
    operands = [np.asarray(x) for x in (a, b)]
    if op == "power" and all(x.dtype.kind in "iub" for x in operands):
        return np.dtype("float64")  # README_INT_TO_FLOAT64
    return want.dtype


UNARY = ["abs", "sign", "round", "floor", "ceil", "sqrt", "exp", "sin", "negative"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", UNARY)
@SETTINGS
@given(x=array(["float64", "float32", "int32", "int8", "bool"]))
def test_unary(target, op, x):
    name = {"negative": "neg"}.get(op, op)
    if op == "sqrt":
        x = np.abs(x) if x.dtype != bool else x
    if x.dtype == bool and (op in README_NO_BOOL_ARITHMETIC or op == "negative"):
        refused_bool(target, name, lambda x: getattr(ug, name)(x), x)
        return
    agree(target, op, lambda x: getattr(ug, name)(x), lambda x: getattr(np, op)(x), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(data=st.data())
def test_where(target, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
    condition = data.draw(values("bool", shapes.input_shapes[0]))
    x, y = (data.draw(operand(shape)) for shape in shapes.input_shapes[1:])
    ug_fn, arrays = call_with(ug.where, (condition, x, y))
    np_fn, _ = call_with(np.where, (condition, x, y))
    agree(target, "where", ug_fn, np_fn, *arrays,
          dtype_of=lambda op, want, _: _python_numbers_dtype(want, x, y))


def _python_numbers_dtype(want, *operands):
    """README "Dtype rules": "Operands that are all Python numbers (`ug.where(c, 0, 1.5)`)
    take the dtypes each has alone (int64, float32, bool) promoted together"."""
    if any(isinstance(x, np.ndarray) for x in operands):
        return want.dtype
    alone = {bool: np.bool_, int: np.int64, float: np.float32}
    return np.result_type(*[alone[type(x)] for x in operands])


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(["float64", "float32", "int32"]),
       low=st.sampled_from([None, -1, 0.5, 2]), high=st.sampled_from([None, 1, 2.5, -2]))
def test_clip(target, x, low, high):
    if low is None and high is None:
        low = 0
    agree(target, "clip", lambda x: ug.clip(x, low, high), lambda x: np.clip(x, low, high), x)


# -- shapes -------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["concat", "stack"])
@SETTINGS
@given(data=st.data())
def test_concat_stack(target, op, data):
    shape = data.draw(hnp.array_shapes(min_dims=0 if op == "stack" else 1, max_dims=3,
                                       min_side=0, max_side=3))
    rank = len(shape) + (op == "stack")
    axis = data.draw(st.integers(-rank - 1, rank))
    count = data.draw(st.integers(1, 3))
    xs = []
    for _ in range(count):
        own = list(shape)
        if op == "concat" and -rank <= axis < rank:
            own[axis] = data.draw(st.integers(0, 3))  # concat's axis may differ
        xs.append(data.draw(values(data.draw(st.sampled_from(DTYPES[:4])), tuple(own))))
    np_op = np.concatenate if op == "concat" else np.stack
    agree(target, op, lambda *xs: getattr(ug, op)(list(xs), axis=axis),
          lambda *xs: np_op(list(xs), axis=axis), *xs)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(data=st.data())
def test_split(target, data):
    x = data.draw(array(["float64", "int32"], hnp.array_shapes(min_dims=1, max_dims=2,
                                                                 min_side=0, max_side=6)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    size = x.shape[axis]
    if data.draw(st.integers(0, 2)) == 0:
        sections = data.draw(st.integers(1, 4))  # n equal pieces (NumPy raises if not)
    else:  # split points: a negative one first, then any (past the end, out of order)
        sections = [data.draw(st.integers(-size - 1, -1))] + data.draw(
            st.lists(st.integers(-size - 2, size + 2), max_size=2))
    agree(target, "split", lambda x: ug.split(x, sections, axis=axis),
          lambda x: np.split(x, sections, axis=axis), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(["float64", "int32", "bool"]), data=st.data())
def test_reshape(target, x, data):
    size = x.size
    sizes = [d for d in range(1, 7) if size % d == 0] if size else [0, 2, 3]
    first = data.draw(st.sampled_from(sizes))
    shape = data.draw(st.sampled_from([
        (-1,), (first, -1), (-1, first), (first, size // first if first else 3),
        (first, 5, -1), (size + 1,)]))
    agree(target, "reshape", lambda x: ug.reshape(x, shape), lambda x: np.reshape(x, shape), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(), data=st.data())
def test_transpose(target, x, data):
    perm = data.draw(st.one_of(st.none(), st.permutations(range(x.ndim)).map(
        lambda p: tuple(a - x.ndim if i % 2 else a for i, a in enumerate(p)))))
    agree(target, "transpose", lambda x: ug.transpose(x, perm),
          lambda x: np.transpose(x, perm), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(shapes=hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=2)),
       data=st.data())
def test_squeeze(target, x, data):
    axis = data.draw(axis_for(x.ndim))
    agree(target, "squeeze", lambda x: ug.squeeze(x, axis), lambda x: np.squeeze(x, axis), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(), data=st.data())
def test_expand_dims(target, x, data):
    axis = data.draw(axis_for(x.ndim + 1, none=False))
    if axis == ():
        axis = 0
    agree(target, "expand_dims", lambda x: ug.expand_dims(x, axis),
          lambda x: np.expand_dims(x, axis), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(), data=st.data())
def test_flip(target, x, data):
    axis = data.draw(axis_for(x.ndim))
    agree(target, "flip", lambda x: ug.flip(x, axis), lambda x: np.flip(x, axis), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(), reps=st.one_of(st.integers(-1, 3),
                                 st.lists(st.integers(-1, 3), min_size=0, max_size=4)))
def test_tile(target, x, reps):
    agree(target, "tile", lambda x: ug.tile(x, reps), lambda x: np.tile(x, reps), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(DTYPES[:4]), data=st.data())
def test_pad(target, x, data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect"]))
    pair = st.tuples(st.integers(0, 2), st.integers(0, 2))
    width = data.draw(st.one_of(st.integers(0, 2), pair,
                                st.lists(pair, min_size=x.ndim, max_size=x.ndim)))
    if mode == "reflect" and np.size(width):
        # README (Shapes): reflect takes each width below the axis size; NumPy reflects
        # again past it. Only the widths both accept are compared.
        x = np.concatenate([x] * 3, axis=0) if x.ndim and x.shape[0] else x
        low = min(x.shape, default=3)
        width = np.minimum(np.broadcast_to(width, (x.ndim, 2)), max(low - 1, 0)).tolist()
    agree(target, "pad", lambda x: ug.pad(x, width, mode=mode),
          lambda x: np.pad(x, width, mode=mode), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(x=array(shapes=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)),
       data=st.data())
def test_take(target, x, data):
    axis = data.draw(axis_for(x.ndim, tuples=False))
    size = x.size if axis is None else x.shape[axis] if -x.ndim <= axis < x.ndim else 1
    indices = data.draw(st.one_of(
        st.integers(-size, size - 1), st.just([]),
        hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3),
                   elements=st.integers(-size, size - 1))))
    agree(target, "take", lambda x: ug.take(x, indices, axis=axis),
          lambda x: np.take(x, indices, axis=axis), x)


@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(data=st.data())
def test_broadcast_to(target, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=1, max_dims=3, max_side=3))
    x = data.draw(values(data.draw(st.sampled_from(DTYPES)), shapes.input_shapes[0]))
    shape = shapes.result_shape
    agree(target, "broadcast_to", lambda x: ug.broadcast_to(x, shape),
          lambda x: np.broadcast_to(x, shape), x)


# -- linear algebra -----------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@SETTINGS
@given(data=st.data())
def test_matmul(target, data):
    # README "Dtype rules": "`matmul` needs rank >= 2 on both sides (no implicit vector
    # promotion)": ranks 2 and 3 here, batch dims broadcast, sizes 0 and 1 too.
    n, k, m = (data.draw(st.integers(0, 3)) for _ in range(3))
    batch = data.draw(st.sampled_from([(), (1,), (2,)]))
    other = data.draw(st.sampled_from([(), batch]))
    a = data.draw(values(data.draw(st.sampled_from(DTYPES[:3])), batch + (n, k)))
    b = data.draw(values(data.draw(st.sampled_from(DTYPES[:3])), other + (k, m)))
    agree(target, "matmul", ug.matmul, np.matmul, a, b)


EINSUMS = {"ij,jk->ik": [(2, 3), (3, 4)], "ij->ji": [(2, 3)], "bij,bjk->bik": [(2, 1, 3),
           (2, 3, 0)], "ij,ij->": [(2, 3), (2, 3)], "ij,jk": [(1, 3), (3, 2)], "i,j->ij":
           [(3,), (2,)], "ij->j": [(0, 2)]}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("equation", list(EINSUMS))
def test_einsum(target, equation):
    rng = np.random.default_rng(0)
    xs = [rng.integers(-3, 4, shape).astype(dtype)
          for shape, dtype in zip(EINSUMS[equation], ["float64", "int32"])]
    agree(target, "einsum", lambda *xs: ug.einsum(equation, *xs),
          lambda *xs: np.einsum(equation, *xs), *xs)
