"""BatchNorm2D in training mode inside a `@ug.function` whose input_spec leaves the batch
dim (or H, W) open: the running variance's unbiased factor n / (n - 1) is counted when the
program runs. Before, every static target raised a raw TypeError while tracing
(`None * int`: the count was the product of the traced sizes; found by the random
tester's training draws).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug

X = np.random.default_rng(3).normal(size=(4, 2, 3, 3)).astype(np.float32)


def _expected(x, steps):
    """(normalised x, running_mean, running_var) after `steps` calls, in float64."""
    x = x.astype(np.float64)
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    n = x.shape[0] * x.shape[2] * x.shape[3]
    running_mean, running_var = np.zeros(2), np.ones(2)
    for _ in range(steps):
        running_mean = running_mean * 0.9 + mean * 0.1
        running_var = running_var * 0.9 + var * (0.1 * n / (n - 1))
    y = (x - mean.reshape(1, 2, 1, 1)) / np.sqrt(var.reshape(1, 2, 1, 1) + 1e-5)
    return y, running_mean, running_var


@pytest.mark.parametrize("open_shape", [(None, 2, 3, 3), (None, 2, None, None)])
@pytest.mark.parametrize("target", TARGETS)
def test_batchnorm_updates_its_statistics_with_open_dims(target, open_shape):
    """A forward pass that assigns the running statistics (twice), and a training step
    that collects them (`ug.nn.collect_updates`) and assigns them after the gradient."""
    y_expected, mean_expected, var_expected = _expected(X, 2)
    with ug.use_backend(*target.split(":")):
        bn = ug.nn.BatchNorm2D(2)

        @ug.function(input_spec=[ug.Spec(open_shape, "float32")])
        def forward(x):
            return bn(x)

        forward(X)
        y = forward(X)
        np.testing.assert_allclose(y.numpy(), y_expected, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bn.running_mean.numpy(), mean_expected, rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(bn.running_var.numpy(), var_expected, rtol=1e-5)

        trained = ug.nn.BatchNorm2D(2)
        opt = ug.optim.SGD(trained.parameters(), lr=0.1)

        @ug.function(input_spec=[ug.Spec(open_shape, "float32")])
        def step(x):
            collected = []

            def closure():
                with ug.nn.collect_updates() as updates:
                    loss = ug.sum(trained(x) * 0.5)
                collected[:] = updates
                return loss, [value for _, value in updates]

            (loss, values), grads = ug.value_and_grad(closure, wrt=opt.params)()
            for (buffer, _), value in zip(collected, values):
                ug.assign(buffer, value)
            opt.step(grads)
            return loss

        step(X)
        step(X)
        np.testing.assert_allclose(trained.running_var.numpy(), var_expected, rtol=1e-5)
        np.testing.assert_allclose(trained.running_mean.numpy(), mean_expected, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("open_shape", [(None, 2, 1, 1), (None, 2, None, None)])
@pytest.mark.parametrize("target", TARGETS)
def test_one_value_per_channel_is_refused_when_the_program_runs(target, open_shape):
    """One value per channel at run time (a batch of 1 of 1x1 images): eagerly a
    ShapeError (no variance to estimate); every static target returned the input zeroed
    and left the running variance NaN, silently. Now the same ShapeError, before the run,
    naming the target and the line, and the statistics untouched; a batch of 2 still runs."""
    with ug.use_backend(*target.split(":")):
        bn = ug.nn.BatchNorm2D(2)

        @ug.function(input_spec=[ug.Spec(open_shape, "float32")])
        def forward(x):
            return bn(x)

        with pytest.raises(ug.ShapeError, match=r"BatchNorm2D: training mode needs more "
                           r"than one value per channel .* shape \[1, 2, 1, 1\]") as caught:
            forward(X[:1, :, :1, :1])
        if target.endswith("static") or target.endswith("function"):
            assert f"on {target} at " in str(caught.value)
        np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(2, np.float32))
        y = forward(X[:2, :, :1, :1])
        np.testing.assert_allclose(y.numpy(), _expected(X[:2, :, :1, :1], 1)[0], rtol=1e-4,
                                   atol=1e-5)
