"""A large tensor divided by, or added to, a 0-d operand, on all 9 targets, bit for bit
NumPy's: divisors that are powers of two (Adam's 1 - beta1 ** t is exactly 1.0 in float32
from step 165 on) and others, at the edges of the reciprocal's range, zeros, infinities,
NaN. paddle:eager divides by a power of two as a product by its reciprocal and adds a 0-d
as `scale(x, 1.0, bias=c)` (`unigraph_paddle.lowerings.eager_divide`, `eager_add`,
`add_in_place`): the same roundings, several times faster than its broadcasting kernels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

SIZE = 5000  # past unigraph_paddle.program_scalars.EXPAND_FROM


def _operand(dtype):
    rng = np.random.default_rng(3)
    info = np.finfo(dtype)
    x = (rng.standard_normal(SIZE) * 10.0 ** rng.integers(-30, 30, SIZE)).astype(dtype)
    x[:10] = [0.0, -0.0, np.nan, np.inf, -np.inf, info.max, -info.max, info.tiny,
              info.smallest_subnormal, -3 * info.smallest_subnormal]
    return x.reshape(50, 100)


def _divisors(dtype):
    info = np.finfo(dtype)
    low, high = info.minexp, info.maxexp - 1  # the normal powers of two: 2**low .. 2**high
    subnormal = int(np.log2(info.smallest_subnormal))
    powers = [0, 1, -1, -30, low, low - 1, high, subnormal, subnormal + 1]
    return ([np.ldexp(dtype(1), p) for p in powers] + [dtype(-4.0), dtype(-0.5)]
            + [dtype(v) for v in (1.0 - 0.9 ** 3, 3.0, 0.1, 0.0, -0.0, np.inf, np.nan)])


def _same(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_division_and_sum_by_a_0d_operand(target, dtype):
    x = _operand(dtype)

    @ug.function
    def both(x, c):
        return x / c, x + c, c + x

    tiny = np.finfo(dtype).tiny
    for c in _divisors(dtype):
        c = np.asarray(c, dtype)
        if target.startswith("tensorflow") and 0 < abs(c) < tiny:
            continue  # TensorFlow's CPU kernels flush subnormals (README, flush_denormal)
        with np.errstate(all="ignore"):
            want = [x / c, x + c, c + x]
        for got, expected in zip(run_on(target, both, x, c), want):
            if target.startswith("tensorflow"):  # as above: the subnormal elements aside
                kept = ~(_subnormal(x, tiny) | _subnormal(expected, tiny))
                got, expected = got[kept], expected[kept]
            _same(got, expected)


def _subnormal(x, tiny):
    return (x != 0) & (np.abs(x) < tiny)


@pytest.mark.parametrize("target", TARGETS)
def test_in_place_sum_and_division_of_a_temporary(target):
    """Written into a tensor just made (Adam's temporaries) where the backend can."""
    from unigraph.in_place import scratch

    x = np.abs(_operand(np.float32))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):

        @ug.function
        def steps(x, c):
            return scratch(scratch(x * 1.0, "add", 1e-8), "div", c)

        for c in (np.float32(1.0), np.float32(0.25), np.float32(0.271)):
            got = np.asarray(steps(x, c).numpy())
            _same(got, (x + np.float32(1e-8)) / c)


def test_paddle_eager_divides_by_a_power_of_two_without_divide(monkeypatch):
    """The mechanism: no divide kernel for 1.0 or 0.25, the divide kernel for 0.271."""
    import paddle

    calls = []
    divide = paddle._C_ops.divide
    monkeypatch.setattr(paddle._C_ops, "divide", lambda x, y: calls.append(1) or divide(x, y))
    x = _operand(np.float32)
    with ug.use_backend("paddle", "eager"):
        tensor = ug.tensor(x)
        for c, divides in ((1.0, 0), (0.25, 0), (0.271, 1)):
            calls.clear()
            got = (tensor / ug.tensor(np.float32(c))).numpy()
            _same(np.asarray(got), x / np.float32(c))
            assert len(calls) == divides, c
