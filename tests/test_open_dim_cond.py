"""A `cond` whose result has a dim left open by `input_spec`, empty or not when the program
runs, on all 9 targets, forward and gradient, against numpy:eager in float64.

A zero-size result of Paddle's `if` op has no memory (3.3.1: fetched as None). Where the
IR knows the result is empty, paddle:static already made it outside the `if`; where a dim
was open, the `if` handed back a result with no memory, and the fetch raised a raw
AttributeError ('NoneType' object has no attribute 'shape'; random-program tester, seed
5004). Such a result now leaves the `if` flat with one element more, and its shape.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

SPECS = {"every dim open": (None, None, None, None), "the batch open": (None, 3, 4, 3)}
PROGRAMS = {
    "a pool in both branches": lambda p, x: ug.cond(
        p > 0.5, lambda: ug.max_pool2d(x, (1, 1), stride=(2, 2)), lambda: x[:, :, ::2, ::2]),
    "a value from before": lambda p, x: (lambda v: ug.cond(p < 0.5, lambda: v, lambda: v))(
        x * 2.0),
    "used after": lambda p, x: ug.cond(p < 0.5, lambda: x + 1.0, lambda: x * 3.0) * 2.0,
}


def _run(program, p, x, spec, target):
    def both(dtype):
        specs = [ug.Spec((), dtype), ug.Spec(spec, dtype)]
        forward = ug.function(program, input_spec=specs)
        grad = ug.function(lambda p, x: ug.grad(
            lambda p, x: ug.sum(program(p, x) * program(p, x)), argnums=(0, 1))(p, x),
            input_spec=specs)
        return forward, grad

    with ug.use_backend("numpy", "eager"):
        forward, grad = both("float64")
        wide = [p.astype(np.float64), x.astype(np.float64)]
        expected = [forward(*wide).numpy()] + [g.numpy() for g in grad(*wide)]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward, grad = both(str(x.dtype))
        got = [forward(p, x).numpy()] + [g.numpy() for g in grad(p, x)]
    for name, a, e in zip(["output", "grad p", "grad x"], got, expected):
        assert a.shape == e.shape, name
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("pred", [0.25, 0.75])
@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("target", TARGETS)
def test_cond_result_with_an_open_dim(target, program, spec, pred, batch):
    x = np.random.default_rng(3).normal(size=(batch, 3, 4, 3)).astype(np.float32)
    _run(PROGRAMS[program], np.float32(pred), x, SPECS[spec], target)


@pytest.mark.parametrize("shape", [(2, 0), (0, 2), (0, 0), (2, 3)])
@pytest.mark.parametrize("target", TARGETS)
def test_cond_of_a_matrix_with_both_dims_open(target, shape):
    """Empty along either dim, or both, at run time."""
    x = np.random.default_rng(4).normal(size=shape).astype(np.float32)
    for pred in (0.25, 0.75):
        _run(PROGRAMS["used after"], np.float32(pred), x, (None, None), target)
