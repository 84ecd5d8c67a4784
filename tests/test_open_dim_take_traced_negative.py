"""`ug.take` and `x[i]` at traced int indices, some negative, along a dim `input_spec`
leaves open, on all 9 targets (and onnxruntime, forward): a negative index counts from the
end as eagerly, with the size the program runs with. ug.take mapped a negative index to
n + i only where the trace knew n, so every static target refused a valid index when the
program ran, naming another one ("index -3 is out of range for size 2" for the -1 the
program held; random tester seed 7003 on onnxruntime:static, a `ug.take(x, i % -2)` of
integer arithmetic). Indices outside [-n, n) are still refused on every target.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

WEIGHTS = np.array([0.5, -1.25, 2.0, 0.75], np.float32)

CASES = {
    # name: (x's shape, the take's axis, indices); the dims of x and the indices are open
    "columns": ((3, 2), 1, [-1, 0, -2, 1]),
    "rows": ((3, 2), 0, [-3, 2, -1]),
    "repeated, rank 2 indices": ((2, 4), 1, [[-1, 3], [-4, -1]]),
    "another dim empty": ((0, 3), 1, [-1, -3]),
    "one row": ((1, 2), 0, [-1, 0, -1]),
}


def _inputs(case):
    shape, _, indices = CASES[case]
    x = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape) / 4
    return x, np.array(indices, np.int32)


def _spec(case):
    shape, _, indices = CASES[case]
    return [ug.Spec((None,) * len(shape), "float32"),
            ug.Spec((None,) * np.ndim(indices), "int32")]


def _taken(x, i, axis, how):
    # i - 0 and i * 1: computed indices, as a program makes them (not only an input)
    if how == "getitem":
        return x[(slice(None),) * axis + (i * 1,)]
    return ug.take(x, i - 0, axis=axis)


# x[i] of rank-2 indices is the same take: only ug.take runs those
WAYS = [(case, how) for case in CASES for how in ("take", "getitem")
        if how == "take" or np.ndim(CASES[case][2]) == 1]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case,how", WAYS)
def test_a_traced_negative_index_along_an_open_dim_counts_from_the_end(target, case, how):
    _, axis, _ = CASES[case]
    program = ug.function(lambda x, i: _taken(x, i, axis, how), input_spec=_spec(case))
    x, i = _inputs(case)
    expected = np.take(x, i, axis=axis)
    got = run_on(target, program, x, i)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_its_gradient_adds_each_index_into_its_slice(target, case):
    _, axis, indices = CASES[case]
    weights = WEIGHTS[:np.size(indices)].reshape(np.shape(indices) + (1,) * (axis == 0))

    def loss(x, i):
        return ug.sum(ug.take(x, i - 0, axis=axis) * weights)

    program = ug.function(lambda x, i: ug.grad(loss)(x, i), input_spec=_spec(case))
    x, i = _inputs(case)
    expected = run_on("numpy:eager", ug.function(lambda x, i: ug.grad(loss)(x, i)), x, i)
    got = run_on(target, program, x, i)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("index", [-3, 2])
def test_an_index_outside_the_run_size_is_still_refused(target, index):
    program = ug.function(lambda x, i: ug.take(x, i - 0, axis=1),
                          input_spec=_spec("columns"))
    x, _ = _inputs("columns")
    with pytest.raises(ug.IndexOutOfRangeError, match="out of range for size 2"):
        run_on(target, program, x, np.array([0, index], np.int32))
