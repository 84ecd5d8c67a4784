"""numpy:static's generated code calls an op step's kernel (and a gradient's VJP rule) with
its attrs as keyword arguments (`codegen.keyword_call`), not through the
`functools.partial` that binds them: the same function, arguments and objects, ~150 ns a
call less. Every target runs a step whose forward and gradient hold ops with attrs three
times: the runs agree bit for bit with each other (on numpy:static: the step walk, then
the generated code) and with the results derived by hand in float64."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.reference import Plan
from unigraph.reference.codegen import keyword_call
from unigraph.reference.grad_codegen import generate
from unigraph.reference.plan import GradStep

X = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]], np.float32)
W = np.array([[1.5, -0.5, 0.25], [-2.0, 0.75, 1.0]], np.float32)


@ug.function
def with_attrs(x, w):
    """mean over an axis (kept), sum over an axis, transpose and reshape, inside the
    gradient and outside it."""
    def loss(x, w):
        h = ug.reshape(ug.transpose(x * w, (1, 0)), (2, 3))
        return ug.sum(ug.mean(h * h, axis=1, keepdims=True)) + ug.sum(ug.sum(w, axis=0))
    value, (dx, dw) = ug.value_and_grad(loss, argnums=(0, 1))(x, w)
    return value, dx, dw, ug.mean(x, axis=0, keepdims=False)


def _with_attrs_by_hand(x, w):
    x, w = x.astype(np.float64), w.astype(np.float64)
    p = x * w
    h = p.T.reshape(2, 3)
    loss = np.sum(np.mean(h * h, axis=1)) + np.sum(w)
    dp = (2 * h / 3).reshape(3, 2).T
    return [loss, dp * w, dp * x + 1.0, x.mean(axis=0)]


@pytest.mark.parametrize("target", TARGETS)
def test_ops_with_attrs_agree_with_the_walk_and_by_hand(target):
    runs = [run_on(target, with_attrs, X, W) for _ in range(3)]
    for later in runs[1:]:
        for one, other in zip(runs[0], later):
            assert one.dtype == other.dtype
            np.testing.assert_array_equal(one, other)
    for got, want in zip(runs[-1], _with_attrs_by_hand(X, W)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _binder(scope):
    def bind(value, stem):
        name = f"{stem}{len(scope)}"
        scope[name] = value
        return name
    return bind


def test_a_partial_of_keywords_is_called_with_them():
    scope: dict = {}
    rule = functools.partial(np.sum, axis=1, keepdims=True)
    code = keyword_call(rule, "x", _binder(scope))
    assert code == "f2(x, axis=a0, keepdims=a1)"
    assert scope == {"a0": 1, "a1": True, "f2": np.sum}
    assert keyword_call(functools.partial(np.zeros, shape=(2,)), "", _binder(scope)) == \
        "f4(shape=a3)"


def test_other_callables_are_called_as_they_are():
    scope: dict = {}
    positional = functools.partial(np.add, 1)
    not_a_name = functools.partial(dict, **{"from": 1})
    for fn in (np.matmul, positional, not_a_name):
        name = keyword_call(fn, "x", _binder(scope)).split("(")[0]
        assert scope[name] is fn


def test_the_generated_gradient_binds_no_partial():
    plan = Plan(with_attrs.trace(X, W))
    (step,) = [s for s in plan.steps if type(s) is GradStep]
    operands = [X, W]
    walked = step.run(operands)  # first run: the walk
    run = generate(step)
    assert not [v for v in run.__globals__.values() if type(v) is functools.partial]
    for one, other in zip(walked, run(operands)):
        assert type(one) is type(other) and one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
