"""A max or min over a dim that `input_spec` leaves open and a run gives 0 elements, and a
reshape to -1 of open dims whose size does not divide, on all 9 targets and
onnxruntime:static.

Eagerly both are a `ShapeError` (a max of nothing; a -1 that does not divide). Static runs
raised their framework's own error (numpy:static a ValueError, torch:static an IndexError,
paddle:static Paddle's, onnxruntime:static a BackendError for the reshape), and for the max
tensorflow:static, tensorflow:function and onnxruntime:static returned -inf. Now a static
call checks such a node, once per input shape, by the op's own shape rule for the run's
shapes (`unigraph.shape_checks.check_before_run`), and raises eager's error naming the target
and the user's line; where the sizes fit, every target gives eager's result.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

EMPTY = r"axis 0 of float32\[0, 3\] is empty; there is no maximum"  # (argmin: an argmax)
REDUCTIONS = {  # the function, eager's message
    "max": (lambda x: ug.max(x, axis=0), r"max: reducing float32\[0, 3\] over axis \(0,\) "
                                         r"has no elements to compare"),
    "min": (lambda x: ug.min(x, axis=0), r"min: reducing float32\[0, 3\] over axis \(0,\) "
                                         r"has no elements to compare"),
    "argmax": (lambda x: ug.argmax(x, axis=0), "argmax: " + EMPTY),
    "argmin": (lambda x: ug.argmin(x, axis=0), "argmax: " + EMPTY),
}


def _where(target: str, mode: str) -> str:
    """The end of a static run's message: the target and this file's line."""
    return "" if mode == "eager" else \
        rf" \(on {target} at .*test_open_dim_empty_max_and_reshape\.py:\d+\)"


@pytest.mark.parametrize("reduction", list(REDUCTIONS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_reduction_over_an_open_axis_that_is_empty(target, reduction):
    function, message = REDUCTIONS[reduction]
    t = Target.parse(target)
    x = np.array([[1.0, 5.0, -2.0], [4.0, 0.5, 3.0]], np.float32)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(function, input_spec=[ug.Spec((None, 3), "float32")])
        with ug.use_backend("numpy", "eager"):
            want = function(ug.tensor(x)).numpy()
        np.testing.assert_array_equal(f(x).numpy(), want)
        with pytest.raises(ShapeError, match=message + _where(target, t.mode)):
            f(np.zeros((0, 3), np.float32))
        np.testing.assert_array_equal(f(x).numpy(), want)  # (the same executable after)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_reshape_to_minus_one_that_does_not_divide(target):
    t = Target.parse(target)
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(lambda y: ug.reshape(y, (-1, 2)) * 2.0,
                        input_spec=[ug.Spec((None, None), "float32")])
        np.testing.assert_array_equal(f(y).numpy(), y.reshape(-1, 2) * 2.0)
        with pytest.raises(ShapeError, match=r"reshape: cannot reshape \[3, 3\] into \[-1, 2\]"
                                             + _where(target, t.mode)):
            f(np.ones((3, 3), np.float32))
        np.testing.assert_array_equal(f(y.reshape(3, 2)).numpy(), y.reshape(3, 2) * 2.0)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_logsumexp_over_an_open_axis_that_is_empty_is_minus_inf(target):
    """`ug.logsumexp` over nothing is -inf (log 0, as NumPy's reference and ONNX's
    ReduceLogSumExp): its shift is a max marked `initial=-inf`, so a run that leaves the open
    axis empty gives -inf, on every target (numpy, torch and paddle static raised their
    framework's error for the shift's max)."""
    t = Target.parse(target)
    x = np.array([[1.0, 5.0, -2.0], [4.0, 0.5, 3.0]], np.float32)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(lambda x: ug.logsumexp(x, axis=0),
                        input_spec=[ug.Spec((None, 3), "float32")])
        np.testing.assert_allclose(f(x).numpy(), np.log(np.exp(x).sum(0)), rtol=1e-6)
        with warnings.catch_warnings():  # (NumPy's log(0) would print a divide by zero)
            warnings.simplefilter("error", RuntimeWarning)
            got = f(np.zeros((0, 3), np.float32)).numpy()
        np.testing.assert_array_equal(got, [-np.inf] * 3)
        if target not in INFERENCE_TARGETS:  # (its gradient: softmax, of nothing here)
            both = ug.function(ug.value_and_grad(lambda x: ug.sum(ug.logsumexp(x, axis=0))),
                               input_spec=[ug.Spec((None, 3), "float32")])
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                value, grad = both(np.zeros((0, 3), np.float32))
            assert value.numpy() == -np.inf and grad.numpy().shape == (0, 3)
            value, grad = both(x)
            np.testing.assert_allclose(grad.numpy(), np.exp(x) / np.exp(x).sum(0), rtol=1e-5)
    with ug.use_backend("numpy", "eager"):  # (eagerly, every dim known)
        assert np.array_equal(ug.logsumexp(ug.tensor(np.zeros((0, 3), np.float32)), axis=0)
                              .numpy(), [-np.inf] * 3)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_hand_written_shift_over_an_open_axis_that_is_empty(target):
    """exp(x - max(x)) written by hand is a max over nothing, eager's `ShapeError` on every
    target (a graph pattern that took it for logsumexp's shift left it to the framework)."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(lambda x: ug.exp(x - ug.max(x, axis=0, keepdims=True)),
                        input_spec=[ug.Spec((None, 3), "float32")])
        with pytest.raises(ShapeError, match=r"max: reducing float32\[0, 3\] over axis "
                                             r"\(0,\) has no elements to compare"
                                             + _where(target, t.mode)):
            f(np.zeros((0, 3), np.float32))
