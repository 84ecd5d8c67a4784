"""ug.flip along an axis `input_spec` leaves open, on all 9 targets and onnxruntime:static:
every static target refused it while tracing ("has a dim known only at run time; this
function needs every dim"), even along a known axis of such a tensor, although eager ran
it. Now the op `flip` (torch.flip, tf.reverse, paddle.flip, ONNX Slice with step -1) along
the open axes; along known axes the `take` of the reversed positions as before.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.arange(12, dtype=np.float32).reshape(4, 3) * 0.5 - 1.0
SPECS = {"open": ug.Spec((None, 3), "float32"), "closed": ug.Spec((4, 3), "float32")}
AXES = {"open axis": 0, "known axis": 1, "every axis": None, "both, negative": (-1, -2)}


@pytest.mark.parametrize("axes", list(AXES))
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_flip_of_an_open_dim_runs(target, dim, axes):
    fn = ug.function(lambda x: ug.flip(x, axis=AXES[axes]), input_spec=[SPECS[dim]])
    np.testing.assert_array_equal(run_on(target, fn, X), np.flip(X, AXES[axes]))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_ints_and_bools_flip_too(target):
    fn = ug.function(lambda x: (ug.flip(ug.cast(x, "int32"), 0), ug.flip(x > 0.0, 0)),
                     input_spec=[SPECS["open"]])
    ints, bools = run_on(target, fn, X)
    np.testing.assert_array_equal(ints, np.flip(X.astype(np.int32), 0))
    np.testing.assert_array_equal(bools, np.flip(X > 0, 0))


def _loss(x):
    return ug.sum(ug.flip(x, axis=None) * X)


@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_flipped_back(target, dim):
    grad = ug.function(lambda x: ug.grad(_loss)(x), input_spec=[SPECS[dim]])
    np.testing.assert_array_equal(run_on(target, grad, X), np.flip(X))
