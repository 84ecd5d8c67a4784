"""Indexing a dim left open by `input_spec` (its size n known only when the program runs)
as eagerly, on all 9 targets (and onnxruntime, forward), forward and gradient, at run sizes
below, at and past the bounds (0, 1, 2, 5, 7 rows).

A slice bound is resolved when the program runs, as Python's: a negative one counts from
the end, then both are clamped to 0..n (x[-7:] of 2 rows is both rows). An int index i is a
`take` (of i; of rows 0 and -i - 1 of x[i:] for a negative i, the first kept) whose
run-time check refuses one outside [-n, n) with `IndexOutOfRangeError`, as eagerly, naming
the op, the index, n and the user's line. (The static targets refused x[-2:], x[:-1] and
x[0] there with an IndexError asking for non-negative bounds or the dim's size; before
that they refused x[:, :1] too, and TF's graph targets took 2**63 - 1 as an int32 end.)
Where the size is known, the graph is as before: a slice (and a squeeze), no take.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import IndexOutOfRangeError

SPEC = [ug.Spec((None, 5), "float32")]
INDICES = {
    "[:, :1]": np.s_[:, :1],
    "[1:]": np.s_[1:],
    "[:2]": np.s_[:2],
    "[::2, 1:4]": np.s_[::2, 1:4],
    "[1::3]": np.s_[1::3],
    "[10:]": np.s_[10:],
    "[3:1]": np.s_[3:1],
    "[..., 2]": np.s_[..., 2],
    "[None, :, 4]": np.s_[None, :, 4],
    "[-2:]": np.s_[-2:],
    "[:-1]": np.s_[:-1],
    "[1:-1]": np.s_[1:-1],
    "[-7:]": np.s_[-7:],
    "[-7:-5]": np.s_[-7:-5],
    "[-2:-3]": np.s_[-2:-3],
    "[-3::2, -2:]": np.s_[-3::2, -2:],
    "[2:-7]": np.s_[2:-7],
    "[-1:1]": np.s_[-1:1],
    "[0]": np.s_[0],
    "[-1]": np.s_[-1],
    "[1, 1:]": np.s_[1, 1:],
    "[-2, :-1]": np.s_[-2, :-1],
    "[None, -1, 2]": np.s_[None, -1, 2],
}
ROWS = (0, 1, 2, 5, 7)  # the open dim's size at run time: below, at and past the bounds


def _rows(rows):
    return np.arange(rows * 5, dtype=np.float32).reshape(rows, 5) - 7


@pytest.mark.parametrize("name", list(INDICES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_an_open_dim_is_indexed_as_numpy_does(target, name):
    index = INDICES[name]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(lambda x: x[index], input_spec=SPEC)
        grad = ug.function(lambda x: ug.grad(lambda x: ug.sum(x[index] * x[index]))(x),
                           input_spec=SPEC)
        for rows in ROWS:
            x = _rows(rows)
            try:
                expected = x[index]  # NumPy's own indexing of the same index
            except IndexError:  # an int outside [-n, n): refused, as eagerly
                with pytest.raises(IndexError):
                    forward(x)
                continue
            out = np.asarray(forward(x))
            assert out.shape == expected.shape, rows
            np.testing.assert_array_equal(out, expected, err_msg=f"{rows} rows")
            if target in INFERENCE_TARGETS:
                continue
            want = np.zeros_like(x)
            want[index] = 2 * expected
            np.testing.assert_array_equal(np.asarray(grad(x)), want, err_msg=f"{rows} rows")


def _index_5(x):
    return x[5]


def _index_minus_3(x):
    return x[-3]


def _index_0(x):
    return x[0]


def _index_minus_1_in_grad(x):
    return ug.grad(lambda v: ug.sum(v[-1] ** 2))(x)


# The user's index and the dim's size, as eagerly: the static targets named the take of row
# 0 of the empty x[-3:-2] ("index 0 is out of range for size 0"), and eager targets raised a
# plain IndexError without the line.
_OUT_OF_RANGE = [
    (_index_5, 2, "index 5 is out of range for size 2"),
    (_index_minus_3, 2, "index -3 is out of range for size 2"),
    (_index_0, 0, "index 0 is out of range for size 0"),
    (_index_minus_1_in_grad, 0, "index -1 is out of range for size 0"),
]


@pytest.mark.parametrize("target, fn, rows, words", [
    (target, *case) for target in FORWARD_TARGETS for case in _OUT_OF_RANGE
    if not (case[0] is _index_minus_1_in_grad and target in INFERENCE_TARGETS)  # forward only
])
def test_an_int_index_outside_an_open_dim_is_refused_as_eagerly(target, fn, rows, words):
    t = Target.parse(target)
    x = _rows(rows)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(fn, input_spec=SPEC)
        with pytest.raises(IndexError) as caught:
            run(x)
    assert isinstance(caught.value, IndexOutOfRangeError), repr(caught.value)
    assert f"take on {target} at " in str(caught.value)
    assert "test_open_dim_slices.py:" in str(caught.value)  # the user's line
    assert words in str(caught.value)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_take_from_an_open_dim_of_size_0_is_refused(target):
    """Paddle's gather in a Program, and onnxruntime's error wording, missed this: a take
    from nothing read zeros (paddle:static) or was not recognised (onnxruntime)."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(lambda x: ug.take(x, np.array([0, 1])), input_spec=SPEC)
        np.testing.assert_array_equal(np.asarray(run(_rows(2))), _rows(2))
        with pytest.raises(IndexOutOfRangeError, match="is out of range for size 0"):
            run(_rows(0))


def _ops(spec, index):
    graph = ug.function(lambda x: x[index], input_spec=[spec]).trace(_rows(3))
    return [node.op for node in graph.nodes]


@pytest.mark.parametrize("name, known, open_", [
    ("[-1]", ["slice", "squeeze"], ["slice", "constant", "take"]),
    ("[0]", ["slice", "squeeze"], ["constant", "take"]),
    ("[-2:]", ["slice"], ["slice"]),
    ("[1:-1]", ["slice"], ["slice"]),
    ("[1, 1:]", ["slice", "squeeze"], ["slice", "constant", "take"]),
    # rows 0 and 1 of x[-2:], the first kept: the check of row 1 names n (index_checks)
    ("[-2, :-1]", ["slice", "squeeze"], ["slice", "constant", "take", "slice", "squeeze"]),
    ("[None, -1, 2]", ["slice", "squeeze", "expand_dims"],
     ["slice", "constant", "take", "squeeze", "expand_dims"]),
])
def test_the_graph_is_as_before_where_the_size_is_known(name, known, open_):
    assert _ops(ug.Spec((3, 5), "float32"), INDICES[name]) == known
    assert _ops(SPEC[0], INDICES[name]) == open_


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_take_along_an_open_dim_matches_numpy_with_repeats(target):
    """The take paddle:static makes along an axis of unknown size (index_select): the same
    rows, and a gradient summed over repeated indices."""
    index = np.array([[1, 1], [0, 1]])
    t = Target.parse(target)
    x = _rows(3)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(lambda x: ug.take(x, index), input_spec=SPEC)
        np.testing.assert_array_equal(np.asarray(run(x)), x[index])
        if target in INFERENCE_TARGETS:
            return
        grad = ug.function(lambda x: ug.grad(lambda v: ug.sum(ug.take(v, index) ** 2))(x),
                           input_spec=SPEC)
        want = np.zeros_like(x)
        np.add.at(want, index, 2 * x[index])
        np.testing.assert_array_equal(np.asarray(grad(x)), want)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_negative_take_index_along_an_open_dim_names_the_fix(target):
    """ug.take(x, [-1]) along a dim left open: eagerly the size is known and -1 is the last
    row; a static trace cannot count from an end it does not know, and said so at run time
    with a wrong index ("index -3 is out of range for size 2"). Now refused while tracing,
    naming the fix."""
    t = Target.parse(target)
    x = _rows(2)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(lambda x: ug.take(x, np.array([1, -1])), input_spec=SPEC)
        if t.mode == "eager":
            np.testing.assert_array_equal(np.asarray(run(x)), x[[1, -1]])
            return
        with pytest.raises(IndexError, match=r"negative index \(-1\) along axis 0.*input_spec"):
            run(x)
