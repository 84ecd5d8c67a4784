"""The losses and activation layers a ported model uses: F.l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy(_with_logits) and nn.GELU / SiLU / LeakyReLU / ELU /
Identity, on every target, against NumPy formulas written here (torch's definitions) and
their gradients worked out by hand."""

import math

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

F = ug.nn.functional

PREDICTION = np.array([[-3.0, -0.5, 0.0], [0.25, 1.0, 4.0]])
TARGET = np.array([[-1.0, -0.5, 0.5], [0.0, 3.0, 1.5]])
LOGITS = np.array([[-1000.0, -30.0, -1.5], [0.0, 2.0, 800.0]])
LABELS = np.array([[1.0, 0.0, 0.25], [0.5, 1.0, 0.0]])
PROBABILITIES = np.array([[0.0, 0.1, 0.5], [0.9, 1.0, 0.3]])


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


# name -> (loss function, its two inputs, the NumPy losses, the NumPy gradient of the summed
# losses with respect to the first input)
def _smooth(d, beta):
    return np.where(np.abs(d) < beta, 0.5 * d * d / beta, np.abs(d) - 0.5 * beta)


def _huber(d, delta):
    return np.where(np.abs(d) < delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta))


D = PREDICTION - TARGET
LOSSES = {
    "l1_loss": (F.l1_loss, (PREDICTION, TARGET), {}, np.abs(D), np.sign(D)),
    "smooth_l1_loss": (F.smooth_l1_loss, (PREDICTION, TARGET), {"beta": 0.5},
                       _smooth(D, 0.5), np.where(np.abs(D) < 0.5, D / 0.5, np.sign(D))),
    "huber_loss": (F.huber_loss, (PREDICTION, TARGET), {"delta": 2.0}, _huber(D, 2.0),
                   np.where(np.abs(D) < 2.0, D, 2.0 * np.sign(D))),
    "binary_cross_entropy_with_logits": (
        F.binary_cross_entropy_with_logits, (LOGITS, LABELS), {},
        np.maximum(LOGITS, 0) - LOGITS * LABELS + np.log1p(np.exp(-np.abs(LOGITS))),
        _sigmoid(LOGITS) - LABELS),
    "binary_cross_entropy": (
        F.binary_cross_entropy, (PROBABILITIES, LABELS), {},
        -(LABELS * np.maximum(np.log(np.where(PROBABILITIES > 0, PROBABILITIES, 1e-300)),
                              -100.0)
          + (1 - LABELS) * np.maximum(np.log(np.where(PROBABILITIES < 1, 1 - PROBABILITIES,
                                                      1e-300)), -100.0)),
        None),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("target", TARGETS)
def test_loss_values(target, name, reduction):
    fn, inputs, options, losses, _ = LOSSES[name]
    got = run_on(target, ug.function(lambda a, b: fn(a, b, reduction=reduction, **options)),
                 *inputs)
    want = {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(n for n in LOSSES if LOSSES[n][4] is not None))
@pytest.mark.parametrize("target", TARGETS)
def test_loss_gradients(target, name):
    fn, inputs, options, _, gradient = LOSSES[name]
    grad = ug.function(ug.grad(lambda a, b: fn(a, b, reduction="sum", **options)))
    np.testing.assert_allclose(run_on(target, grad, *inputs), gradient, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_binary_cross_entropy_gradient_away_from_the_floor(target):
    """d/dp of -(t log p + (1 - t) log(1 - p)) is (p - t) / (p (1 - p)) inside (0, 1)."""
    p = np.array([0.1, 0.5, 0.9, 0.3])
    t = np.array([0.0, 1.0, 0.25, 1.0])
    grad = ug.function(ug.grad(lambda a, b: F.binary_cross_entropy(a, b, reduction="sum")))
    np.testing.assert_allclose(run_on(target, grad, p, t), (p - t) / (p * (1 - p)),
                               rtol=1e-12)


def test_bad_options_name_the_cause():
    with pytest.raises(ValueError, match="beta must be > 0"):
        F.smooth_l1_loss(PREDICTION, TARGET, beta=0.0)
    with pytest.raises(ValueError, match="delta must be > 0"):
        F.huber_loss(PREDICTION, TARGET, delta=-1.0)
    with pytest.raises(ValueError, match="reduction must be"):
        F.l1_loss(PREDICTION, TARGET, reduction="avg")
    with pytest.raises(ValueError, match="approximate must be"):
        ug.nn.GELU("erf")


X = np.array([-3.0, -0.5, 0.0, 0.75, 2.0])
_ERF = np.vectorize(math.erf)
ACTIVATIONS = {
    "GELU": (lambda: ug.nn.GELU(), 0.5 * X * (1 + _ERF(X / math.sqrt(2)))),
    "GELU-tanh": (lambda: ug.nn.GELU("tanh"),
                  0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X ** 3)))),
    "SiLU": (lambda: ug.nn.SiLU(), X * _sigmoid(X)),
    "LeakyReLU": (lambda: ug.nn.LeakyReLU(0.2), np.where(X > 0, X, 0.2 * X)),
    "ELU": (lambda: ug.nn.ELU(0.5), np.where(X > 0, X, 0.5 * np.expm1(X))),
    "Identity": (lambda: ug.nn.Identity(), X),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("target", TARGETS)
def test_activation_layers(target, name):
    make, want = ACTIVATIONS[name]
    layer = make()
    np.testing.assert_allclose(run_on(target, ug.function(lambda x: layer(x)), X), want,
                               rtol=1e-12, atol=1e-15)
