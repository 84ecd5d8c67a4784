"""`ug.topk(x, k, axis=-1, largest=True, sorted=True)` and `Tensor.topk` on all 9 targets (and
onnxruntime:static): the k largest (smallest) along an axis, in order, with their int64
indices, against NumPy's stable order: ties keep their order (0.0 ties -0.0), NaN is the
largest (first when largest, last when not); ints at their extremes; k=0; every axis. The
values' gradient goes back to the chosen places (checked against torch autograd). A k
larger than the dim, or a dim left open while tracing, is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

SPECIAL = [3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0, -0.0, np.inf, -0.0, 0.0, -2.5]
INTS = ["int8", "uint8", "int16", "int32", "int64"]


def _want(x, k, axis, largest):
    """NumPy's stable order: ascending, or descending with ties still in index order (the
    stable ascending order of x reversed along the axis, reversed back)."""
    if largest:
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order


def _check(got, x, k, axis, largest):
    values, indices = got
    want_values, want_indices = _want(x, k, axis, largest)
    assert indices.dtype == np.int64
    assert values.dtype == x.dtype
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want_values))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floats_ties_nan_and_zeros_along_every_axis(target, dtype, largest):
    rng = np.random.default_rng(5)
    x = rng.choice(np.array(SPECIAL, dtype), size=(4, 5, 6))
    calls = [(3, 0), (5, 1), (4, -1), (6, 2), (0, -1)]

    def fn(x):
        out = [ug.topk(x, k, axis=axis, largest=largest) for k, axis in calls]
        return [t for pair in out for t in pair] + list(x[0, 0].topk(2, largest=largest))

    got = run_on(target, ug.function(fn), x)
    for i, (k, axis) in enumerate(calls):
        _check(got[2 * i:2 * i + 2], x, k, axis, largest)
    _check(got[-2:], x[0, 0], 2, 0, largest)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", INTS)
def test_ints_at_their_extremes(target, dtype, largest):
    info = np.iinfo(dtype)
    values = np.array([info.max, info.min, 0, 1, info.min, info.max, 1, 0], dtype)
    x = np.stack([values, values[::-1]])
    fn = ug.function(lambda x: (*ug.topk(x, 5, largest=largest),
                                *ug.topk(x, 2, axis=0, largest=largest)))
    got = run_on(target, fn, x)
    _check(got[:2], x, 5, -1, largest)
    _check(got[2:], x, 2, 0, largest)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_goes_back_to_the_chosen_places(target):
    import torch

    x = np.array([[0.5, -2.0, 3.0, 1.0, 2.5], [2.0, 1.75, -1.0, 0.0, 7.0],
                  [1.5, 0.25, -0.5, 4.0, 3.5]])
    w = np.arange(6.0).reshape(3, 2) - 2
    v = np.arange(10.0).reshape(2, 5) - 4.5

    def loss(x):
        top, _ = ug.topk(x, 2)
        low, _ = x.topk(2, axis=0, largest=False)
        return ug.sum(top * w) + ug.sum(low * v)

    value, gradient = run_on(target, ug.function(lambda x: ug.value_and_grad(loss)(x)), x)
    # torch autograd of the same loss, through torch.topk (no ties are chosen here)
    xt = torch.tensor(x, requires_grad=True)
    want = (torch.sum(torch.topk(xt, 2).values * torch.tensor(w))
            + torch.sum(torch.topk(xt, 2, dim=0, largest=False).values * torch.tensor(v)))
    want.backward()
    np.testing.assert_allclose(value, want.item(), rtol=1e-13)
    np.testing.assert_allclose(gradient, xt.grad.numpy(), rtol=1e-13)


@pytest.mark.parametrize("target", TARGETS)
def test_a_k_larger_than_the_dim_is_refused_by_name(target):
    fn = ug.function(lambda x: ug.topk(x, 4, axis=0))
    with pytest.raises(ug.ShapeError, match=r"topk: k=4 is larger than axis 0 of .*3.*"
                                            r"k <= 3"):
        run_on(target, fn, np.ones((3, 5)))


@pytest.mark.parametrize("target", TARGETS)
def test_a_negative_k_is_refused_by_name(target):
    fn = ug.function(lambda x: ug.topk(x, -1))
    with pytest.raises(ug.ShapeError, match=r"topk: k=-1 must be an int >= 0"):
        run_on(target, fn, np.ones((3, 5)))


@pytest.mark.parametrize("target", TARGETS)
def test_open_dims_run_and_an_open_axis_is_refused_by_name(target):
    """Dims left open by input_spec besides the axis (a batch, two of them) run on every
    target (the rows counted when the program runs), k=0 too; a trace (static targets) with
    the axis's dim open (k cannot be checked) is refused, naming the function and the
    shape; eagerly every dim is known and the call runs."""
    x = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    batch = ug.function(lambda x: ug.topk(x, 2), input_spec=[ug.Spec((None, 3), "float64")])
    values, indices = run_on(target, batch, x)
    np.testing.assert_array_equal(values, _want(x, 2, -1, True)[0])
    np.testing.assert_array_equal(indices, _want(x, 2, -1, True)[1])
    cube = np.arange(24.0).reshape(2, 3, 4)[:, :, ::-1]
    middle = ug.function(lambda x: ug.topk(x, 1, axis=0, largest=False)[0],
                         input_spec=[ug.Spec((2, None, 4), "float64")])
    np.testing.assert_array_equal(run_on(target, middle, cube), _want(cube, 1, 0, False)[0])
    two = ug.function(lambda x: ug.topk(x, 2)[0],
                      input_spec=[ug.Spec((None, None, 4), "float64")])
    np.testing.assert_array_equal(run_on(target, two, cube), _want(cube, 2, -1, True)[0])
    none = ug.function(lambda x: ug.topk(x, 0)[0],
                       input_spec=[ug.Spec((None, None, 4), "float64")])
    assert run_on(target, none, cube).shape == (2, 3, 0)
    along = ug.function(lambda x: ug.topk(x, 1, axis=0)[0],
                        input_spec=[ug.Spec((None, 3), "float64")])
    if target.endswith(":eager"):
        np.testing.assert_array_equal(run_on(target, along, x), _want(x, 1, 0, True)[0])
        return
    with pytest.raises(ug.ShapeError, match=r"ug.topk: axis 0 of the shape \[None, 3\]"):
        run_on(target, along, x)
