"""The sign of a zero product, on all 9 targets: `x * s` for x = -0.0 and s > 0, and for
x = 0.0 and s < 0, is -0.0 (NumPy's, IEEE's), and so is an SGD step's `lr * g` for g = -0.0:
p - lr * g for p = -0.0 is then +0.0 (-0.0 - -0.0), not -0.0.

paddle:static is where this can break: `_C_ops.scale(g, lr, -0.0, True)` (dygraph's fast
form of `lr * g`) carries its bias as an IR float attribute in a Program, and Paddle keeps one
attribute for 0.0 and -0.0, the first one made in the process. The updates test makes a +0.0
one first, as any Program holding `paddle.scale(x, 2.0)` does, so that it fails wherever a
Program's update still multiplies through such a bias."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

# Small (Paddle's broadcasting kernels) and past 4096 elements (paddle:static and the eager
# in-place ops expand a 0-d operand to the tensor's shape first).
SIZES = [5, 5000]
TINY = {np.float32: np.float32(1e-45), np.float64: np.float64(5e-324)}  # smallest subnormals


def _zeros(size, dtype):
    x = np.zeros(size, dtype)
    x[1::2] = -0.0
    return x


def _same_bits(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("target", TARGETS)
def test_zero_times_a_scalar_keeps_the_sign(target, size, dtype):
    x = _zeros(size, dtype)

    @ug.function
    def products(x, s, minus_s):
        # by a 0-d tensor, both orders, and by Python numbers of either sign
        return x * s, s * x, x * minus_s, x * 0.5, x * -0.5, -0.5 * x

    s, minus_s = np.asarray(0.5, dtype), np.asarray(-0.5, dtype)
    got = run_on(target, products, x, s, minus_s)
    want = [x * s, s * x, x * minus_s, x * s, x * minus_s, minus_s * x]
    for g, w in zip(got, want):
        _same_bits(g, w)
    assert np.signbit(got[0]).tolist() == np.signbit(x).tolist()  # -0.0 * 0.5 is -0.0
    assert np.signbit(got[2]).tolist() == (~np.signbit(x)).tolist()  # 0.0 * -0.5 is -0.0


def _positive_zero_attribute_first():
    """Make Paddle's IR hold the float attribute +0.0 (the bias of `paddle.scale(x, 2.0)`),
    so that an equal -0.0 asked for later in this process is that +0.0."""
    import paddle
    from unigraph_paddle.static import StaticMode

    with StaticMode(paddle):
        with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
            paddle.scale(paddle.static.data("x", [1], "float32"), 2.0, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [5, 8, 5000])  # float32: 8 runs Paddle's sgd_, 5 does not
@pytest.mark.parametrize("target", TARGETS)
def test_sgd_step_of_a_zero_product(target, size, dtype):
    """p <- p - lr * g with p = -0.0 and lr * g = -0.0 (g = -0.0, or the smallest negative
    subnormal, whose product with lr underflows to -0.0) is +0.0; the other signs stay."""
    lr = 0.1
    p0 = np.resize(np.array([-0.0, -0.0, 0.0, -0.0, 0.0], dtype), size)
    g = np.resize(np.array([-0.0, -TINY[dtype], -0.0, 0.0, 0.0], dtype), size)
    want = p0 - dtype(lr) * g
    assert not np.signbit(want[0]) and np.signbit(want[3])
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        if t.backend == "paddle":
            ug.tensor(0.0)  # loads Paddle
            _positive_zero_attribute_first()
        param = ug.Parameter(p0, name="p")
        optimizer = ug.optim.SGD([param], lr=lr)

        @ug.function
        def step(g):
            optimizer.apply([g])
            return ug.tensor(0.0)

        step(g)  # eagerly the first step allocates, later ones update in place
        _same_bits(np.asarray(param.numpy()), want)
        step(g)
        _same_bits(np.asarray(param.numpy()), want - dtype(lr) * g)
