"""ug.scatter of a tensor with a dim `input_spec` leaves open, on all 9 targets: every
target runs it (the positions, their count and the updates' broadcast made when the
program runs: tests/test_open_dim_at_scatter.py), as it runs with the sizes stated by
ug.ensure_shape.

Found by the random-program tester once it drew scatter: along the open axis (seed 8001)
the refusal named no fix ("scatter needs it"); along another axis (seed 8002) every static
target raised a raw TypeError (int(None), broadcasting the updates to an open shape); then
every static target refused it naming the fix (a size in input_spec, or ug.ensure_shape).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

X = np.arange(6.0, dtype=np.float32).reshape(3, 2)
OPEN_X = ug.Spec((None, 2), "float32")
UPDATES = {0: np.array([[10.0, 20.0]], np.float32), 1: np.array([[10.0], [20.0], [30.0]],
                                                                 np.float32)}


def _run(fn, target, axis):
    spec = [OPEN_X, ug.Spec(UPDATES[axis].shape, "float32")]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return ug.function(fn, input_spec=spec)(X, UPDATES[axis]).numpy()


@pytest.mark.parametrize("axis", [0, 1], ids=["along the open axis", "along another"])
@pytest.mark.parametrize("target", TARGETS)
def test_scatter_of_an_open_dim_runs(target, axis):
    def scatter(x, u):
        return ug.scatter(x, np.array([1]), u, axis=axis)

    def stated(x, u):
        return scatter(ug.ensure_shape(x, (3, None)), u)

    want = X.copy()
    want[(slice(None),) * axis + (1,)] = np.squeeze(UPDATES[axis], axis=axis)
    np.testing.assert_array_equal(_run(scatter, target, axis), want)
    np.testing.assert_array_equal(_run(stated, target, axis), want)


@pytest.mark.parametrize("reduction", ["replace", "add"])
@pytest.mark.parametrize("target", TARGETS)
def test_scatter_at_indices_of_an_open_dim_runs(target, reduction):
    """x's dims are known, the indices' count is not (argmax along a value whose other dim
    is open): every static target raised a raw TypeError, int(None) (random tester, seed
    10003), then refused naming the fix; now it runs, as with the sizes stated."""
    spec = [ug.Spec((None, 2), "float32"), ug.Spec((2,), "float32")]
    picks = np.array([[0.5, 0.1], [0.2, 0.9]], np.float32)  # argmax along 1: [0, 1]
    updates = np.array([10.0, 20.0], np.float32)

    def scatter(p, u):
        return ug.scatter(ug.ones((3,)), ug.argmax(p, axis=1), u, reduction=reduction)

    def stated(p, u):
        return scatter(ug.ensure_shape(p, (2, 2)), u)

    want = np.ones(3, np.float32)
    want[[0, 1]] = updates + (1.0 if reduction == "add" else 0.0)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(scatter, input_spec=spec)(picks, updates).numpy()
        np.testing.assert_array_equal(got, want)
        got = ug.function(stated, input_spec=spec)(picks, updates).numpy()
    np.testing.assert_array_equal(got, want)
