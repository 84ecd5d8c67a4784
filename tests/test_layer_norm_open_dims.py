"""`F.layer_norm` of x whose normalised dims input_spec leaves open runs on every target
(normalized_shape states their sizes; a run of other sizes is refused as ensure_shape
refuses it); it was refused while tracing on every static target ("normalized_shape [4]
must be the last dims of x, whose shape is [None]": random tester seed 13007)."""

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

F = ug.nn.functional


SPECS = [(None,), (None, None), (2, None)]


def _expected(x):
    """(x - mean) / sqrt(var + 1e-5) over the last dim, worked out in float64."""
    x = x.astype(np.float64)
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def _x(spec):
    values = np.array([0.5, -1.0, 2.0, 0.25, 1.5, 3.0, -2.0, 0.0], np.float32)
    return values[:4] if len(spec) == 1 else values.reshape(2, 4)


def weighted(x):
    return ug.sum(F.layer_norm(x, (4,)) * np.arange(4.0, dtype="float32"))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_layer_norm_of_open_normalised_dims(target, spec):
    x = _x(spec)
    normalised = ug.function(lambda x: F.layer_norm(x, (4,)),
                             input_spec=[ug.Spec(spec, "float32")])
    np.testing.assert_allclose(run_on(target, normalised, x), _expected(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("target", TARGETS)
def test_layer_norm_gradient_of_open_normalised_dims(target, spec):
    x = _x(spec)
    gradient = ug.function(ug.grad(weighted), input_spec=[ug.Spec(spec, "float32")])
    # the gradient as the NumPy reference gives it with every dim known
    reference = run_on("numpy:eager", ug.grad(weighted), x.astype(np.float64))
    np.testing.assert_allclose(run_on(target, gradient, x), reference, rtol=1e-4, atol=1e-5)
