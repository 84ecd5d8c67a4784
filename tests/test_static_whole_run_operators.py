"""numpy:static from a step's second run (generated code): a gradient's elementwise ops
with a result of one dim or more are written as Python operators (`grad_codegen`), and
the parameters a run updates are stored frozen without a call (`executable._whole_run`).
Every target runs each case three times: the runs agree bit for bit with each other (on
numpy:static: the step walk with the generated code) and with gradients derived by hand
in float64; the updated parameters stay read-only."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

X = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]], np.float32)
W = np.array([[1.5, -0.5, 0.25], [-2.0, 0.75, 1.0]], np.float32)
B = np.array([0.5, -0.25, 2.0], np.float32)


@ug.function
def operators(x, w, b):
    """sub, div, mul and a broadcast add of results with dims; a comparison (a bool
    result with dims) picks with where."""
    def loss(x, w, b):
        h = (x - w) / (w * w + 1.0) + b
        return ug.sum(ug.where(h > 0.0, h * h, h))
    return ug.value_and_grad(loss, argnums=(0, 1, 2))(x, w, b)


def _operators_by_hand(x, w, b):
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    d = w * w + 1.0
    h = (x - w) / d + b
    dh = np.where(h > 0, 2 * h, 1.0)
    dx = dh / d
    dw = -dh / d - dh * (x - w) * 2 * w / d**2
    return [np.sum(np.where(h > 0, h * h, h)), dx, dw, dh.sum(axis=0)]


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_operators_with_dims_agree_with_the_walk_and_by_hand(target):
    runs = [run_on(target, lambda: _flat(operators(X, W, B))) for _ in range(3)]
    for later in runs[1:]:
        for one, other in zip(runs[0], later):
            assert one.dtype == other.dtype
            np.testing.assert_array_equal(one, other)
    for got, want in zip(runs[-1], _operators_by_hand(X, W, B)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _flat(result):
    value, grads = result
    return [value, *grads]


@pytest.mark.parametrize("target", TARGETS)
def test_parameters_updated_by_repeated_steps_stay_read_only(target):
    net = ug.nn.Linear(3, 2)
    net.load_state_dict({"weight": W.T.copy(), "bias": np.zeros(2, np.float32)})
    optimizer = ug.optim.SGD(net, lr=0.5)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(net(x)), wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        for _ in range(3):  # the third runs the whole generated run on numpy:static
            step(X)
    if target == "numpy:static":  # the engine's own arrays, which views of them share
        for param in (net.weight, net.bias):
            store, index = param._home
            assert not store.params[index].flags.writeable
    for param in (net.weight, net.bias):
        array = param.numpy()
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 7.0
    # d/dW of the sum over 2 rows: the column sums of X, for each output; d/db: 2
    want = W.T.astype(np.float64) - 3 * 0.5 * X.astype(np.float64).sum(axis=0)[:, None]
    np.testing.assert_allclose(net.weight.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(net.bias.numpy(), [-3.0, -3.0], rtol=1e-6)
