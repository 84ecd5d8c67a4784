"""ug.sign of infinities prints no RuntimeWarning on any target (np.sign prints none); it
was composed with x * 0, and inf * 0 made the NumPy targets warn "invalid value encountered
in multiply" about a value no branch kept. Values as np.sign's (a zero keeps its sign),
gradient 0."""

import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan, 2.5, -3.0])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_sign_of_special_values_is_quiet(target, dtype):
    x = X.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = run_on(target, ug.function(ug.sign), x)
        grad = run_on(target, ug.function(ug.grad(lambda v: ug.sum(ug.sign(v)))), x)
    np.testing.assert_array_equal(got, np.sign(x))
    np.testing.assert_array_equal(np.signbit(got[2:4]), [False, True])
    np.testing.assert_array_equal(grad, np.zeros_like(x))
