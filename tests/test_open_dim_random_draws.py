"""`ug.random` draws and Dropout of a shape with a dim that input_spec leaves open, on all 9
targets (and onnxruntime:static, forward): every static target refused them while tracing
(a ShapeError naming `random.known_shape`'s fix, a size in input_spec), where every eager
target ran them. A static run now draws with the run's sizes (found by tracing again with
the arguments' shapes, once per shapes): the same numbers as eager for the same seed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS

import unigraph as ug

X = np.random.default_rng(5).normal(size=(5, 4)).astype(np.float32)
OPEN = [ug.Spec((None, 4), "float32")]
BATCHES = (X, X[:2])  # two batch sizes through one graph


def _on(target):
    return ug.use_backend(*target.split(":"))


def _normal64(rng, shape):
    """ug.random.normal's formula on two float64 uniform draws."""
    u, v = rng.random(shape), rng.random(shape)
    return np.sqrt(np.log(1.0 - u) * -2.0) * np.cos(v * (2 * np.pi))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_random_draws_of_an_open_batch_dim(target):
    """uniform, normal of (x.shape[0], 3) and randint: the draws of each call's batch size,
    the generator's numbers in eager's order."""
    with _on(target):
        @ug.function(input_spec=OPEN)
        def draws(x):
            n = x.shape[0]
            return (ug.random.uniform(x.shape, "float32"), ug.random.normal((n, 3)),
                    ug.random.randint((n,), 10))

        ug.manual_seed(11)
        got = [[t.numpy() for t in draws(x)] for x in BATCHES]
    rng = np.random.default_rng(11)
    for x, (uniform, normal, randint) in zip(BATCHES, got):
        n = len(x)
        assert uniform.shape == (n, 4) and normal.shape == (n, 3) and randint.shape == (n,)
        np.testing.assert_array_equal(uniform, rng.random((n, 4)).astype(np.float32))
        np.testing.assert_allclose(normal, _normal64(rng, (n, 3)), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(randint, (rng.random(n) * 10).astype(np.int64))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_dropout_of_an_open_batch_dim_and_its_gradient(target):
    """A Dropout layer's output and, from one mask, the gradient of x (the mask reused in
    the backward): each batch size's own draws."""
    with _on(target):
        dropout = ug.nn.Dropout(0.5)

        @ug.function(input_spec=OPEN)
        def forward(x):
            return dropout(x)

        ug.manual_seed(4)
        outs = [forward(x).numpy() for x in BATCHES]
        if target in TARGETS:  # (onnxruntime: inference only)
            @ug.function(input_spec=OPEN)
            def value_and_grad(x):
                return ug.value_and_grad(lambda x: ug.sum(dropout(x) * 3.0))(x)

            ug.manual_seed(4)
            grads = [[t.numpy() for t in value_and_grad(x)] for x in BATCHES]
    rng = np.random.default_rng(4)
    masks = [(rng.random(x.shape) >= 0.5).astype(np.float32) for x in BATCHES]
    for x, mask, out in zip(BATCHES, masks, outs):
        assert 0 < mask.sum() < mask.size
        np.testing.assert_allclose(out, x * mask * 2.0, rtol=1e-6)
    if target in TARGETS:
        rng = np.random.default_rng(4)
        for x, (value, grad) in zip(BATCHES, grads):
            mask = (rng.random(x.shape) >= 0.5).astype(np.float64)
            np.testing.assert_allclose(grad, mask * 6.0, rtol=1e-6)
            np.testing.assert_allclose(value, (x * mask * 6.0).sum(), rtol=1e-5)


def _train(target):
    """A compiled Dropout training step (SGD) with the batch open, called with two batch
    sizes: the losses and the weights after."""
    with _on(target):
        with ug.random.seeded(1):
            net = ug.nn.Sequential(ug.nn.Linear(4, 6), ug.nn.Dropout(0.3), ug.nn.Linear(6, 1))
        initial = net.parameters()[0].numpy()
        opt = ug.optim.SGD(net.parameters(), lr=0.1)

        @ug.function(input_spec=OPEN)
        def step(x):
            loss, grads = ug.value_and_grad(lambda: ug.mean(net(x) ** 2), wrt=opt.params)()
            opt.step(grads)
            return loss

        ug.manual_seed(9)
        losses = [step(x).numpy() for x in (*BATCHES, X[:3], X)]
        return losses, [p.numpy() for p in net.parameters()], initial


@pytest.mark.parametrize("target", TARGETS)
def test_dropout_training_step_with_the_batch_open(target):
    """The same losses and weights as numpy:eager: the same masks, forward and backward."""
    losses, weights, initial = _train(target)
    expected_losses, expected_weights, _ = _train("numpy:eager")
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(weights, expected_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(weights[0], initial), "the steps changed nothing"



@pytest.mark.parametrize("target", TARGETS)
def test_draws_that_depend_on_which_dims_are_open_are_refused(target):
    """A function that draws only while x's batch is unknown: eagerly it draws nothing; a
    static run's second trace (with the call's shapes) draws nothing either, so the graph's
    draw has no sizes: refused naming the function and why, not fed a wrong shape."""
    with _on(target):
        @ug.function(input_spec=OPEN)
        def odd(x):
            if x.shape[0] is None:
                return x * ug.random.uniform(x.shape)
            return x

        if target.endswith(":eager"):
            np.testing.assert_array_equal(odd(X).numpy(), X)
            return
        with pytest.raises(ug.TracingError) as error:
            odd(X)
    message = str(error.value)
    assert message.startswith("odd: traced with the shapes of this call's arguments it draws 0 "
                              "random tensors"), message
    assert "the draws must not depend on which sizes are known while tracing" in message
