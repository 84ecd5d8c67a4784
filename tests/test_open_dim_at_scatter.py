"""x.at[...].set/add and ug.scatter of a tensor with a dim `input_spec` leaves open, on all 9
targets (and onnxruntime, forward): they run and agree with eager, forward and gradient, at
two run-time sizes (0 where an empty dim is meaningful), and an index outside the size the
program runs with raises take's IndexOutOfRangeError there, as eagerly.

Before, every static target refused them while tracing ("has a dim known only at run time;
this function needs every dim"), the most common open-dim limit of the random tester's
sweeps (seed 12201): programs eager ran and static refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

ROWS = ug.Spec((None, 2), "float32")
LINE = ug.Spec((None,), "float32")
BLOCKS = ug.Spec((None, 4, 2), "float32")

CASES = {
    # name: (spec, the update, the two run-time sizes of the open dim)
    "scatter rows, repeated and negative": (
        ROWS, lambda x: ug.scatter(x, [1, -1, 1], ug.sum(x, axis=0) * 0.5), (3, 2)),
    "scatter columns, rows open": (
        ROWS, lambda x: ug.scatter(x, np.array([1, 0]), ug.max(x, axis=1, keepdims=True),
                                   axis=1), (3, 0)),
    "scatter add, rank-2 indices": (
        ROWS, lambda x: ug.scatter(x, np.array([[0, 1], [1, 1]]), 2.0, axis=1,
                                   reduction="add"), (3, 0)),
    "scatter_add of a line": (
        LINE, lambda x: ug.scatter_add(x, [0, 2, -1], x[:3] * 2.0), (4, 3)),
    "at an int, set": (ROWS, lambda x: x.at[1].set(7.0), (3, 2)),
    "at an int list, add": (ROWS, lambda x: x.at[[0, -1, 0]].add(x[0] * 3.0), (3, 1)),
    "at a column list after a full slice, set": (
        ROWS, lambda x: x.at[:, [1, 1]].set(ug.ones((2,)) * 5.0), (3, 0)),
    "at a traced scalar, set": (ROWS, lambda x: x.at[ug.argmax(x[:, 0])].set(-1.0), (3, 1)),
    "at traced indices, add": (ROWS, lambda x: x.at[ug.argmax(x, axis=1)].add(2.0), (3, 0)),
    "at rows, a slice and an int, set": (
        BLOCKS, lambda x: x.at[:, 1:3, 0].set(x[:, 0, 1:2] * 2.0), (3, 0)),
    "at rows, repeated ints and a slice, add": (
        BLOCKS, lambda x: x.at[:, [0, 3, 0], ::-1].add(x[:, :1, :]), (2, 0)),
    "at rows, a mask of the known dims, add": (
        BLOCKS, lambda x: x.at[:, np.array([True, False, False, True])].add(1.5), (3, 1)),
}


def _input(spec, size):
    shape = tuple(size if d is None else d for d in spec.shape)
    return (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 0.75 - 1.0)


def _cases():
    return [pytest.param(name, size, id=f"{name}, size {size}")
            for name, (_, _, sizes) in CASES.items() for size in sizes]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case,size", _cases())
def test_the_update_of_an_open_dim_runs_and_agrees(target, case, size):
    spec, update, _ = CASES[case]
    x = _input(spec, size)
    expected = run_on("numpy:eager", ug.function(update), x)
    got = run_on(target, ug.function(update, input_spec=[spec]), x)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case,size", _cases())
def test_its_gradient_agrees(target, case, size):
    spec, update, _ = CASES[case]

    def loss(x):
        return ug.sum(update(x) * x)

    x = _input(spec, size)
    expected = run_on("numpy:eager", ug.function(ug.grad(loss)), x)
    got = run_on(target, ug.function(ug.grad(loss), input_spec=[spec]), x)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)


OUT_OF_RANGE = {
    # name: (the update, the run-time rows; the index is outside them when it runs)
    "scatter": (lambda x: ug.scatter(x, [0, 3], 1.0), 3),
    "scatter, negative": (lambda x: ug.scatter(x, [-4], 1.0, reduction="add"), 3),
    "at an int list": (lambda x: x.at[[1, 2]].add(1.0), 2),
    "at an int, no rows": (lambda x: x.at[0].set(1.0), 0),
}


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_an_index_outside_the_run_size_is_refused(target, case):
    """Eagerly x.at[...] of indices known while tracing raises an IndexError when called
    (NumPy's words: 'out of bounds'); with the dim open, take's error when it runs."""
    update, rows = OUT_OF_RANGE[case]
    x = _input(ROWS, rows)
    where = r"test_open_dim_at_scatter.py:\d+: index -?\d+ is out of (range|bounds) "
    with pytest.raises(IndexError, match=where + f".*size {rows}"):
        run_on("numpy:eager", ug.function(update), x)
    with pytest.raises(IndexError, match=where + f".*size {rows}"):
        run_on(target, ug.function(update, input_spec=[ROWS]), x)
