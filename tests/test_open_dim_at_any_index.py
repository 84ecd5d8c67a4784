"""x.at[index].set/add(v) of a tensor with dims input_spec leaves open, at an index that
picks along an open dim or beside an open dim other than the first (a mask, slices or ints
along several axes), on all 9 targets and onnxruntime:static: the flat position of each
element, counted when the program runs, is indexed as x would be, and those positions are
a scatter into x (index_update's `_update_open_positions`). Values, gradients and an index
outside the run's size agree with eager. (Before, every static target refused these while
tracing: "...needs every dim".)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

MASK = np.array([[True, False, True, False]] * 3)

CASES = {
    # name: (program of x and v, input_spec shape of x; x runs as [rows, 4])
    "int_along_open_cols": (lambda x, v: x.at[:, 1].set(v), (3, None)),
    "slice_along_open_rows": (lambda x, v: x.at[1:].add(v), (None, 4)),
    "ints_along_two_open": (lambda x, v: x.at[0, 2].set(v), (None, None)),
    "negative_ints": (lambda x, v: x.at[-1, -2].add(v), (None, None)),
    "mask": (lambda x, v: x.at[MASK].set(v), (None, 4)),
    "slices_both_open": (lambda x, v: x.at[:2, 1:3].set(v * 2), (None, None)),
    "repeated_rows_add": (lambda x, v: x.at[[0, 0, 2], 1].add(v), (None, None)),
    "strided_cols": (lambda x, v: x.at[..., ::2].set(v), (3, None)),
}


def _x(rows=3):
    return np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) / 4 - 1


V = np.float32(0.75)


def _specs(shape):
    return [ug.Spec(shape, "float32"), ug.Spec((), "float32")]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_update_runs_as_eagerly(target, case):
    program, shape = CASES[case]
    expected = run_on("numpy:eager", ug.function(program), _x(), V)
    out = run_on(target, ug.function(program, input_spec=_specs(shape)), _x(), V)
    assert out.shape == expected.shape == (3, 4)
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(out, _x())  # (the update wrote something)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("rows", [0, 1])
def test_open_rows_that_the_slice_leaves_empty(target, rows):
    program = CASES["slice_along_open_rows"][0]
    out = run_on(target, ug.function(program, input_spec=_specs((None, 4))), _x(rows), V)
    np.testing.assert_array_equal(out, _x(rows))  # x[1:] of 0 or 1 rows holds nothing


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_gradients_of_x_and_the_value_agree(target, case):
    program, shape = CASES[case]

    def loss(x, v):
        out = program(x * x, v * v)
        return ug.sum(out * ug.cumsum(out, axis=1))

    grads = ug.grad(loss, argnums=(0, 1))
    expected = run_on("numpy:eager", ug.function(grads), _x(), V)
    got = run_on(target, ug.function(grads, input_spec=_specs(shape)), _x(), V)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert np.abs(expected[1]) > 0


def beyond_the_rows(x, v):
    return x.at[5, 1].set(v)


def beyond_the_cols(x, v):
    return x.at[1, -9].add(v)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("program", [beyond_the_rows, beyond_the_cols])
def test_an_index_outside_the_run_size_is_eagers_error(target, program):
    """Eagerly an IndexError naming the line; a static run's is take's IndexOutOfRangeError
    (an IndexError) naming the same line, raised when the program runs."""
    line = f"{__file__.rsplit('/', 1)[-1]}:{program.__code__.co_firstlineno + 1}"
    with pytest.raises(IndexError, match=line):
        run_on(target, ug.function(program, input_spec=_specs((None, None))), _x(), V)
