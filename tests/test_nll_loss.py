"""`F.nll_loss(log_probs, target, reduction, ignore_index=-100, weight=None)` on all 9 targets
against torch's own `torch.nn.functional.nll_loss`: values and gradients, [N, C] and
[N, C, d] inputs and a [C] one, weights (the weighted mean divides by the sum of the chosen
weights), ignore_index (an ignored -inf log-probability adds nothing), float32 and float64;
a target outside [0, C) is refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

F = ug.nn.functional
REDUCTIONS = ["mean", "sum", "none"]


def _torch(log_probs, target, reduction, weight=None, ignore_index=-100):
    import torch

    x = torch.tensor(log_probs, requires_grad=True)
    w = None if weight is None else torch.tensor(weight)
    loss = torch.nn.functional.nll_loss(x, torch.tensor(target), weight=w,
                                        ignore_index=ignore_index, reduction=reduction)
    seed = np.arange(1.0, loss.numel() + 1.0).reshape(tuple(loss.shape)) / 4
    loss.backward(torch.tensor(seed, dtype=loss.dtype))
    return loss.detach().numpy(), x.grad.numpy(), seed


def _case(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=shape)
    log_probs = scores - np.log(np.exp(scores).sum(axis=1 if len(shape) > 1 else 0,
                                                     keepdims=True))
    classes = shape[1] if len(shape) > 1 else shape[0]
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    return log_probs.astype(dtype), rng.integers(0, classes, target_shape)


def _check(target, log_probs, labels, reduction, dtype, **options):
    want, want_grad, seed = _torch(log_probs, labels, reduction, **options)

    def loss(x):
        return ug.sum(F.nll_loss(x, labels, reduction=reduction, **options) * seed)

    fn = ug.function(lambda x: (F.nll_loss(x, labels, reduction=reduction, **options),
                                ug.grad(loss)(x)))
    got, grad = run_on(target, fn, log_probs)
    rtol = 1e-6 if dtype == "float32" else 1e-13
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    np.testing.assert_allclose(grad, want_grad, rtol=rtol, atol=0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_with_weights_and_an_ignored_index(target, reduction, dtype):
    log_probs, labels = _case((6, 4), dtype)
    labels[[1, 4]] = -100
    log_probs[1, 0] = -np.inf  # ignored: adds nothing, to the loss or the gradient
    weight = np.array([0.5, 2.0, 1.0, 3.0], dtype)
    _check(target, log_probs, labels, reduction, dtype)
    _check(target, log_probs, labels, reduction, dtype, weight=weight)
    labels[[1, 2, 4]] = 3
    _check(target, log_probs, labels, reduction, dtype, weight=weight, ignore_index=3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_spatial_and_single_inputs(target, reduction):
    log_probs, labels = _case((2, 3, 5), "float64", seed=1)
    _check(target, log_probs, labels, reduction, "float64", weight=np.array([1.0, 0.25, 4.0]))
    log_probs, labels = _case((5,), "float64", seed=2)
    _check(target, log_probs, labels, reduction, "float64")


@pytest.mark.parametrize("target", TARGETS)
def test_an_open_batch_dim(target):
    """input_spec leaving N open: the rows are counted when the program runs."""
    log_probs, labels = _case((5, 3), "float64", seed=3)
    labels[2] = -100
    want, _, _ = _torch(log_probs, labels, "mean", weight=np.array([1.0, 2.0, 0.5]))
    fn = ug.function(lambda x, t: F.nll_loss(x, t, weight=np.array([1.0, 2.0, 0.5])),
                     input_spec=[ug.Spec((None, 3), "float64"), ug.Spec((None,), "int64")])
    np.testing.assert_allclose(run_on(target, fn, log_probs, labels), want, rtol=1e-13, atol=0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bad", [4, -1])
def test_a_target_outside_the_classes_is_refused(target, bad):
    """-1 too: it is not ignore_index, and not counted from the end (torch refuses it)."""
    log_probs, _ = _case((3, 4), "float64")
    fn = ug.function(lambda x: F.nll_loss(x, np.array([0, bad, 1])))
    with pytest.raises(ug.IndexOutOfRangeError):
        run_on(target, fn, log_probs)
