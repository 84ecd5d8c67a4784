"""ug.split along an axis input_spec leaves open (or of a tensor with an open dim elsewhere),
on all 9 targets and onnxruntime:static: split points are slices resolved when the program
runs, n equal pieces takes of the axis's positions laid out as [n, -1]; values and gradients
agree with eager, and a count that does not divide the run's size is a ShapeError naming
the line, as eagerly. (Before, every static target refused split of a tensor with any open
dim while tracing: "...needs every dim".)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

CASES = {
    # name: (program, input_spec shape, run shape)
    "halves_of_open_rows": (lambda x: ug.split(x, 2, axis=0), (None, 3), (4, 3)),
    "one_piece": (lambda x: ug.split(x, 1, axis=0), (None, 3), (3, 3)),
    "thirds_of_no_rows": (lambda x: ug.split(x, 3, axis=0), (None, 3), (0, 3)),
    "points": (lambda x: ug.split(x, [1, 3], axis=0), (None, 3), (5, 3)),
    "points_past_the_size": (lambda x: ug.split(x, [1, 3], axis=0), (None, 3), (2, 3)),
    "a_negative_point": (lambda x: ug.split(x, [-2], axis=0), (None, 3), (5, 3)),
    # NumPy's pieces x[:3], x[3:-4] (empty) and x[-4:]: each point resolved on its own
    "points_of_both_signs": (lambda x: ug.split(x, [3, -4], axis=0), (None, 3), (5, 3)),
    "known_axis_beside_an_open_one": (lambda x: ug.split(x, 3, axis=1), (None, 3), (2, 3)),
    "two_open_dims": (lambda x: ug.split(x, 2, axis=1), (None, None), (2, 4)),
}


def _x(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 4 - 1


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_split_runs_as_eagerly(target, case):
    program, spec, shape = CASES[case]
    expected = run_on("numpy:eager", ug.function(program), _x(shape))
    out = run_on(target, ug.function(program, input_spec=[ug.Spec(spec, "float32")]),
                 _x(shape))
    assert len(out) == len(expected)
    for piece, want in zip(out, expected, strict=True):
        assert piece.shape == want.shape
        np.testing.assert_array_equal(piece, want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_its_gradient_agrees(target, case):
    program, spec, shape = CASES[case]

    def loss(x):
        pieces = program(x * x)
        return ug.sum(ug.stack([ug.sum(p * (i + 1.0)) for i, p in enumerate(pieces)]))

    expected = run_on("numpy:eager", ug.function(ug.grad(loss)), _x(shape))
    got = run_on(target, ug.function(ug.grad(loss), input_spec=[ug.Spec(spec, "float32")]),
                 _x(shape))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def halves(x):
    return ug.split(x, 2, axis=0)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_count_that_does_not_divide_is_eagers_error(target):
    line = f"{__file__.rsplit('/', 1)[-1]}:{halves.__code__.co_firstlineno + 1}"
    with pytest.raises(ShapeError, match=line):
        run_on(target, ug.function(halves, input_spec=[ug.Spec((None, 3), "float32")]),
               _x((5, 3)))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("points", [[-2], [-4, 3], [-1, -3], [3, -4, 2]])
def test_negative_points_as_numpy(target, points):
    """Each split point is resolved on its own, as NumPy's: [-4, 3] of 5 rows gives pieces
    of 1, 2 and 2 rows (before: a piece after a negative point ran from the wrong start)."""
    x = _x((5, 3))
    program = ug.function(lambda x: ug.split(x, points, axis=0),
                          input_spec=[ug.Spec((None, 3), "float32")])
    out = run_on(target, program, x)
    expected = np.split(x, points, axis=0)
    assert [piece.shape for piece in out] == [piece.shape for piece in expected]
    for piece, want in zip(out, expected, strict=True):
        np.testing.assert_array_equal(piece, want)
