"""The tensor API a NumPy/PyTorch user expects (issue 14, part 1), on all 9 targets: the
functions composed from op records, creation, random draws, indexing, functional updates,
tensor methods, dtype constants, repr and generated docs. Each value is compared with
NumPy in float64 or with a hand-computed one; the op records themselves are covered by
test_consistency.py."""

import math

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import TracingError

RNG = np.random.default_rng(14)
X = RNG.standard_normal((3, 4))
X32 = X.astype(np.float32)
ERF = np.vectorize(math.erf)


def _close(got, want, rtol=2e-5, atol=2e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def _static(target: str) -> bool:
    return Target.parse(target).mode != "eager"


# -- composed functions: value against float64 NumPy -------------------------------------------
COMPOSED = {
    "clip": (lambda x: ug.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7)),
    "sign": (ug.sign, np.sign),
    "gelu": (ug.gelu, lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2)))),
    "gelu_tanh": (lambda x: ug.gelu(x, "tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    "silu": (ug.silu, lambda x: x / (1 + np.exp(-x))),
    "leaky_relu": (lambda x: ug.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (ug.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "selu": (ug.selu, lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x))),
    "var": (lambda x: ug.var(x, axis=1), lambda x: np.var(x, axis=1)),
    "std_ddof": (lambda x: ug.std(x, axis=0, keepdims=True, ddof=1),
                 lambda x: np.std(x, axis=0, keepdims=True, ddof=1)),
    "logsumexp": (lambda x: ug.logsumexp(x * 300, axis=1),
                  lambda x: np.log(np.sum(np.exp(x * 300 - (x * 300).max(1, keepdims=True)),
                                          1)) + (x * 300).max(1)),
    "norm": (ug.norm, np.linalg.norm),
    "norm_1": (lambda x: ug.norm(x, 1, axis=1), lambda x: np.linalg.norm(x, 1, axis=1)),
    "norm_inf": (lambda x: ug.norm(x, np.inf, axis=0), lambda x: np.linalg.norm(x, np.inf, 0)),
    "argmin": (lambda x: ug.argmin(x, axis=1), lambda x: np.argmin(x, axis=1)),
    "flatten": (ug.flatten, np.ravel),
    "flatten_tail": (lambda x: ug.flatten(ug.reshape(x, (3, 2, 2)), 1),
                     lambda x: x.reshape(3, 4)),
    "flip": (lambda x: ug.flip(x, 1), lambda x: np.flip(x, 1)),
    "flip_all": (ug.flip, np.flip),
    "tile": (lambda x: ug.tile(x, (2, 1, 2)), lambda x: np.tile(x, (2, 1, 2))),
    "pad_constant": (lambda x: ug.pad(x, ((1, 0), (2, 1)), value=-1.5),
                     lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=-1.5)),
    "pad_reflect": (lambda x: ug.pad(x, (2, 1), mode="reflect"),
                    lambda x: np.pad(x, (2, 1), mode="reflect")),
    "pad_edge": (lambda x: ug.pad(x, ((0, 2), (1, 1)), mode="edge"),
                 lambda x: np.pad(x, ((0, 2), (1, 1)), mode="edge")),
    "split": (lambda x: ug.concat(ug.split(x, [1, 3], axis=1)[::-1], axis=1),
              lambda x: np.concatenate(np.split(x, [1, 3], axis=1)[::-1], axis=1)),
    "mod_operator": (lambda x: x % 0.75, lambda x: np.mod(x, 0.75)),
    "floordiv_operator": (lambda x: x // 0.75, lambda x: np.floor_divide(x, 0.75)),
    "unsqueeze": (lambda x: x.unsqueeze(1).squeeze(), lambda x: x),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
@pytest.mark.parametrize("target", TARGETS)
def test_composed_function_matches_numpy(target, name):
    fn, reference = COMPOSED[name]
    got = run_on(target, ug.function(fn), X32)
    _close(got, reference(X))


GRADIENTS = {  # d sum(f(x) * w) / dx, by hand from NumPy
    "pad_reflect": (lambda x: ug.pad(x, ((0, 0), (0, 2)), mode="reflect"),
                    lambda w: np.concatenate([w[..., :1], w[..., 1:2] + w[..., 5:6],
                                              w[..., 2:3] + w[..., 4:5], w[..., 3:4]], axis=-1)),
    "tile": (lambda x: ug.tile(x, 2), lambda w: w[..., :4] + w[..., 4:]),
    "flip": (lambda x: ug.flip(x, 1), lambda w: np.flip(w, 1)),
    "at_add": (lambda x: x.at[:, [0, 2, 2]].add(ug.ones((3,)) * 5.0), lambda w: w),
    "at_set": (lambda x: x.at[1].set(0.0), lambda w: w * (np.arange(3) != 1)[:, None]),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
@pytest.mark.parametrize("target", TARGETS)
def test_composed_gradient(target, name):
    fn, by_hand = GRADIENTS[name]
    w = RNG.standard_normal(np.shape(run_on("numpy:eager", ug.function(fn), X)))
    grad = ug.grad(lambda x: ug.sum(fn(x) * w))
    _close(run_on(target, grad, X), by_hand(w), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_logsumexp_and_gelu_gradients(target):
    def loss(x):
        return ug.sum(ug.logsumexp(x, axis=1)) + ug.sum(ug.gelu(x))

    softmax = np.exp(X - X.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    gelu = 0.5 * (1 + ERF(X / np.sqrt(2))) + X * np.exp(-X * X / 2) / np.sqrt(2 * np.pi)
    _close(run_on(target, ug.grad(loss), X), softmax + gelu, rtol=1e-10, atol=1e-12)


# -- creation ---------------------------------------------------------------------------------
CREATION = {
    "zeros": (lambda: ug.zeros((2, 3)), np.zeros((2, 3), np.float32)),
    "ones_int": (lambda: ug.ones(3, ug.int32), np.ones(3, np.int32)),
    "full": (lambda: ug.full((2,), 1.5, "float64"), np.full(2, 1.5)),
    "full_bool": (lambda: ug.full((2, 1), True), np.ones((2, 1), bool)),
    "zeros_like": (lambda: ug.zeros_like(ug.tensor([[1, 2]])), np.zeros((1, 2), np.int64)),
    "ones_like": (lambda: ug.ones_like([1.0, 2.0], dtype=ug.float64), np.ones(2)),
    "full_like": (lambda: ug.full_like(np.zeros(3, np.int32), 7), np.full(3, 7, np.int32)),
    "arange": (lambda: ug.arange(5), np.arange(5)),
    "arange_float": (lambda: ug.arange(0.5, 2.0, 0.25), np.arange(0.5, 2.0, 0.25, np.float32)),
    "linspace": (lambda: ug.linspace(-1, 1, 5), np.linspace(-1, 1, 5).astype(np.float32)),
    "eye": (lambda: ug.eye(2, 3, k=1), np.eye(2, 3, 1, dtype=np.float32)),
    "arange_plus": (lambda: ug.arange(3) + ug.ones(3, "int64"), np.arange(1, 4)),
}


@pytest.mark.parametrize("name", sorted(CREATION))
@pytest.mark.parametrize("target", TARGETS)
def test_creation(target, name):
    fn, want = CREATION[name]
    got = run_on(target, ug.function(fn))
    assert got.dtype == want.dtype
    _close(got, want)


# -- random -----------------------------------------------------------------------------------
def _draws():
    return (ug.random.normal((4000,), mean=1.0, std=2.0), ug.random.randint((4000,), -3, 4),
            ug.random.uniform((4000,), low=-2.0, high=-1.0),
            ug.random.randint(5, 2, dtype=ug.int32))


@pytest.mark.parametrize("target", TARGETS)
def test_random_draws_are_the_same_numbers_on_every_target(target):
    ug.manual_seed(7)
    want = run_on("numpy:eager", _draws)
    ug.manual_seed(7)
    got = run_on(target, ug.function(_draws))
    for g, w in zip(got, want, strict=True):
        _close(g, w, rtol=1e-6, atol=1e-6)
    normal, ints, uniform, small = want
    assert abs(normal.mean() - 1.0) < 0.15 and abs(normal.std() - 2.0) < 0.15
    assert set(np.unique(ints)) == set(range(-3, 4))
    assert uniform.min() >= -2.0 and uniform.max() < -1.0
    assert small.dtype == np.int32 and small.shape == (5,) and set(small) <= {0, 1}


# -- indexing ---------------------------------------------------------------------------------
INDEXING = {
    "list": (lambda x: x[[2, 0, 2]], lambda x: x[[2, 0, 2]]),
    "negative_list": (lambda x: x[[-1, 0]], lambda x: x[[-1, 0]]),
    "column_array": (lambda x: x[:, np.array([3, -4])], lambda x: x[:, [3, -4]]),
    "int_then_array": (lambda x: x[1, [0, -1]], lambda x: x[1, [0, -1]]),
    "ellipsis_array": (lambda x: x[..., [1]], lambda x: x[..., [1]]),
    "take_negative": (lambda x: ug.take(x, [-1, -2], axis=1), lambda x: x[:, [-1, -2]]),
    "tensor_index": (lambda x: x[ug.tensor([-3, 1])], lambda x: x[[-3, 1]]),
    "numpy_mask": (lambda x: x[X > 0.5], lambda x: x[X > 0.5]),  # known while tracing
    "row_mask": (lambda x: x[[True, False, True]], lambda x: x[[True, False, True]]),
}


@pytest.mark.parametrize("name", sorted(INDEXING))
@pytest.mark.parametrize("target", TARGETS)
def test_integer_array_indexing(target, name):
    fn, reference = INDEXING[name]
    _close(run_on(target, ug.function(fn), X32), reference(X))


@pytest.mark.parametrize("target", TARGETS)
def test_negative_indices_in_take_from_a_traced_tensor(target):
    fn = ug.function(lambda x, i: ug.take(x, i, axis=0))
    _close(run_on(target, fn, X32, np.array([-1, 0, -3])), X[[-1, 0, -3]])


@pytest.mark.parametrize("target", TARGETS)
def test_boolean_mask(target):
    """Eager: NumPy's selection, with a gradient; static: an error naming ug.where."""
    mask = X > 0
    if _static(target):
        fn = ug.function(lambda x: x[x > 0])
        with pytest.raises(TracingError, match=r"test_tensor_api\.py:\d+.*ug\.where"):
            run_on(target, fn, X32)
        return
    _close(run_on(target, lambda x: ug.tensor(x)[ug.tensor(x) > 0], X32), X[mask])
    grad = ug.grad(lambda x: ug.sum(x[ug.tensor(mask)] * 3.0))
    _close(run_on(target, grad, X), np.where(mask, 3.0, 0.0))


UPDATES = {
    "set_row": (lambda x: x.at[1].set(9.0), lambda x: _numpy_set(x, 1, 9.0)),
    "set_slice": (lambda x: x.at[:, 1::2].set(ug.tensor([1.0, 2.0])),
                  lambda x: _numpy_set(x, (slice(None), slice(1, None, 2)), [1.0, 2.0])),
    "set_repeat": (lambda x: x.at[[0, 0]].set(ug.tensor([[1.0] * 4, [2.0] * 4])),
                   lambda x: _numpy_set(x, 0, 2.0)),
    "add_repeat": (lambda x: x.at[0, [1, 1, 3]].add(1.5), lambda x: _numpy_add(x, (0, [1, 1, 3]),
                                                                                1.5)),
    "set_mask": (lambda x: x.at[X > 1].set(0.0), lambda x: np.where(X > 1, 0.0, x)),
}


def _numpy_set(x, index, value):
    out = x.copy()
    out[index] = value
    return out


def _numpy_add(x, index, value):
    out = x.copy()
    np.add.at(out, index, value)
    return out


@pytest.mark.parametrize("name", sorted(UPDATES))
@pytest.mark.parametrize("target", TARGETS)
def test_functional_update(target, name):
    fn, reference = UPDATES[name]
    x = ug.tensor(X32)
    _close(run_on(target, ug.function(fn), X32), reference(X))
    np.testing.assert_array_equal(x.numpy(), X32)  # the original is unchanged


@pytest.mark.parametrize("target", TARGETS)
def test_update_at_a_traced_row(target):
    """A loop counter writes row i of a buffer (a one_hot mask when traced), with gradients
    to the buffer and the row; a traced boolean mask is refused naming ug.where."""
    def fill(x, v):
        def body(i, buf):
            return i + 1, buf.at[i].set(v * ug.cast(i, "float64")).at[-1].add(v)

        return ug.while_loop(lambda i, buf: i < 2, body, (ug.tensor(np.int64(0)), x))[1]

    v = np.array([1.0, 2.0, 3.0, 4.0])
    want = X.copy()
    want[0], want[1] = 0.0, v
    want[-1] += 2 * v
    _close(run_on(target, ug.function(fill), X, v), want, rtol=1e-12, atol=1e-12)
    grads = run_on(target, ug.grad(lambda x, v: ug.sum(fill(x, v)), argnums=(0, 1)), X, v)
    _close(grads[0], np.array([[0.0] * 4, [0.0] * 4, [1.0] * 4]))
    _close(grads[1], np.full(4, 3.0))
    # A traced int array is ug.scatter (tests/test_scatter.py); a traced float is refused.
    rows = ug.function(lambda x, i: x.at[i].set(0.0))
    _close(run_on(target, rows, X32, np.array([2, 0])), _numpy_set(X, [2, 0], 0.0))
    if _static(target):
        with pytest.raises(TracingError, match=r"test_tensor_api\.py:\d+.*ug\.where"):
            run_on(target, ug.function(lambda x, m: x.at[m > 0].set(0.0)), X32, X32)


# -- tensor methods ---------------------------------------------------------------------------
METHODS = {
    "max": (lambda x: x.max(axis=1), lambda x: x.max(axis=1)),
    "min": (lambda x: x.min(), lambda x: x.min()),
    "argmax": (lambda x: x.argmax(axis=0), lambda x: x.argmax(axis=0)),
    "argmin": (lambda x: x.argmin(), lambda x: x.argmin(axis=-1)),
    "prod": (lambda x: x.prod(axis=0, keepdims=True), lambda x: x.prod(0, keepdims=True)),
    "std": (lambda x: x.std(), lambda x: x.std()),
    "var": (lambda x: x.var(axis=(0, 1)), lambda x: x.var()),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten()),
    "squeeze": (lambda x: x[None].squeeze(), lambda x: x),
    "expand_dims": (lambda x: x.expand_dims(-1), lambda x: x[..., None]),
    "clip": (lambda x: x.clip(max=0.1), lambda x: np.minimum(x, 0.1)),
    "cumsum": (lambda x: x.cumsum(axis=1), lambda x: x.cumsum(axis=1)),
    "len_size_ndim": (lambda x: ug.full((len(x), x.size, x.ndim), 0.0),
                      lambda x: np.zeros((3, 12, 2))),
}


@pytest.mark.parametrize("name", sorted(METHODS))
@pytest.mark.parametrize("target", TARGETS)
def test_tensor_method(target, name):
    method, reference = METHODS[name]
    _close(run_on(target, ug.function(method), X32), reference(X))


@pytest.mark.parametrize("target", TARGETS)
def test_tolist_repr_and_dtype_constants(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor([[1, 2], [3, 4]], dtype=ug.int32)
        assert x.tolist() == [[1, 2], [3, 4]] and x.dtype == "int32" == ug.int32
        assert repr(x).endswith(f"dtype=int32, backend={t.backend}, mode={t.mode})")
        assert x.astype(ug.float16).dtype == "float16"
        assert ug.zeros(2, dtype=ug.bool).dtype == "bool" and repr(ug.bool) == "ug.bool"
        seen = {}

        @ug.function
        def look(y):
            seen["repr"] = repr(y)
            return y

        look(x)
    if _static(target):
        assert "symbolic" in seen["repr"] and "mode=static" in seen["repr"]


# -- docs and promotion -----------------------------------------------------------------------
def test_help_shows_the_op_record():
    from unigraph.ops import OPS

    for name in ("abs", "add", "sum", "sin", "mod", "full", "einsum", "cumsum", "prod"):
        doc = getattr(ug, name).__doc__
        assert OPS[name].doc in doc, name
        assert OPS[name].example.split("  # ")[0] in doc, name


@pytest.mark.parametrize("target", TARGETS)
def test_weak_tensor_promotes_like_a_python_number(target):
    from unigraph.autograph.weak import weak

    def mixed(x):
        k = weak(ug.tensor(np.int64(3)))
        half = weak(ug.tensor(np.float64(0.5)))
        return ug.mul(x, k), ug.add(x, half), ug.maximum(k, k)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        scaled, shifted, both = mixed(ug.tensor(X32))
    assert (scaled.dtype, shifted.dtype, both.dtype) == ("float32", "float32", "int64")
    _close(scaled.numpy(), X * 3)
    _close(shifted.numpy(), X + 0.5)


# -- the op record drives the frontend (issue 13 item 4) ---------------------------------------
INTS = np.array([[1, 4], [9, 16]], dtype=np.int64)
# Promotion by the record's `promote`: float-only records take ints as float64 (NumPy's rule),
# the others keep int64. Expected values and dtypes written out from NumPy in float64.
PROMOTED = {
    "sqrt": (lambda x: ug.sqrt(x), "float64", np.sqrt(INTS.astype(np.float64))),
    "exp": (lambda x: ug.exp(x - 9), "float64", np.exp(INTS - 9.0)),
    "floor": (lambda x: ug.floor(x), "float64", INTS.astype(np.float64)),
    "sin": (lambda x: ug.sin(x), "float64", np.sin(INTS.astype(np.float64))),
    "div": (lambda x: ug.div(x, 2), "float64", INTS / 2.0),
    "pow": (lambda x: ug.pow(x, 2), "float64", INTS ** 2.0),
    "atan2": (lambda x: ug.atan2(x, 3), "float64", np.arctan2(INTS, 3.0)),
    "mean": (lambda x: ug.mean(x, 1), "float64", np.array([2.5, 12.5])),
    "matmul": (lambda x: ug.matmul(x, x), "float64", (INTS @ INTS).astype(np.float64)),
    "sigmoid": (lambda x: ug.sigmoid(x - 4), "float64", 1 / (1 + np.exp(4.0 - INTS))),
    "add": (lambda x: ug.add(x, 2), "int64", INTS + 2),
    "mod": (lambda x: ug.mod(x, 3), "int64", INTS % 3),
    "neg": (lambda x: ug.neg(x), "int64", -INTS),
    "sum": (lambda x: ug.sum(x, 0), "int64", np.array([10, 20])),
    "maximum": (lambda x: ug.maximum(x, 5), "int64", np.maximum(INTS, 5)),
}


@pytest.mark.parametrize("name", sorted(PROMOTED))
@pytest.mark.parametrize("target", TARGETS)
def test_promotion_follows_the_op_record(target, name):
    fn, dtype, want = PROMOTED[name]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(fn)(ug.tensor(INTS))
    assert out.dtype == dtype
    _close(out.numpy(), want, rtol=1e-12, atol=1e-12)


def test_every_record_names_a_known_promotion():
    from unigraph.ops import OPS
    from unigraph.ops.base import PROMOTIONS

    assert all(op.promote in PROMOTIONS for op in OPS.values())
    # Float-only records say so (their wrappers are one line: `sqrt = _unary("sqrt")`).
    assert [OPS[n].promote for n in ("sqrt", "div", "mean", "matmul", "add", "sum")] == [
        "float", "float", "float", "float", "same", "same"]
    with pytest.raises(ValueError, match="promote='wide'"):
        from dataclasses import replace

        replace(OPS["add"], promote="wide")


# No-ops return their input: no node, so no backend has to read axis=() or an empty squeeze.
NO_OPS = {
    "sum_axis_empty": lambda x: ug.sum(x, axis=()),
    "mean_axis_empty": lambda x: ug.mean(x, axis=(), keepdims=True),
    "max_axis_empty": lambda x: ug.max(x, ()),
    "min_axis_empty": lambda x: ug.min(x, ()),
    "prod_axis_empty": lambda x: ug.prod(x, ()),
    "squeeze_nothing": lambda x: ug.squeeze(x),
    "squeeze_empty": lambda x: ug.squeeze(x, ()),
    "reshape_same": lambda x: ug.reshape(x, (3, 4)),
    "reshape_minus_one": lambda x: x.reshape(3, -1),
    "transpose_identity": lambda x: ug.transpose(x, (0, 1)),
    "broadcast_same": lambda x: ug.broadcast_to(x, (3, 4)),
    "full_slice": lambda x: x[:, 0:4],
    "flatten_1d": lambda x: ug.flatten(ug.reshape(x, (12,))),
}


@pytest.mark.parametrize("name", sorted(NO_OPS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_no_op_returns_its_input(target, name):
    fn = NO_OPS[name]
    want = X.reshape(12) if name == "flatten_1d" else X
    _close(run_on(target, ug.function(fn), X32), want)
    if name != "flatten_1d":
        graph = ug.function(lambda x: fn(x) * x).trace(ug.tensor(X32))
        assert [node.op for node in graph.nodes] == ["mul"], graph
    # The gradient passes through unchanged.
    _close(run_on(target, ug.grad(lambda x: ug.sum(fn(x) * 3.0)), X), np.full(X.shape, 3.0),
           rtol=1e-12, atol=1e-12)
    t = Target.parse(target)
    if t.mode == "eager":
        with ug.use_backend(t.backend, t.mode):
            x = ug.tensor(X32)
            assert name == "flatten_1d" or fn(x) is x


def test_a_no_op_on_a_numpy_array_still_gives_a_tensor():
    out = ug.sum(np.ones((2, 2), np.float32), axis=())
    assert isinstance(out, ug.Tensor) and out.dtype == "float32" and out.shape == (2, 2)


def test_records_refuse_the_degenerate_forms_the_frontend_removes():
    """One rule, in the frontend: no node ever has axis=() or squeezes nothing, so no
    backend has to read them (torch and Paddle read an empty axis list as "every axis")."""
    from unigraph.errors import ShapeError
    from unigraph.ops import OPS
    from unigraph.ops.base import TensorSpec

    x = TensorSpec((3, 4), "float32")
    for op in ("sum", "mean", "max", "min", "prod"):
        with pytest.raises(ShapeError, match=rf"{op}: axis \(\) reduces nothing"):
            OPS[op].infer(x, axis=(), keepdims=False)
    with pytest.raises(ShapeError, match="squeeze: no axis to squeeze"):
        OPS["squeeze"].infer(x, axis=())
    with pytest.raises(ShapeError, match="slice: .* has no dims to slice"):
        OPS["slice"].infer(TensorSpec((), "float32"), begin=(), end=(), stride=())


@pytest.mark.parametrize("target", TARGETS)
def test_logsumexp_over_nothing_is_minus_infinity(target):
    """NumPy's log(sum(exp([]))) and ONNX's ReduceLogSumExp over an empty axis: -inf (the
    max-shifted form has no max to take)."""
    x = np.zeros((2, 0), np.float32)
    got = run_on(target, ug.function(lambda x: ug.logsumexp(x, axis=1)), x)
    np.testing.assert_array_equal(got, [-np.inf, -np.inf])
    kept = run_on(target, ug.function(lambda x: ug.logsumexp(x, axis=1, keepdims=True)), x)
    assert kept.shape == (2, 1)
