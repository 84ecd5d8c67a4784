"""`ug.stop_gradient(x)` / `x.detach()` on all 9 targets: the value passes unchanged and no
gradient flows back through it, at the top level, inside `ug.cond` branches and inside a
`ug.while_loop` body. Expected values are worked out by hand (the samples in the op record
cover the plain op; these cover the places where a framework builds its own backward)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([0.5, -1.25, 2.0])


def _grad(loss):
    return ug.function(lambda *xs: ug.value_and_grad(loss)(*xs))


def _check(target, loss, args, value, gradient):
    got_value, got_gradient = run_on(target, _grad(loss), *args)
    np.testing.assert_allclose(got_value, value, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_gradient, gradient, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_only_the_gradient_stops(target):
    # sum(x * stop(x)): the value is sum(x^2), the gradient x (not 2x)
    _check(target, lambda x: ug.sum(x * ug.stop_gradient(x)), (X,), np.sum(X * X), X)


@pytest.mark.parametrize("target", TARGETS)
def test_a_stopped_value_alone_has_gradient_zero(target):
    _check(target, lambda x: ug.sum(ug.stop_gradient(x) * 3.0), (X,), 3 * np.sum(X),
           np.zeros(3))


@pytest.mark.parametrize("target", TARGETS)
def test_the_detach_method_is_stop_gradient(target):
    # A straight-through estimator: the forward rounds, the backward is the identity.
    def loss(x):
        return ug.sum((x + (ug.round(x) - x).detach()) * np.array([1.0, 2.0, 3.0]))

    _check(target, loss, (X,), 0.0 * 1 + -1.0 * 2 + 2.0 * 3, np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("taken", [True, False])
def test_inside_cond_branches(target, taken):
    def loss(x, p):
        y = ug.cond(p, lambda: x * ug.stop_gradient(x), lambda: ug.stop_gradient(x) * 2.0)
        return ug.sum(y)

    value, gradient = (np.sum(X * X), X) if taken else (2 * np.sum(X), np.zeros(3))
    _check(target, loss, (X, np.array(taken)), value, gradient)


@pytest.mark.parametrize("target", TARGETS)
def test_inside_a_while_loop_body(target):
    # v += x * stop(x), three times from 0: the value is 3 x^2, the gradient 3 x.
    def loss(x):
        _, v = ug.while_loop(lambda k, v: k < 3,
                             lambda k, v: (k + 1, v + x * ug.stop_gradient(x)),
                             (ug.tensor(0), ug.zeros_like(x)))
        return ug.sum(v)

    _check(target, loss, (X,), 3 * np.sum(X * X), 3 * X)


@pytest.mark.parametrize("target", TARGETS)
def test_a_stopped_loop_carry_has_gradient_zero(target):
    # v = stop(v * x) each step: the value is x^3 (from v = 1), no gradient reaches x.
    def loss(x):
        _, v = ug.while_loop(lambda k, v: k < 3,
                             lambda k, v: (k + 1, ug.stop_gradient(v * x)),
                             (ug.tensor(0), ug.ones_like(x)))
        return ug.sum(v)

    _check(target, loss, (X,), np.sum(X ** 3), np.zeros(3))


@pytest.mark.parametrize("target", TARGETS)
def test_a_detached_parameter_keeps_its_value_after_a_step(target):
    """The detached value is not a view that the optimizer's in-place update writes through."""
    t = ug.config.Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        w = ug.Parameter(np.array([1.0, 2.0]))
        opt = ug.optim.SGD([w], lr=0.5)
        frozen = ug.function(lambda: w.detach())()
        stopped = ug.function(lambda: ug.stop_gradient(w) * 1.0)()
        _, grads = ug.value_and_grad(lambda: ug.sum(w * w), wrt=[w])()
        opt.step(grads)  # w - 0.5 * 2w = 0
        np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
        np.testing.assert_array_equal(frozen.numpy(), [1.0, 2.0])
        np.testing.assert_array_equal(stopped.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "int8", "uint8", "int16", "int32", "int64", "bool"])
def test_every_dtype_passes_unchanged(target, dtype):
    # A computed value (not the feed itself): paddle:static had no int16 kernel for its detach.
    x = np.array([1, 0, 3]).astype(dtype)
    if dtype == "bool":
        fn, want = ug.function(lambda x: ug.stop_gradient(~x)), ~x
    else:
        fn, want = ug.function(lambda x: ug.stop_gradient(x + x)), x + x
    got = run_on(target, fn, x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
