"""A `cond` whose branches read, or return, an int8, uint8 or int16 value with a dim
`input_spec` leaves open, on all 9 targets (and onnxruntime, forward): the value and the
gradient are numpy:eager's. paddle:static hands such a value through its `if` flat with one
element more (`_flat_with_one_more`: an empty one would have no memory there), and built that
with paddle.concat, which a Program refuses for uint8 (its dtype check lists 'unit8'): a raw
TypeError while building (random tester, seed 10002).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.array([[-0.073, -0.702, 0.933], [-0.912, -1.353, -0.514]], np.float32)
SPEC = [ug.Spec((None, 3), "float32")]
DTYPES = ["int8", "uint8", "int16"]


def _reads(dtype):
    """The else branch reads a small int value made before the `cond`."""
    def program(x):
        i = ug.cast(ug.floor(ug.sigmoid(x) * 10.0), dtype)
        return ug.cond(ug.max(x) > 5.0, lambda: ug.tanh(x),
                       lambda: ug.where(i > 4, x, x * 0.5))
    return program


def _returns(dtype):
    """Each branch returns a small int value (and the else branch wraps it: 250 + 10)."""
    def program(x):
        i = ug.cast(ug.floor(ug.sigmoid(x) * 10.0), dtype)
        j = ug.cond(ug.max(x) > 5.0, lambda: i * 2, lambda: i + 125)
        return j, ug.cast(j, x.dtype) * x
    return program


PROGRAMS = {"reads": _reads, "returns": _returns}


def _expected(kind, dtype):
    with ug.use_backend("numpy", "eager"):
        out = PROGRAMS[kind](dtype)(X)
    return [np.asarray(o.numpy()) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("kind", list(PROGRAMS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_cond_reads_or_returns_a_small_int_of_an_open_dim(target, dtype, kind):
    fn = ug.function(PROGRAMS[kind](dtype), input_spec=SPEC)
    out = run_on(target, fn, X)
    out = out if isinstance(out, list) else [out]
    expected = _expected(kind, dtype)
    if kind == "returns":  # i + 125 wraps in int8 (and not in uint8, int16)
        assert expected[0].dtype == dtype and (dtype != "int8" or expected[0].min() < 0)
    for got, want in zip(out, expected):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("kind", list(PROGRAMS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_numpy_eagers(target, dtype, kind):
    def loss(x):
        out = PROGRAMS[kind](dtype)(x)
        return ug.sum((out[-1] if isinstance(out, tuple) else out) * X)

    grad = ug.function(lambda x: ug.grad(loss)(x), input_spec=SPEC)
    with ug.use_backend("numpy", "eager"):
        expected = np.asarray(ug.grad(loss)(X).numpy())
    np.testing.assert_allclose(run_on(target, grad, X), expected, rtol=1e-6)
