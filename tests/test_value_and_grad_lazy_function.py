"""An eager training step makes a new `ug.value_and_grad` every step: the Function it returns
sets up `Function`'s machinery (update_wrapper, caches) only when something asks for it, so
the eager call runs none of it; everything a Function has still works, on every target."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.function import Function

W0 = np.array([0.5, -1.0, 2.0], np.float32)
X = np.array([1.0, 2.0, -3.0], np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_an_eager_step_sets_up_no_function_machinery(target, monkeypatch):
    w = ug.Parameter(W0.copy())
    opt = ug.optim.SGD([w], lr=0.25)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(w * w * x), wrt=[w])()
        opt.apply(grads)
        return loss

    run_on(target, step, X)  # a static target traces and compiles here
    made = []
    original = Function.__init__

    def counting(self, *args, **kwargs):
        made.append(type(self).__name__)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Function, "__init__", counting)
    loss = run_on(target, step, X)
    w1 = W0 - 0.25 * 2 * W0 * X  # the first step, by hand
    np.testing.assert_allclose(loss, np.sum(w1 * w1 * X), rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), w1 - 0.25 * 2 * w1 * X, rtol=1e-6)
    # eagerly the step's Function and its gradient function are already made or never
    # need the machinery; a static target replays its compiled graph
    assert made == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_function_still_has_what_a_function_has(target):
    grad = ug.grad(lambda x: ug.sum(x * x * x))
    assert grad.__name__ == "grad(<lambda>)" and grad.name == "grad(<lambda>)"
    assert grad.__wrapped__.__name__ == "grad(<lambda>)"
    assert not hasattr(grad, "no_such_attribute")
    got = run_on(target, grad, X)  # an eager target calls it directly, a static one traces
    np.testing.assert_allclose(got, 3 * X * X, rtol=1e-6)
    inside = run_on(target, ug.function(lambda x: grad(x) + 1.0), X)  # within a function
    np.testing.assert_allclose(inside, 3 * X * X + 1.0, rtol=1e-6)
