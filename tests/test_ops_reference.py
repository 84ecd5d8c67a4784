"""The op records checked against themselves: infer vs reference, VJP vs finite differences,
completeness against the documented op list, and the wording of shape errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import floats_as, op_samples, op_seed

import unigraph.ops
from unigraph.errors import ShapeError
from unigraph.ops import OPS, TensorSpec

FLOATS = ("float16", "float32", "float64")
FAMILIES = ("elementwise", "math", "linalg", "reduction", "shape", "indexing", "scatter",
            "creation", "nn", "printing")
MAX_PROBES = 30  # finite-difference positions per input: keeps the long reduction fast


CASES = op_samples()
# Ops without a gradient rule (comparisons, argmax, one_hot, ...) have no VJP to test.
GRAD_CASES = [case for case in CASES if case.values[0].vjp is not None]
# At a tie the rule picks or NaN the record declares (`Sample.at_kink`) is a convention, not a
# limit: the consistency suite checks it against the VJP on every target, finite differences
# cannot.
SMOOTH_GRAD_CASES = [case for case in GRAD_CASES if not case.values[1].at_kink]


def _is_float(array) -> bool:
    return np.asarray(array).dtype.name in FLOATS


def _spec(array) -> TensorSpec:
    return TensorSpec(tuple(array.shape), array.dtype.name)


def _differentiable(op, inputs) -> list:
    if op.differentiable_inputs is not None:
        return [i in op.differentiable_inputs and _is_float(x) for i, x in enumerate(inputs)]
    return [_is_float(x) for x in inputs]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("op, sample", CASES)
def test_reference_matches_infer(op, sample, dtype):
    inputs = floats_as(dtype, sample.inputs)
    spec = op.infer(*map(_spec, inputs), **sample.attrs)
    with np.errstate(all="ignore"):  # float16 may overflow; only the type matters here
        out = op.reference(*inputs, **sample.attrs)
    assert isinstance(out, np.ndarray)
    # (None: a size the rule cannot know, read from an input's values: reshape's sizes)
    rule_shape = tuple(got if want is None else want for want, got in zip(spec.shape,
                                                                          out.shape))
    assert len(spec.shape) == out.ndim
    assert (out.shape, out.dtype.name) == (rule_shape, spec.dtype)


@pytest.mark.parametrize("op, sample", GRAD_CASES)
def test_vjp_types(op, sample):
    """Each gradient has its input's shape and dtype (float32 stays float32), or is None
    exactly for the inputs without a gradient."""
    inputs = floats_as("float32", sample.inputs)
    out = op.reference(*inputs, **sample.attrs)
    g = np.ones_like(out, dtype=out.dtype if _is_float(out) else "float32")
    grads = op.vjp(g, inputs, out, **sample.attrs)
    assert len(grads) == len(inputs)
    for x, grad, wanted in zip(inputs, grads, _differentiable(op, inputs), strict=True):
        if not wanted:
            assert grad is None
        else:
            assert isinstance(grad, np.ndarray)
            assert (grad.shape, grad.dtype) == (x.shape, x.dtype)


@pytest.mark.parametrize("op, sample", SMOOTH_GRAD_CASES)
def test_vjp_matches_finite_differences(op, sample):
    rng = np.random.default_rng(op_seed(op.name) + 1)
    inputs, attrs = sample.inputs, sample.attrs
    out = op.reference(*inputs, **attrs)
    g = rng.standard_normal(out.shape)
    grads = op.vjp(g.astype(out.dtype) if _is_float(out) else g, inputs, out, **attrs)
    # A float64 output allows a tiny step; a narrower one (cast to float32) rounds each
    # evaluation, so it needs a bigger step and a looser comparison.
    eps, rtol = (1e-6, 1e-5) if out.dtype != np.float32 else (1e-3, 1e-3)
    for k, wanted in enumerate(_differentiable(op, inputs)):
        if not wanted:
            continue
        x = inputs[k]
        probes = rng.choice(x.size, size=min(x.size, MAX_PROBES), replace=False)
        scale = max(1.0, float(np.max(np.abs(grads[k]), initial=0.0)))
        for position in probes:
            shifted = []
            for sign in (1, -1):
                moved = x.copy()
                moved.flat[position] += sign * eps
                args = inputs[:k] + (moved,) + inputs[k + 1:]
                shifted.append(op.reference(*args, **attrs).astype(np.float64))
            numeric = np.sum(g * (shifted[0] - shifted[1])) / (2 * eps)
            analytic = grads[k].flat[position]
            where = f"input {k}, flat position {position}"
            assert abs(numeric - analytic) <= rtol * scale, (where, numeric, analytic)


def _documented_op_names() -> list:
    """Op names from the signature table in unigraph/ops/__init__.py: the identifiers that
    start a segment (a line, or text after a top-level ';') right before a '('."""
    section = unigraph.ops.__doc__.split("Signatures", 1)[1].split(":\n", 1)[1]
    names, depth = [], 0
    for line in section.splitlines():
        segment = "" if depth == 0 else None
        for char in line:
            if char == "(":
                if depth == 0 and segment is not None:
                    words = segment.split()
                    names.extend(w for w in words if w not in FAMILIES)
                    segment = None
                depth += 1
            elif char == ")":
                depth -= 1
            elif depth == 0 and char == ";":
                segment = ""
            elif depth == 0 and segment is not None:
                segment += char
    return names


def test_every_documented_op_has_a_complete_record():
    names = _documented_op_names()
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names), names
    assert len(names) >= 45, names  # guards against the parser silently finding nothing
    assert sorted(set(names)) == sorted(OPS), set(names) ^ set(OPS)
    for name, op in OPS.items():
        assert op.name == name
        assert op.doc.strip(), name
        # One call of the public function and its result; test_consistency runs it.
        assert re.fullmatch(rf"ug\.{name}\(.*\)  # \S.*", op.example), (name, op.example)
        samples = op.samples(np.random.default_rng(0))
        assert 2 <= len(samples) <= 4, name
        sample = samples[0]
        spec = op.infer(*map(_spec, sample.inputs), **sample.attrs)
        has_inputs = any(_differentiable(op, sample.inputs))
        if spec.dtype in FLOATS and has_inputs:
            assert op.vjp is not None, f"{name} has a floating output but no vjp"


def _f32(*shape):
    return TensorSpec(shape, "float32")


BAD_INPUTS = [
    ("matmul", (_f32(2, 3), _f32(4, 5)), {}, ["float32[2, 3]", "float32[4, 5]", "inner"]),
    ("exp", (TensorSpec((3,), "int64"),), {}, ["int64[3]", "cast"]),
    ("reshape", (_f32(2, 3),), {"shape": (4, 2)}, ["float32[2, 3]", "[4, 2]"]),
    (
        "conv2d",
        (_f32(1, 3, 5, 5), _f32(4, 2, 3, 3)),
        {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1},
        ["float32[1, 3, 5, 5]", "float32[4, 2, 3, 3]", "channels"],
    ),
    ("take", (_f32(5, 3), _f32(4)), {"axis": 0}, ["float32[4]", "int64"]),
    ("add", (_f32(2, 3), _f32(4)), {}, ["float32[2, 3]", "float32[4]", "broadcast"]),
    ("add", (_f32(2), TensorSpec((2,), "float64")), {}, ["float64[2]", "cast"]),
    ("where", (_f32(2), _f32(2), _f32(2)), {}, ["cond", "bool"]),
    ("logical_and", (_f32(2), _f32(2)), {}, ["float32[2]", "bool"]),
    (
        "max_pool2d",
        (_f32(1, 1, 2, 2),),
        {"kernel": (3, 3), "stride": (1, 1), "padding": (0, 0)},
        ["float32[1, 1, 2, 2]", "window"],
    ),
    ("concat", (_f32(2, 3), _f32(2, 4)), {"axis": 0}, ["float32[2, 3]", "float32[2, 4]"]),
    ("sum", (_f32(2, 3),), {"axis": (2,), "keepdims": False}, ["float32[2, 3]", "axis"]),
    (
        "sparse_softmax_cross_entropy",
        (_f32(4, 3), TensorSpec((5,), "int64")),
        {},
        ["float32[4, 3]", "int64[5]"],
    ),
]


@pytest.mark.parametrize(
    "name, specs, attrs, fragments",
    BAD_INPUTS,
    ids=[f"{bad[0]}-{i}" for i, bad in enumerate(BAD_INPUTS)],
)
def test_infer_errors_name_the_op_and_the_types(name, specs, attrs, fragments):
    with pytest.raises(ShapeError) as info:
        OPS[name].infer(*specs, **attrs)
    message = str(info.value)
    assert message.startswith(f"{name}:"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_infer_treats_unknown_dims_as_compatible():
    assert OPS["add"].infer(_f32(None, 3), _f32(2, 1)).shape == (2, 3)
    assert OPS["add"].infer(_f32(None, 3), _f32(1, 3)).shape == (None, 3)
    matmul = OPS["matmul"].infer(_f32(None, 2, 3), _f32(None, 4))
    assert matmul.shape == (None, 2, 4)
    conv = OPS["conv2d"].infer(
        _f32(None, 3, None, 8), _f32(4, 3, 3, 3),
        stride=(1, 2), padding=(1, 1), dilation=(1, 1), groups=1,
    )
    assert conv.shape == (None, 4, None, 4)
    assert OPS["concat"].infer(_f32(None, 2), _f32(3, 2), axis=0).shape == (None, 2)


def _grads(name, *inputs, **attrs):
    op = OPS[name]
    out = op.reference(*inputs, **attrs)
    return op.vjp(np.ones_like(out), inputs, out, **attrs)


def test_tie_and_kink_conventions():
    """The rules of the records' docstrings, on hand-computed values (tests/
    test_fidelity_numerics.py checks the same rules on every target)."""
    x = np.array([[1.0, 3.0, 3.0], [0.0, -1.0, 0.0]])
    assert _grads("max", x, axis=(1,), keepdims=False)[0].tolist() == [[0, .5, .5], [.5, 0, .5]]
    assert _grads("min", x, axis=None, keepdims=False)[0].tolist() == [[0, 0, 0], [0, 1, 0]]
    three = np.array([[2.0, 2.0], [2.0, 1.0]])
    np.testing.assert_allclose(_grads("max", three, axis=None, keepdims=True)[0],
                               [[1 / 3, 1 / 3], [1 / 3, 0]], rtol=0, atol=1e-16)
    y = np.array([1.0, 0.0, 5.0])
    dx, dy = _grads("maximum", np.array([1.0, 2.0, 3.0]), y)
    assert dx.tolist() == [.5, 1, 0] and dy.tolist() == [.5, 0, 1]
    dx, dy = _grads("minimum", np.array([1.0, 2.0, 3.0]), y)
    assert dx.tolist() == [.5, 0, 1] and dy.tolist() == [.5, 1, 0]
    dx, dy = _grads("maximum", np.array([[2.0, 2.0, 1.0]]), np.array([[2.0]]))
    assert dx.tolist() == [[.5, .5, 0]] and dy.tolist() == [[2.0]]  # y broadcast three times
    assert _grads("relu", np.array([-1.0, 0.0, 2.0]))[0].tolist() == [0, 0, 1]
    assert _grads("abs", np.array([-1.0, 0.0, 2.0]))[0].tolist() == [-1, 0, 1]
    plateau = np.ones((1, 1, 2, 2))
    pooled = _grads("max_pool2d", plateau, kernel=(2, 2), stride=(1, 1), padding=(0, 0))
    assert pooled[0].reshape(-1).tolist() == [1, 0, 0, 0]
    argmax = OPS["argmax"].reference(np.array([[1.0, 3.0, 3.0]]), axis=1, keepdims=False)
    assert argmax.tolist() == [1]


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))  # NaN == NaN here


def test_nan_propagates():
    nan = np.nan
    relu = OPS["relu"].reference(np.array([nan, -np.inf, 0.0, 2.0]))
    _same(relu, [nan, 0, 0, 2])
    _same(_grads("relu", np.array([nan, -np.inf, 0.0, 2.0]))[0], [0, 0, 0, 1])
    x = np.array([[1.0, nan, 3.0], [2.0, 0.0, 2.0]])
    _same(OPS["max"].reference(x, axis=(1,), keepdims=False), [nan, 2])
    _same(_grads("max", x, axis=(1,), keepdims=False)[0], [[nan, nan, nan], [.5, 0, .5]])
    _same(_grads("min", x, axis=(1,), keepdims=False)[0], [[nan, nan, nan], [0, 1, 0]])
    a, b = np.array([nan, 1.0, nan, 4.0]), np.array([1.0, nan, nan, 0.0])
    _same(OPS["maximum"].reference(a, b), [nan, nan, nan, 4])
    _same(_grads("maximum", a, b), [[nan, nan, nan, 1], [nan, nan, nan, 0]])
    _same(_grads("minimum", a, b), [[nan, nan, nan, 0], [nan, nan, nan, 1]])
    # The first NaN of the window wins, even after a +inf.
    window = np.array([[[[np.inf, nan], [nan, 2.0]]]])
    attrs = {"kernel": (2, 2), "stride": (1, 1), "padding": (0, 0)}
    _same(OPS["max_pool2d"].reference(window, **attrs), [[[[nan]]]])
    _same(_grads("max_pool2d", window, **attrs)[0], [[[[0, 1], [0, 0]]]])


def test_softmax_family_does_not_saturate_and_nans_whole_rows():
    rows = np.array([[1000.0, 0.0], [np.inf, 1.0], [-np.inf, 0.0]])
    nan = np.nan
    _same(OPS["log_softmax"].reference(rows, axis=1), [[0, -1000], [nan, nan], [-np.inf, 0]])
    _same(OPS["softmax"].reference(rows, axis=1), [[1, 0], [nan, nan], [0, 1]])
    loss = OPS["sparse_softmax_cross_entropy"].reference(rows[:1], np.array([1]))
    _same(loss, [1000])


def test_reference_dtype_rules():
    ints = np.array([2**30, 2**30], dtype=np.int32)
    assert OPS["sum"].reference(ints, axis=None, keepdims=False).dtype == np.int32
    half = np.ones((4, 4), dtype=np.float16)
    assert OPS["matmul"].reference(half, half).dtype == np.float16
    padded = OPS["avg_pool2d"].reference(
        np.ones((1, 1, 2, 2)), kernel=(3, 3), stride=(1, 1), padding=(1, 1)
    )
    assert np.allclose(padded, 4 / 9)  # padded zeros count in the divisor
    hot = OPS["one_hot"].reference(np.array([1, 5, -1]), depth=3, dtype="float32")
    assert hot.tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 0]]
    with pytest.raises(IndexError):
        OPS["take"].reference(np.ones(3), np.array([-1]), axis=0)
