"""The high-rank cases Paddle (3.3.1) refuses or gets wrong, on all 9 targets
(`backends/unigraph_paddle/ranks.py`; quirks in `unigraph_paddle.quirks`).

* max and min over several, not all, axes of a rank 5 or 6 tensor: Paddle's backward never
  writes the gradient (uninitialised memory). Here with adjacent and non-adjacent axes,
  keepdims or not, ties (the gradient is shared) and a NaN (the slice's gradient is NaN).
  sum, mean and prod there are right in Paddle: checked, not routed.
* argmax above rank 6 and a strided slice above rank 6: Paddle refuses them.

Each program runs forward and its gradient against the float64 reference (numpy:eager on
float64 inputs); the inputs are small integers and halves, so float32 holds them exactly and
ties are ties on every target.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


def _shape(rank: int) -> tuple:
    return tuple(2 + i % 2 for i in range(rank))


def _ties(rank: int, seed: int, nan: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, _shape(rank)) * 0.5  # few values: many ties
    if nan:
        x.reshape(-1)[5] = np.nan
    return x.astype(np.float32)


def _program(fn):
    """fn's outputs, and d/dx of a weighted sum of its float outputs."""

    def loss(x):
        total = 0.0
        for k, out in enumerate(fn(x)):
            if out.dtype in ("float32", "float64"):
                total = total + ug.sum(out * (0.5 + 0.25 * k))
        return total

    def program(x):
        return (*fn(x), ug.grad(loss)(x))

    return ug.function(program)


def _agree(target, fn, x):
    program = _program(fn)
    expected = run_on("numpy:eager", program, x.astype(np.float64))
    got = run_on(target, program, x)
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, k
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6, err_msg=f"result {k}")


# several, not all, axes of rank 5 and 6: adjacent, apart, all but one
AXES = {5: [(0, 1), (3, 4), (0, 2, 4), (1, 3), (0, 1, 2, 3), (1, 2, 3, 4)],
        6: [(1, 2), (0, 5), (0, 2, 4), (1, 3, 5), (0, 1, 2, 3, 4)]}


def _max_and_min(rank):
    def fn(x):
        out = []
        for axes in AXES[rank]:
            out += [ug.max(x, axis=axes), ug.min(x, axis=axes, keepdims=True),
                    x.max(axis=axes, keepdims=True), x.min(axis=axes)]
        return out

    return fn


@pytest.mark.parametrize("rank", [5, 6])
@pytest.mark.parametrize("target", TARGETS)
def test_max_min_gradient_over_several_axes_of_rank_5_and_6(target, rank):
    _agree(target, _max_and_min(rank), _ties(rank, seed=rank))


@pytest.mark.parametrize("rank", [5, 6])
@pytest.mark.parametrize("target", TARGETS)
def test_sum_mean_prod_gradient_over_several_axes_of_rank_5_and_6(target, rank):
    # Paddle's own gradients are right here (unlike max's and min's): no route, checked so.
    # Powers of two, so every product and sum is exact in float32.
    def fn(x):
        out = []
        for axes in AXES[rank]:
            out += [ug.sum(x, axis=axes), ug.mean(x, axis=axes, keepdims=True),
                    ug.prod(x, axis=axes), ug.prod(x, axis=axes, keepdims=True)]
        return out

    rng = np.random.default_rng(rank)
    _agree(target, fn, rng.choice([-2.0, -0.5, 0.5, 1.0, 2.0], _shape(rank)).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_max_min_gradient_of_a_nan_slice_at_rank_5(target):
    def fn(x):
        return [ug.max(x, axis=(0, 2, 4)), ug.min(x, axis=(1, 3), keepdims=True)]

    _agree(target, fn, _ties(5, seed=7, nan=True))


@pytest.mark.parametrize("target", TARGETS)
def test_argmax_above_rank_6(target):
    def fn(x):
        # (and a float result, for the gradient the program takes)
        return [ug.argmax(x, axis=a, keepdims=k) for a in (0, 3, 6) for k in (False, True)] + [
            ug.sum(x, axis=3)]

    _agree(target, fn, _ties(7, seed=3))  # ties: the first maximum wins
    _agree(target, fn, _ties(7, seed=4, nan=True))  # a NaN is the maximum


@pytest.mark.parametrize("target", TARGETS)
def test_strided_slice_above_rank_6(target):
    def fn(x):
        whole = slice(None)
        return [x[1:, whole, ::2, whole, 1:2, 0:3:2, whole],  # some axes whole, others strided
                x[:, :, :, :, :, :, ::2],  # only the last axis
                x[0, ..., 1:] * 2.0,
                x[:, None, :, 1:, :, :, :, :]]  # rank 8

    _agree(target, fn, _ties(7, seed=5))


# several, not all, axes, with the open batch dim 0 (its size is the caller's) kept or
# reduced; at rank 6, (1, 3, 5) and (0, 2, 4) make TF's gradient broadcast back over 6 merged
# dims (`unigraph_tensorflow.ranks` reads the open dim at run time)
OPEN_AXES = {5: [(3, 4), (1, 3), (1, 2, 3, 4), (0, 2, 4)],
             6: [(1, 2), (2, 3, 4), (1, 3, 5), (0, 2, 4)]}


@pytest.mark.parametrize("rank", [5, 6])
@pytest.mark.parametrize("target", TARGETS)
def test_max_min_gradient_with_a_dim_unknown_until_the_run(target, rank):
    """Max and min (and sum, mean, prod) over several axes with the batch dim left open
    (`input_spec` None: -1 in a Paddle Program), so the routes cannot read the shape when the
    graph is built; three batch sizes through the one graph, 1 among them (a dim of 1 merges
    or drops out of TF's broadcasts)."""
    def fn(x):
        out = []
        for axes in OPEN_AXES[rank]:
            out += [ug.max(x, axis=axes), ug.min(x, axis=axes, keepdims=True),
                    ug.sum(x, axis=axes), ug.mean(x, axis=axes, keepdims=True),
                    ug.prod(2.0 ** (2.0 * x), axis=axes)]  # powers of two: exact products
        return out

    def loss(x):
        total = 0.0
        for k, out in enumerate(fn(x)):
            total = total + ug.sum(out * (0.5 + 0.25 * k))
        return total

    def program(x):
        return (*fn(x), ug.grad(loss)(x))

    spec = [ug.Spec((None, *_shape(rank)[1:]), "float32")]
    reference = ug.function(program)
    open_batch = ug.function(program, input_spec=spec)
    for batch, seed in ((2, 11), (3, 12), (1, 13)):
        x = np.concatenate([_ties(rank, seed + i) for i in range(batch)])[:batch]
        expected = run_on("numpy:eager", reference, x.astype(np.float64))
        got = run_on(target, open_batch, x)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, (batch, k)
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6,
                                       err_msg=f"batch {batch}, result {k}")
