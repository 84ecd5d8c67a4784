"""A 0-d operand on a large tensor (an optimizer's factors, Adam's eps): `s * x`, `x * s`,
`x + s`, `s + x` bit for bit NumPy's products and sums, signed zeros, NaN and infinities
included, on all 9 targets, at a size where paddle:static expands the operand to the
tensor's shape first and paddle:eager's in-place `add_` does (`program_scalars`,
`add_in_place`: the broadcasting loop is ~3-4x slower there)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

SIZE = 5000  # past unigraph_paddle.program_scalars.EXPAND_FROM


def _operand(dtype):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(SIZE) * 10.0 ** rng.integers(-3, 3, SIZE)).astype(dtype)
    x[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0]
    return x.reshape(50, 100)


def _same(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_products_and_sums_with_a_0d_operand(target, dtype):
    x = _operand(dtype)

    @ug.function
    def both_sides(s, x):
        return s * x, x * s, x + s, s + x

    for s in (-0.5, -0.0, 1e-8):
        scalar = np.asarray(s, dtype)
        with np.errstate(invalid="ignore"):
            want = [scalar * x, x * scalar, x + scalar, scalar + x]
        for got, expected in zip(run_on(target, both_sides, scalar, x), want):
            _same(got, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_in_place_sum_with_a_0d_operand(target):
    """`+ eps` of an Adam step, on a tensor Adam has just made (written in place eagerly where
    the backend can). (Not after a sqrt: torch's and Paddle's are not correctly rounded.)"""
    from unigraph.in_place import scratch

    v = np.abs(_operand(np.float32))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):

        @ug.function
        def denominator(v):
            return scratch(v * 1.0, "add", 1e-8)

        got = np.asarray(denominator(v).numpy())
    _same(got, v + np.float32(1e-8))


def test_paddle_static_expands_the_operand(monkeypatch):
    """The mechanism: in a Program, each of the four ops found its 0-d operand."""
    from unigraph_paddle.program_scalars import ScalarForms

    found = []
    original = ScalarForms._operand

    def recorded(self, x, y):
        pair = original(self, x, y)
        found.append(pair is not None)
        return pair

    monkeypatch.setattr(ScalarForms, "_operand", recorded)

    @ug.function
    def both_sides(s, x):
        return s * x, x * s, x + s, s + x

    x = _operand(np.float32)
    got = run_on("paddle:static", both_sides, np.float32(0.9), x)
    _same(got[0], np.float32(0.9) * x)
    assert found == [True] * 4
