"""The gradient of prod where a slice holds zeros, on all 9 targets: d prod / d x_i is the
product of the others (6 at the zero of [2, 0, 3], 0 where two are zero). Paddle's prod_grad
divides the product by each element, so it gave NaN (0/0) at every zero
(`unigraph_paddle.lowerings._prod_of_zeros_by_multiplies`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

CASES = {
    # name: (x, axis, keepdims)
    "one_zero": ([2.0, 0.0, 3.0], None, False),
    "two_zeros": ([2.0, 0.0, -0.0], None, True),
    "rows": ([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5], [0.0, 0.0, 4.0]], (1,), False),
    "columns_kept": ([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5], [0.0, 0.5, 4.0]], (0,), True),
    "odd_length": ([[0.5, 2.0, 0.0, -1.0, 3.0, 2.0, -0.5]], (-1,), False),
}


def _rank_6(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], (2, 3, 2, 3, 2, 3), p=[.15] * 2 + [
        .1] + [.2] * 3)


def _check(target, x, axis, keepdims, dtype):
    def loss(x):
        return ug.sum(ug.prod(x, axis=axis, keepdims=keepdims) * 1.5)

    program = ug.function(lambda x: (ug.prod(x, axis=axis, keepdims=keepdims), ug.grad(loss)(x)))
    x = np.asarray(x, dtype)
    expected = run_on("numpy:eager", program, x.astype(np.float64))
    got = run_on(target, program, x)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape and g.dtype == dtype, k
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=0, err_msg=f"result {k}")
    # a zero product's sign, as NumPy's (paddle:static lost a -0.0 factor's sign in where)
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(expected[0]))
    # products by hand: the gradient at each zero is the product of the others
    if axis is None and x.ndim == 1:
        others = [np.prod(np.delete(x.astype(np.float64), i)) * 1.5 for i in range(x.size)]
        np.testing.assert_array_equal(got[1], np.asarray(others, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_prod_gradient_where_a_slice_holds_zeros(target, case, dtype):
    x, axis, keepdims = CASES[case]
    _check(target, x, axis, keepdims, dtype)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_prod_gradient_with_zeros_over_several_axes_of_rank_6(target, keepdims):
    for axis in [(1, 3, 5), (0, 2), None]:
        _check(target, _rank_6(seed=3), axis, keepdims, "float32")


# -- a dim left open by input_spec (its size known only when the program runs) --------------
# Paddle's route above needs the reduced dims' sizes; where one is open, paddle:static gave
# NaN at a zero (grad of sum(prod(x, axis=0)) for [[2, 0, 3], [1, 4, 5]] with spec (None, 3):
# [[1, nan, 5], [2, 0, 3]]). There: unigraph_paddle.lowerings._prod_of_zeros_by_counts.

OPEN_CASES = {
    # name: (shape, axis, spec shape), None in the spec where input_spec leaves a dim open
    "r1-all": ((5,), None, (None,)),
    "r1-int": ((6,), 0, (None,)),
    "r2-rows-open": ((5, 4), 0, (None, 4)),
    "r2-cols-open": ((4, 5), 1, (4, None)),
    "r2-kept-open": ((4, 5), (1,), (None, 5)),
    "r2-all-open": ((3, 4), None, (None, None)),
    "r2-both-axes": ((4, 3), (0, 1), (None, 3)),
    "r3-middle": ((3, 4, 2), (1,), (3, None, 2)),
    "r3-outer-two": ((3, 4, 3), (0, 2), (None, 4, 3)),
    "r3-last-open": ((3, 4, 3), (0, 2), (3, 4, None)),
    "r3-kept-open": ((3, 2, 4), 2, (None, None, 4)),
    "r3-all": ((2, 3, 2), None, (None, 3, None)),
    # rank 6, several axes: Paddle's max_grad there needs ranks.max_or_min's view
    "r6-three-axes": ((2, 3, 2, 3, 2, 3), (1, 3, 5), (2, None, 2, 3, None, 3)),
}


def _with_zeros(shape, axis, shift, seed=0) -> np.ndarray:
    """Non-zero factors (|v| in {0.5, 1.5, 2}) with (slice + shift) % 3 zeros in each
    slice over `axis`: none, one or two, of alternating signs (0.0, -0.0)."""
    rng = np.random.default_rng(seed)
    rank = len(shape)
    axes = tuple(range(rank)) if axis is None else (axis,) if isinstance(axis, int) else axis
    kept = [a for a in range(rank) if a not in axes]
    perm = kept + list(axes)
    moved = [shape[a] for a in perm]
    rows = rng.choice([-2.0, -1.5, -0.5, 0.5, 1.5, 2.0],
                      (math.prod(moved[:len(kept)]), math.prod(moved[len(kept):])))
    for r, row in enumerate(rows):
        places = rng.permutation(row.size)[:(r + shift) % 3]
        row[places] = [(-0.0 if (r + k) % 2 else 0.0) for k in range(places.size)]
    return np.transpose(rows.reshape(moved), np.argsort(perm))


def _run_open(target, fn, x, spec_shape):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        program = ug.function(fn, input_spec=[ug.Spec(spec_shape, str(x.dtype))])
        return [np.asarray(o.numpy()) for o in program(x)]


def _prod_and_grad(axis, keepdims):
    def loss(x):
        return ug.sum(ug.prod(x, axis=axis, keepdims=keepdims) * 1.5)

    return lambda x: (ug.prod(x, axis=axis, keepdims=keepdims), ug.grad(loss)(x))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("case", list(OPEN_CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_prod_gradient_with_zeros_where_input_spec_leaves_a_dim_open(target, case, keepdims):
    shape, axis, spec_shape = OPEN_CASES[case]
    fn = _prod_and_grad(axis, keepdims)
    for shift in range(3):  # a slice of each count; all three where there is one slice
        x = _with_zeros(shape, axis, shift).astype(np.float32)
        expected = run_on("numpy:eager", ug.function(fn), x.astype(np.float64))
        got = _run_open(target, fn, x, spec_shape)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape and g.dtype == np.float32, (shift, k)
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=0, err_msg=f"{shift=} result {k}")
        # the product's zeros carry the sign of the product of the factors, as NumPy's
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(expected[0]),
                                      err_msg=f"{shift=}: sign of the product")


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
@pytest.mark.parametrize("target", TARGETS)
def test_prod_of_an_open_dim_in_each_dtype(target, dtype):
    """float16 runs Paddle's route in float32 (widen_half); an int product takes no
    gradient, so only its forward is compared (wrapping as NumPy's)."""
    shape, axis, spec_shape = (5, 4), (0,), (None, 4)
    if dtype == "int32":
        fn = lambda x: ug.prod(x, axis=axis)  # noqa: E731
        x = (_with_zeros(shape, axis, 0) * 2).astype(np.int32)
        x[:2] = [40_000], [60_000]  # the product past 2**31 wraps
        (got,) = _run_open(target, lambda x: (fn(x),), x, spec_shape)
        expected = np.prod(x, axis=axis, dtype=np.int32)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, expected)
        return
    fn = _prod_and_grad(axis, False)
    for shift in range(3):
        x = _with_zeros(shape, axis, shift).astype(dtype)
        expected = run_on("numpy:eager", ug.function(fn), x.astype(np.float64))
        got = _run_open(target, fn, x, spec_shape)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == np.dtype(dtype), (shift, k)
            np.testing.assert_allclose(g, e.astype(dtype), rtol=1e-3 if dtype == "float16"
                                       else 1e-12, atol=0, err_msg=f"{shift=} result {k}")
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(expected[0]))
