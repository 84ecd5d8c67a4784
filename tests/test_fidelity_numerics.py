"""NaN, tie and saturation semantics (issue 12 item 5): one rule per op, every target.

Each case is written once with its expected values worked out by hand (never taken from the
code under test), and runs on all 9 targets, forward and gradient, in float32 and float64.
The rules themselves are written in the op records' docstrings (`unigraph/ops/`):

- NaN propagates as in NumPy: relu, max/min, maximum/minimum, max_pool2d of a NaN is NaN;
  softmax/log_softmax of a row holding +inf is NaN (exp(x - max) with inf - inf = NaN).
- Gradient ties: max/min reductions and maximum/minimum split the gradient equally among the
  tied elements; a slice (or pair) whose result is NaN passes NaN back to all of its elements.
  max_pool2d sends each window's gradient to its FIRST maximum in row-major order, a NaN
  counting as the maximum. relu'(0) = relu'(NaN) = 0.
- No saturation: log_softmax([1000, 0]) = [0, -1000]; a float -> int cast has gradient 0;
  float64 stays float64 throughout (avg_pool2d's 1/(kh*kw)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

NAN = np.nan
INF = np.inf

# Every expected value below is exact in float64; float32 rounds the inputs and the sums.
TOLERANCE = {"float32": (1e-6, 1e-6), "float64": (1e-15, 1e-15)}


@dataclass(frozen=True)
class Case:
    """fn(*inputs) == forward, and d/d inputs of sum(fn(*inputs) * weight) == grads."""

    fn: object
    inputs: tuple
    forward: object
    grads: tuple
    weight: object = 1.0
    # Only the first `differentiable` inputs get a gradient (labels have none).
    differentiable: int | None = None
    extra: dict = field(default_factory=dict)


def _pool(x):
    """[[...], [...]] -> NCHW with one image and one channel."""
    return np.array(x, dtype=np.float64)[None, None]


def _cast_round_trip(v):
    return ug.cast(ug.cast(v, "int32"), v.dtype)


# The overlapping 3x3 windows over a 5x5 image cover cell (i, j) cover[i] * cover[j] times.
_COVER = np.array([1.0, 2.0, 3.0, 2.0, 1.0])

CASES = {
    # -- NaN propagates ----------------------------------------------------------------------
    "relu-nan": Case(
        ug.relu, ([NAN, -1.0, 0.0, 2.0, -INF],),
        [NAN, 0.0, 0.0, 2.0, 0.0], ([0.0, 0.0, 0.0, 1.0, 0.0],),
    ),
    "max-nan": Case(
        lambda x: ug.max(x, axis=1), ([[1.0, NAN, 3.0], [2.0, 0.0, 1.0]],),
        [NAN, 2.0], ([[NAN, NAN, NAN], [1.0, 0.0, 0.0]],),
    ),
    "min-nan": Case(
        lambda x: ug.min(x, axis=1), ([[1.0, 0.0, 3.0], [2.0, NAN, 1.0]],),
        [0.0, NAN], ([[0.0, 1.0, 0.0], [NAN, NAN, NAN]],),
    ),
    "max-all-nan": Case(
        lambda x: ug.max(x), ([[1.0, 5.0], [NAN, 2.0]],),
        NAN, ([[NAN, NAN], [NAN, NAN]],),
    ),
    "maximum-nan": Case(
        ug.maximum, ([NAN, 1.0, NAN, 2.0, 4.0], [1.0, NAN, NAN, 3.0, 0.0]),
        [NAN, NAN, NAN, 3.0, 4.0],
        ([NAN, NAN, NAN, 0.0, 1.0], [NAN, NAN, NAN, 1.0, 0.0]),
    ),
    "minimum-nan": Case(
        ug.minimum, ([NAN, 1.0, NAN, 2.0, 4.0], [1.0, NAN, NAN, 3.0, 0.0]),
        [NAN, NAN, NAN, 2.0, 0.0],
        ([NAN, NAN, NAN, 1.0, 0.0], [NAN, NAN, NAN, 0.0, 1.0]),
    ),
    "max_pool2d-nan": Case(
        # Window 1 is [1, nan; 3, 4], window 2 [5, 2; nan, nan]: the first NaN of each wins.
        lambda x: ug.max_pool2d(x, 2, 2),
        (_pool([[1.0, NAN, 5.0, 2.0], [3.0, 4.0, NAN, NAN]]),),
        _pool([[NAN, NAN]]),
        (_pool([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]),),
    ),
    "max_pool2d-nan-after-inf": Case(
        lambda x: ug.max_pool2d(x, 2, 2),
        (_pool([[INF, 1.0], [NAN, 2.0]]),),
        _pool([[NAN]]),
        (_pool([[0.0, 0.0], [1.0, 0.0]]),),
    ),
    # -- ties ----------------------------------------------------------------------------------
    "max-ties": Case(
        lambda x: ug.max(x, axis=1), ([[1.0, 3.0, 3.0], [0.0, -1.0, 0.0]],),
        [3.0, 0.0], ([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]],),
    ),
    "max-ties-all": Case(
        lambda x: ug.max(x), ([[2.0, 1.0], [2.0, 2.0]],),
        2.0, ([[1 / 3, 0.0], [1 / 3, 1 / 3]],), weight=1.0,
    ),
    "min-ties": Case(
        lambda x: ug.min(x, axis=0, keepdims=True), ([[1.0, 3.0], [1.0, 0.0], [1.0, 0.0]],),
        [[1.0, 0.0]], ([[1 / 3, 0.0], [1 / 3, 0.5], [1 / 3, 0.5]],), weight=1.0,
    ),
    "maximum-ties": Case(
        ug.maximum, ([1.0, 2.0, 3.0], [1.0, 0.0, 5.0]),
        [1.0, 2.0, 5.0], ([0.5, 1.0, 0.0], [0.5, 0.0, 1.0]),
    ),
    "maximum-ties-broadcast": Case(
        # y is broadcast over three elements: it collects 0.5 + 0.5 + 1.
        ug.maximum, ([2.0, 2.0, 1.0], [2.0]),
        [2.0, 2.0, 2.0], ([0.5, 0.5, 0.0], [2.0]),
    ),
    "minimum-ties": Case(
        ug.minimum, ([1.0, 2.0, 3.0], [1.0, 0.0, 5.0]),
        [1.0, 0.0, 3.0], ([0.5, 0.0, 1.0], [0.5, 1.0, 0.0]),
    ),
    "max_pool2d-ties": Case(
        # 2x2 windows, stride 2: [1, 1; 1, 1] -> the top-left; [0, 2; 2, 1] -> (0, 1).
        lambda x: ug.max_pool2d(x, 2, 2),
        (_pool([[1.0, 1.0, 0.0, 2.0], [1.0, 1.0, 2.0, 1.0]]),),
        _pool([[1.0, 2.0]]),
        (_pool([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]),),
    ),
    "max_pool2d-ties-overlapping": Case(
        # Four overlapping 2x2 windows over a plateau: each picks its own top-left cell.
        lambda x: ug.max_pool2d(x, 2, 1),
        (_pool(np.full((3, 3), 7.0)),),
        _pool(np.full((2, 2), 7.0)),
        (_pool([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),),
    ),
    "relu-abs-kink": Case(
        lambda x: ug.relu(x) + ug.abs(x), ([-1.0, 0.0, 2.0],),
        [1.0, 0.0, 4.0], ([-1.0, 0.0, 2.0],),
    ),
    # -- softmax family: +inf and large values -------------------------------------------------
    "softmax-inf": Case(
        lambda x: ug.softmax(x, axis=-1), ([[INF, 1.0], [-INF, 0.0]],),
        [[NAN, NAN], [0.0, 1.0]], ([[NAN, NAN], [0.0, 0.0]],), weight=[[1.0, 2.0]],
    ),
    "log_softmax-inf": Case(
        lambda x: ug.log_softmax(x, axis=-1), ([[INF, 1.0], [1.0, 1.0]],),
        [[NAN, NAN], [-np.log(2.0), -np.log(2.0)]],
        # g - softmax * sum(g) with g = [1, 2], softmax [.5, .5]: [1 - 1.5, 2 - 1.5].
        ([[NAN, NAN], [-0.5, 0.5]],), weight=[[1.0, 2.0]],
    ),
    "log_softmax-large": Case(
        lambda x: ug.log_softmax(x, axis=-1), ([[1000.0, 0.0], [0.0, -1000.0]],),
        [[0.0, -1000.0], [0.0, -1000.0]],
        # softmax is [1, 0] exactly (exp(-1000) underflows): g - [sum(g), 0].
        ([[-2.0, 2.0], [-2.0, 2.0]],), weight=[[1.0, 2.0]],
    ),
    "softmax-large": Case(
        lambda x: ug.softmax(x, axis=-1), ([[1000.0, 0.0], [-1000.0, -1000.0]],),
        [[1.0, 0.0], [0.5, 0.5]],
        # s * (g - sum(g * s)) with g = [1, 2]: row 1 [1 * (1 - 1), 0]; row 2 [-.25, .25].
        ([[0.0, 0.0], [-0.25, 0.25]],), weight=[[1.0, 2.0]],
    ),
    "cross_entropy-large": Case(
        ug.sparse_softmax_cross_entropy, ([[1000.0, 0.0]], np.array([1])),
        [1000.0], ([[1.0, -1.0]],), differentiable=1,
    ),
    # -- no gradient leaks, no precision loss --------------------------------------------------
    "cast-int-round-trip": Case(
        _cast_round_trip, ([1.5, -2.7, 0.25],), [1.0, -2.0, 0.0], ([0.0, 0.0, 0.0],),
    ),
    "avg_pool2d-overlap": Case(
        # Every 3x3 window divides by 9; the centre cell sits in all nine windows: 9 * 1/9.
        lambda x: ug.avg_pool2d(x, 3, 1),
        (_pool(np.arange(25.0).reshape(5, 5)),),
        _pool([[6.0, 7.0, 8.0], [11.0, 12.0, 13.0], [16.0, 17.0, 18.0]]),
        (_pool(np.outer(_COVER, _COVER) / 9),),
    ),
}


def _as(dtype, value):
    array = np.asarray(value)
    return array.astype(dtype) if array.dtype.kind == "f" else array


def _compare(got, want, dtype, what):
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, expected {dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_forward_and_gradient(target, name, dtype):
    """One traced function gives both (one build per static target): the value of fn and
    the gradient of sum(fn * weight)."""
    case = CASES[name]
    inputs = [_as(dtype, x) for x in case.inputs]
    weight = _as(dtype, case.weight)
    count = len(inputs) if case.differentiable is None else case.differentiable

    def loss(*xs):
        out = case.fn(*xs)
        return ug.sum(out * weight), out

    both = ug.value_and_grad(loss, argnums=tuple(range(count)))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        (_, out), grads = both(*inputs)
        out, grads = np.asarray(out.numpy()), [np.asarray(g.numpy()) for g in grads]
    _compare(out, case.forward, dtype, f"{name} forward on {target} in {dtype}")
    assert len(grads) == count == len(case.grads)
    for k, (g, want) in enumerate(zip(grads, case.grads, strict=True)):
        _compare(g, want, dtype, f"{name}: gradient of input {k} on {target} in {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_argmax_counts_the_first_nan_as_the_maximum(target, dtype):
    """As NumPy: a NaN is the maximum, even after a +inf; the first of several wins."""
    x = np.array([[INF, NAN, 1.0], [1.0, 2.0, NAN], [NAN, NAN, 5.0], [3.0, INF, INF]], dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(lambda x: ug.argmax(x, axis=1))(x).numpy()
    np.testing.assert_array_equal(got, [1, 2, 0, 1], err_msg=f"argmax on {target} in {dtype}")


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_family_over_an_empty_axis(target):
    """log_softmax and softmax over an axis of size 0: an empty result and
    an empty gradient (Paddle's max refused the empty axis; found by the random tester)."""
    x = np.zeros((0, 3), np.float32)

    def both(x):
        return ug.log_softmax(x, axis=0), ug.softmax(x, axis=0)

    def loss(x):
        a, b = both(x)
        return ug.sum(a) + ug.sum(b)

    out = run_on(target, ug.function(both), x)
    assert [o.shape for o in out] == [(0, 3), (0, 3)]
    assert run_on(target, ug.function(ug.grad(loss)), x).shape == (0, 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_softmax_keeps_tiny_probabilities_and_zero_for_minus_inf(target, dtype):
    """softmax([0, -80, -inf]) is [1, e**-80, 0] to relative precision (e**-80 is a normal
    float32): Paddle's F.softmax floors x - max at -64, giving 1.2e-28 for both."""
    x = np.array([[0.0, -80.0, -INF], [-80.0, 0.0, 0.0]], dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(lambda x: ug.softmax(x, axis=-1))(x).numpy().astype(np.float64)
    tiny = np.exp(-80.0)
    want = np.array([[1.0, tiny, 0.0], [tiny / 2, 0.5, 0.5]]) / [[1.0 + tiny], [1.0 + tiny / 2]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=0, err_msg=f"{target} {dtype}")
    assert got[0, 2] == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_exp_of_minus_inf_and_very_negative_is_zero(target, dtype):
    """exp underflows to exactly 0 (Paddle's float64 exp stops at 5.6e-309)."""
    x = np.array([-INF, -800.0, -1e6, 0.0, -80.0], dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(ug.exp)(x).numpy().astype(np.float64)
    assert list(got[:3]) == [0.0, 0.0, 0.0], (target, dtype, got)
    np.testing.assert_allclose(got[3:], np.exp([0.0, -80.0]), rtol=1e-6, atol=0)
