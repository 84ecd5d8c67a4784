"""A `grad` node as one generated function (`unigraph/reference/grad_codegen.py`, issue 19
item 4): numpy:static runs a gradient's steps on its first run and generated code from the
second on. Every target runs each case three times; the runs agree bit for bit with each
other (on numpy:static: the step walk with the generated code) and with gradients derived
by hand in float64. The mechanism (which functions get generated code) is checked on plans
built from traced graphs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.reference import Plan
from unigraph.reference.grad_codegen import generate
from unigraph.reference.plan import GradStep

X = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]], np.float32)
W = np.array([[1.5, -0.5, 0.25], [-2.0, 0.75, 1.0]], np.float32)


@ug.function
def squares(x, w):
    """x appears twice in one op, w in two ops; a mean (attrs) and a sum of two paths."""
    return ug.grad(lambda x, w: ug.sum(x * x * w) + ug.mean(w) * 3.0, argnums=(0, 1))(x, w)


def _squares_by_hand(x, w):
    x, w = x.astype(np.float64), w.astype(np.float64)
    return [2 * x * w, x * x + 3.0 / w.size]


@ug.function
def unused_and_int(x, w, k):
    """w does not reach the output (its gradient is zeros), k is an int operand that is
    cast and used (no gradient), relu's VJP and a matmul with one side differentiated."""
    def loss(x, w, k):
        h = ug.relu(ug.matmul(x, ug.transpose(x, (1, 0))))
        return ug.sum(h * ug.cast(k, "float32"))
    value, (dx, dw) = ug.value_and_grad(loss, argnums=(0, 1))(x, w, k)
    return value, dx, dw


def _unused_and_int_by_hand(x, w, k):
    x = x.astype(np.float64)
    gram = x @ x.T
    loss = np.sum(np.maximum(gram, 0) * k)
    d = (gram > 0) * float(k)
    return [loss, (d + d.T) @ x, np.zeros_like(w)]


def _run_thrice(target, fn, *args):
    runs = [run_on(target, fn, *args) for _ in range(3)]
    for later in runs[1:]:
        for one, other in zip(runs[0], later):
            assert one.dtype == other.dtype
            np.testing.assert_array_equal(one, other)
    return runs[-1]


@pytest.mark.parametrize("target", TARGETS)
def test_a_repeated_operand_and_two_paths(target):
    got = _run_thrice(target, squares, X, W)
    for one, want in zip(got, _squares_by_hand(X, W)):
        np.testing.assert_allclose(one, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_an_unused_operand_an_int_operand_and_relu(target):
    k = np.int64(3)
    got = _run_thrice(target, unused_and_int, X, W, k)
    want = _unused_and_int_by_hand(X, W, k)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])


def _grad_steps(fn, *args):
    plan = Plan(fn.trace(*args))
    return [step for step in plan.steps if type(step) is GradStep]


def test_generated_code_equals_the_step_walk_bit_for_bit():
    (step,) = _grad_steps(unused_and_int, X, W, np.int64(3))
    operands = [X, W, np.asarray(np.int64(3))]
    walked = step.run(operands)  # first run: the walk
    assert step.generated is None
    generated = generate(step)
    assert generated is not None
    for one, other in zip(walked, generated(operands)):
        assert type(one) is type(other) and one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
        np.testing.assert_array_equal(np.signbit(one), np.signbit(other))
    step.run(operands)
    assert step.generated is not None  # the second run made and ran it


def test_a_gradient_through_control_flow_keeps_the_walk():
    @ug.function
    def branchy(x):
        return ug.grad(lambda x: ug.sum(ug.cond(ug.sum(x) > 0, lambda: x * 2.0,
                                                lambda: x * x)))(x)

    (step,) = _grad_steps(branchy, X)
    assert generate(step) is None
    for _ in range(3):
        got = step.run([X])[-1]  # the function's output, then the gradient
        np.testing.assert_array_equal(got, np.full_like(X, 2.0))  # sum(X) > 0


def test_the_float64_reference_keeps_the_walk():
    from unigraph.reference import float64

    plan = Plan(float64.promote(squares.trace(X, W)), fast=False)
    (step,) = [s for s in plan.steps if type(s) is GradStep]
    operands = [X.astype(np.float64), W.astype(np.float64)]
    for _ in range(3):
        got = step.run(operands)
    assert step.generated is None  # the definitions run as the records say, step by step
    for one, want in zip(got[1:], _squares_by_hand(X, W)):  # after the output
        np.testing.assert_allclose(one, want, rtol=1e-12)
