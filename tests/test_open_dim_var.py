"""ug.var and ug.std over an axis `input_spec` leaves open, on all 9 targets and
onnxruntime:static: every static target refused them while tracing ("has a dim known only
at run time; this function needs every dim"), even over a known axis of such a tensor,
although eager ran them. Now n is counted when the program runs (a float64 sum of ones,
cast once to x's dtype: the float eager divides by), so on each backend the result with the
dim open is its eager result, bit for bit (onnxruntime: its result with the dim known).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.array([[1.5, -2.0, 0.5], [0.25, 3.0, 7.0], [4.0, -1.0, 2.5], [0.1, 0.2, -0.3]],
             np.float32)
OPEN = [ug.Spec((None, 3), "float32")]
CLOSED = [ug.Spec((4, 3), "float32")]
CALLS = {
    "var axis 0": (lambda x: ug.var(x, axis=0), lambda x: np.var(x, axis=0)),
    "var all, ddof 1": (lambda x: ug.var(x, ddof=1), lambda x: np.var(x, ddof=1)),
    "var axis 1 keepdims": (lambda x: ug.var(x, axis=1, keepdims=True),
                            lambda x: np.var(x, axis=1, keepdims=True)),
    "std axis 0 ddof 1 keepdims": (lambda x: ug.std(x, axis=0, keepdims=True, ddof=1),
                                   lambda x: np.std(x, axis=0, keepdims=True, ddof=1)),
    "std axes (0, 1)": (lambda x: ug.std(x, axis=(0, 1)), lambda x: np.std(x)),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_over_an_open_axis_it_runs_as_with_the_dim_known(target, call):
    fn, reference = CALLS[call]
    opened = run_on(target, ug.function(fn, input_spec=OPEN), X)
    # Where n is counted at run time the quotient is the framework's own division, as its
    # eager one; a graph dividing by a constant n may differ in the last bit (TF's static
    # graphs give x * (1 / n)). Over the known axis 1, n is that constant still.
    eager = f"{target.split(':')[0]}:eager"
    same = eager if eager in TARGETS and call != "var axis 1 keepdims" else target
    known = run_on(same, ug.function(fn, input_spec=CLOSED), X)
    want = reference(X.astype(np.float64))
    assert opened.dtype == np.float32 and opened.shape == want.shape
    np.testing.assert_array_equal(opened, known)
    np.testing.assert_allclose(opened, want, rtol=1e-6)


def _loss(x):
    return ug.sum(ug.var(x, axis=0, ddof=1) * np.array([1.0, -2.0, 0.5], np.float32)) + ug.std(x)


@pytest.mark.parametrize("spec", [OPEN, CLOSED], ids=["open", "closed"])
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_numpy_eagers(target, spec):
    grad = ug.function(lambda x: ug.value_and_grad(_loss)(x), input_spec=spec)
    value, dx = run_on(target, grad, X)
    want_value, want_dx = run_on("numpy:eager", grad, X)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)
