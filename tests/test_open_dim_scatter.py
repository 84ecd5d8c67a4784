"""ug.scatter along an axis `input_spec` leaves open, on all 9 targets: a static target
refuses it while tracing, naming the line and the fix (a size in input_spec, or
ug.ensure_shape first: then it runs and agrees); eager targets know every size and run.

The random-program tester, once it drew scatter (seed 8001), counted the refusal as an
open-dim refusal on every static target: its message named no fix ("scatter needs it").
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

X = np.arange(6.0, dtype=np.float32).reshape(3, 2)
U = np.array([[10.0, 20.0]], np.float32)
SPEC = [ug.Spec((None, 2), "float32"), ug.Spec((1, 2), "float32")]


def scatter(x, u):
    return ug.scatter(x, np.array([1]), u, axis=0)


def stated(x, u):
    return scatter(ug.ensure_shape(x, (3, None)), u)


def _run(fn, target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return ug.function(fn, input_spec=SPEC)(X, U).numpy()


@pytest.mark.parametrize("target", TARGETS)
def test_scatter_along_an_open_axis_names_the_fix(target):
    want = X.copy()
    want[1] = U[0]
    if Target.parse(target).mode == "eager":
        np.testing.assert_array_equal(_run(scatter, target), want)
    else:
        with pytest.raises(ShapeError, match=r"scatter at .*test_open_dim_scatter.py:\d+: axis "
                           r"0 of \[None, 2\] .*give that dim a size in input_spec, or state "
                           r"the sizes first with ug.ensure_shape"):
            _run(scatter, target)
    np.testing.assert_array_equal(_run(stated, target), want)
