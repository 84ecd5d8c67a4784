"""ug.full_like, zeros_like and ones_like of a tensor with a dim `input_spec` leaves open, on
all 9 targets and onnxruntime:static: every static target refused it while tracing ("has a
dim known only at run time; this function needs every dim"), although eager ran it and
every framework reads the size when the program runs. Now the op `full_like` (x's shape
read at run time), and with every dim known the op `full` as before.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.array([[1.5, -2.0], [0.25, 3.0], [4.0, -1.0]], np.float32)
SPECS = {"open": [ug.Spec((None, 2), "float32")], "closed": [ug.Spec((3, 2), "float32")]}


def _filled(x):
    return (ug.full_like(x, 2.5) + x, ug.zeros_like(x, "int32"), ug.ones_like(x > 0.0),
            ug.full_like(x, 7.9, "int64"))


@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_like_of_an_open_dim_runs(target, dim):
    got = run_on(target, ug.function(_filled, input_spec=SPECS[dim]), X)
    want = (X + 2.5, np.zeros((3, 2), np.int32), np.ones((3, 2), bool), np.full((3, 2), 7))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _loss(x):
    return ug.sum(ug.ones_like(x) * x * x + ug.full_like(x, 3.0))


@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_flows_past_it(target, dim):
    grad = ug.function(lambda x: ug.value_and_grad(_loss)(x), input_spec=SPECS[dim])
    value, dx = run_on(target, grad, X)
    np.testing.assert_allclose(value, np.sum(X * X + 3.0), rtol=1e-6)
    np.testing.assert_allclose(dx, 2 * X, rtol=1e-6)
