"""`F.group_norm` (and `ug.nn.GroupNorm`) of a zero-size batch gives an empty result of x's
shape and empty / zero gradients on every target, as torch's group_norm does; it raised
ShapeError "cannot reshape [0, 4, 3, 3] into [0, 2, -1]" (the group's size was a -1, which
a zero-size batch leaves ambiguous; the random-program tester drew it, seed 1 of
/tmp/h3/refcheck.py)."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

F = ug.nn.functional


def _weighted_group_norm(x, weight, bias):
    return ug.sum(F.group_norm(x, 2, weight, bias) * 2.0)


@pytest.mark.parametrize("target", TARGETS)
def test_group_norm_of_a_zero_size_batch(target):
    x = np.zeros((0, 4, 3, 3), np.float32)
    weight, bias = np.linspace(0.5, 2.0, 4, dtype=np.float32), np.ones(4, np.float32)
    out = run_on(target, ug.function(lambda x, w, b: F.group_norm(x, 2, w, b)), x, weight, bias)
    assert out.shape == (0, 4, 3, 3) and out.dtype == np.float32
    gx, gw, gb = run_on(target, ug.function(ug.grad(_weighted_group_norm, argnums=(0, 1, 2))),
                        x, weight, bias)
    # no sample: nothing reaches the weight or the bias (a sum over no element is 0)
    assert gx.shape == (0, 4, 3, 3)
    np.testing.assert_array_equal(gw, np.zeros(4, np.float32))
    np.testing.assert_array_equal(gb, np.zeros(4, np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_group_norm_still_normalises_each_group(target):
    """A batch of one: each group of 2 channels x 2 positions is [0, 1, 2, 3] * k, whose
    mean is 1.5 k and biased variance 1.25 k^2 (worked by hand)."""
    base = np.array([0.0, 1.0, 2.0, 3.0])
    x = np.concatenate([base, 3.0 * base]).reshape(1, 4, 2, 1).astype(np.float32)
    out = run_on(target, ug.function(lambda x: F.group_norm(x, 2, eps=0.0)), x)
    expected = (base - 1.5) / np.sqrt(1.25)
    np.testing.assert_allclose(out.reshape(-1), np.concatenate([expected, expected]),
                               rtol=1e-5, atol=1e-6)
