"""-(expand_dims(-x)), -(reshape(-x)) and the gradient of a - reshape(-c), on all 9 targets
and onnxruntime:static: the reference's values.

Found by the random tester, seed 12110 (`--max-statements 14`): tensorflow:static gave -x
for `-ug.expand_dims(-x, 0)`, silently (Grappler's arithmetic optimizer, in a Session,
removes a Neg pair around a reshape wrongly; TF's own gradients make that pattern too).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target

X = np.array([0.726, -1.5], np.float32)
A = np.array([[0.3, 0.5]], np.float32)
CASES = {
    "-expand_dims(-x)": (lambda x: -ug.expand_dims(-x, 0), X[None, :]),
    "-reshape(-x)": (lambda x: -ug.reshape(-x, (2, 1)), X[:, None]),
    "neg(flatten(neg))": (lambda x: ug.neg(ug.flatten(ug.neg(ug.expand_dims(x, 1)))), X),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_negated_reshape_of_a_negation(target, name):
    fn, want = CASES[name]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        np.testing.assert_array_equal(ug.function(fn)(X).numpy(), want)


@pytest.mark.parametrize("target", [t for t in FORWARD_TARGETS if t not in INFERENCE_TARGETS])
def test_the_gradient_through_a_reshape_of_a_negation(target):
    def loss(a, c):
        return ug.sum((a - ug.reshape(-c, (1, 2))) * np.array([[2.0, -3.0]], np.float32))

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        ga, gc = ug.function(ug.grad(loss, argnums=(0, 1)))(A, X)
    np.testing.assert_array_equal(ga.numpy(), [[2.0, -3.0]])
    np.testing.assert_array_equal(gc.numpy(), [2.0, -3.0])
