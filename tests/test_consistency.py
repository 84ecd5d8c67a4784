"""The one consistency suite: every op record x its sample inputs x float32/float64 x every
target, against the float64 NumPy reference, within the op's declared tolerance; and the
gradient of every differentiable op on every target against the record's VJP rule.

Skips are declared in the op record (`OpDef.skips`), never here.
"""

import numpy as np
import pytest
from conftest import TARGETS, floats_as

import unigraph as ug
from unigraph.config import Target
from unigraph.dispatch import apply
from unigraph.ops import OPS

CASES = [(name, i) for name, op in sorted(OPS.items()) for i in range(len(op.samples(
    np.random.default_rng(0))))]


def _sample(name, index):
    return OPS[name].samples(np.random.default_rng(0))[index]


def _declared_skip(op, target):
    reason = op.skips.get(target) or op.skips.get(target.split(":")[0])
    if reason:
        pytest.skip(f"declared in the op record: {reason}")


def _op_function(name, attrs):
    return ug.function(lambda *xs: apply(name, list(xs), attrs), name=name)


def _compare(got, want, rtol, atol, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype == np.bool_ or want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
@pytest.mark.parametrize("target", TARGETS)
def test_forward_matches_reference(target, name, index, dtype):
    op = OPS[name]
    _declared_skip(op, target)
    sample = _sample(name, index)
    inputs = list(floats_as(dtype, sample.inputs))
    want = op.reference(*sample.inputs, **sample.attrs)
    fn = _op_function(name, sample.attrs)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = fn(*inputs)
        got_array = np.asarray(got.numpy())
    expected_dtype = op.reference(*inputs, **sample.attrs).dtype
    assert got.dtype == expected_dtype.name
    assert got_array.dtype == expected_dtype, f"{target} returned {got_array.dtype}"
    rtol, atol = op.tolerance_for(dtype)
    _compare(got_array, want, rtol, atol, f"{name} sample {index} on {target} in {dtype}")


def _differentiable(op, inputs):
    chosen = op.differentiable_inputs
    return [i for i, x in enumerate(inputs)
            if x.dtype.kind == "f" and (chosen is None or i in chosen)]


def _has_gradient(name, index):
    """Gradients flow from floating outputs into floating inputs only."""
    op, sample = OPS[name], _sample(name, index)
    floating_output = op.reference(*sample.inputs, **sample.attrs).dtype.kind == "f"
    return op.vjp is not None and floating_output and _differentiable(op, sample.inputs)


GRAD_CASES = [(n, i) for n, i in CASES if _has_gradient(n, i)]


@pytest.mark.parametrize("name,index", GRAD_CASES, ids=[f"{n}-{i}" for n, i in GRAD_CASES])
@pytest.mark.parametrize("target", TARGETS)
def test_gradient_matches_vjp_rule(target, name, index):
    """d/dx sum(op(x) * w) on the target == the record's VJP of w, in float64."""
    op = OPS[name]
    _declared_skip(op, target)
    sample = _sample(name, index)
    inputs = list(sample.inputs)
    positions = _differentiable(op, inputs)
    output = op.reference(*inputs, **sample.attrs)
    weight = np.random.default_rng(1).normal(size=output.shape).astype(output.dtype)
    want = op.vjp(weight, inputs, output, **sample.attrs)

    def loss(*xs):
        return ug.sum(apply(name, list(xs), sample.attrs) * weight)

    gradient = ug.grad(loss, argnums=tuple(positions))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = gradient(*inputs)
        got = [np.asarray(g.numpy()) for g in got]
    for position, g in zip(positions, got):
        _compare(g, want[position], 1e-7, 1e-9, f"grad of input {position} on {target}")


def _example(name):
    """The record's example, split into the call and its expected result."""
    call, result = OPS[name].example.split("  # ")
    names = {"nan": np.nan, "inf": np.inf}
    return call, np.array(eval(result, names))  # noqa: S307 (our own record's text)


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("target", TARGETS)
def test_example_holds(target, name):
    """The example each record gives for the docs is true on every target (eager: op by op;
    static: traced into a graph whose inputs are constants)."""
    call, want = _example(name)
    names = {"ug": ug, "nan": np.nan, "inf": np.inf}
    fn = ug.function(lambda: eval(call, names), name=name, autograph=False)  # noqa: S307
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = fn()  # (ug.topk: a pair, (values, indices))
        got = np.asarray([o.numpy() for o in out] if isinstance(out, tuple) else out.numpy())
    assert got.shape == want.shape, f"{name} on {target}: {got} (expected {want})"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{OPS[name].example} on {target}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{OPS[name].example} on {target}")
