"""ug.tile of a tensor with a dim `input_spec` leaves open, on all 9 targets and
onnxruntime:static: every static target refused it while tracing ("has a dim known only at
run time; this function needs every dim"), along the open axis or another, although eager
ran it. Now along an open axis a `concat` of the copies (new leading axes by expand_dims);
along known axes the `take` of the repeated positions as before.

A zero repeat before a copy (`(0, 2)`) made paddle:static raise Paddle's raw
InvalidArgumentError while building, and after an open dim (`(2, 0)`) it fetched the wrong
empty shape ((2, 0) for (6, 0)): its `take` lowering handed `reshape` a listed 0, which
Paddle reads as "copy that dim of the input".
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.arange(6, dtype=np.float32).reshape(3, 2) * 0.5 - 1.0
SPECS = {"open": ug.Spec((None, 2), "float32"), "closed": ug.Spec((3, 2), "float32")}
REPS = {"open axis": (3, 1), "known axis": (1, 2), "both": (2, 3), "new axes": (2, 1, 2),
        "none of it": (0, 1), "an int": 2, "none, then copies": (0, 2),
        "copies, then none": (2, 0), "none of the last": (0,)}


@pytest.mark.parametrize("reps", list(REPS))
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_tile_of_an_open_dim_runs(target, dim, reps):
    fn = ug.function(lambda x: ug.tile(x, REPS[reps]), input_spec=[SPECS[dim]])
    np.testing.assert_array_equal(run_on(target, fn, X), np.tile(X, REPS[reps]))


def _loss(x):
    tiled = ug.tile(x, (2, 1, 3))
    return ug.sum(tiled * np.arange(36, dtype=np.float32).reshape(2, 3, 6))


@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_sums_the_copies(target, dim):
    grad = ug.function(lambda x: ug.grad(_loss)(x), input_spec=[SPECS[dim]])
    weights = np.arange(36, dtype=np.float32).reshape(2, 3, 6)
    want = weights.reshape(2, 3, 3, 2).sum(axis=(0, 2))
    np.testing.assert_array_equal(run_on(target, grad, X), want)


@pytest.mark.parametrize("reps", [(0, 2), (2, 0), (1, 0)], ids=str)
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_through_an_empty_tile(target, dim, reps):
    """The empty copies add nothing to x's gradient; the other term still reaches it."""
    weights = np.ones(np.tile(X, reps).shape, np.float32)

    def loss(x):
        return ug.sum(ug.tile(x, reps) * weights) + ug.sum(x * x)

    grad = ug.function(lambda x: ug.grad(loss)(x), input_spec=[SPECS[dim]])
    np.testing.assert_array_equal(run_on(target, grad, X), 2 * X)
