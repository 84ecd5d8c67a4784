"""Control flow whose values have a dim that `input_spec` leaves open, on all 9 targets.

A while_loop variable and its body's value, one of a known dim and the other of an open
one: a variable made [1, 3] inside the function whose body gives `v + x` with x [None, 3],
or a variable that enters as x [None, 3] whose body gives [1, 3] (the random tester's
"open-dim refusal", seed 5004: "float32[2, None] before the loop but float32[2, 2] after
the loop body"). Eagerly it runs when x has one row (each iteration's result must have the
loop variables' first shapes) and raises ControlFlowError naming the loop's line when it
has two; a loop that runs no iteration checks nothing. Every static target refused such a
program while tracing. Now the body's value and the variable it replaces are checked when
the body runs (`ug.ensure_shape`, unigraph/shape_checks.py): the same result, or the same
error (`ControlFlowShapeError`: a ControlFlowError and a ShapeError) with the line.

A traced ug.cond whose paths give [None, 3] and [1, 3] gave the open dim (ed0fd7c), and a
static run returned the open path's value where eagerly the branch not taken, traced,
raises. Now the open path's value is checked against the other's known dims when it runs,
and the cond's value is [1, 3]. (Where the known path is taken, eagerly the open path not
taken still raises; a static call checks that path's shape for its inputs' shapes before
it runs: tests/test_open_dim_cond_untaken.py.) A Python `if` under autograph checks no
branch it does not take, eagerly: every target returns the taken path's value.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError, ShapeError

SPECS = [ug.Spec((None, 3), "float32")]
ONE = np.array([[1.0, -2.0, 3.5]], np.float32)  # sum > 0
TWO = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
W = np.array([[0.5, -1.0, 2.0]], np.float32)


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(marker))


def with_while(x):
    v = ug.tensor(np.zeros((1, 3), np.float32))
    i = ug.tensor(np.int64(0))
    i, v = ug.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + x), (i, v))  # while
    return v * 3.0


def with_python_while(x):
    v = ug.tensor(np.zeros((1, 3), np.float32))
    i = ug.tensor(np.int64(0))
    while i < 2:  # python while
        v = v + x
        i = i + 1
    return v * 3.0


def with_open_entry(x, times=2):
    i = ug.tensor(np.int64(0))
    def body(i, v):
        return i + 1, ug.sum(v, axis=0, keepdims=True) * 2.0

    i, v = ug.while_loop(lambda i, v: i < times, body, (i, x))  # open entry
    return v * 3.0


def with_python_open_entry(x):
    i = ug.tensor(np.int64(0))
    v = x
    while i < 2:  # python open entry
        v = ug.sum(v, axis=0, keepdims=True) * 2.0
        i = i + 1
    return v * 3.0


def with_cond(x):
    z = ug.tensor(W)
    out = ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0)  # cond
    return out * 3.0


def with_if(x):
    z = ug.tensor(W)
    if ug.sum(x) > 0.0:
        out = x * 2.0
    else:
        out = z - 1.0
    return out * 3.0


# program, the marker of its loop's line, the factor of x in its result (one row)
LOOPS = {"ug.while_loop": (with_while, "# while", 6.0),
         "while": (with_python_while, "# python while", 6.0),
         "ug.while_loop, open entry": (with_open_entry, "# open entry", 12.0),
         "while, open entry": (with_python_open_entry, "# python open entry", 12.0)}


def _weighted(program):
    def loss(x):
        return ug.sum(program(x) * W)
    return loss


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_variable_and_its_body_of_a_known_and_an_open_dim(target, loop):
    program, marker, factor = LOOPS[loop]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(program, input_spec=SPECS)
        both = ug.function(ug.value_and_grad(_weighted(ug.function(program))),
                           input_spec=SPECS)
        got = forward(ONE)
        assert got.shape == (1, 3)
        np.testing.assert_array_equal(got.numpy(), ONE * factor)
        value, grad = both(ONE)
        np.testing.assert_allclose(value.numpy(), np.sum(ONE * factor * W), rtol=1e-6)
        np.testing.assert_allclose(grad.numpy(), W * factor, rtol=1e-6)
        # eagerly the body's result against the loop variables' first shapes; a static run
        # the body's check (the same class of error, the loop's line)
        with pytest.raises(ShapeError, match=rf"test_open_dim_control_flow\.py:"
                                             rf"{_line(marker)}.* float32\[1, 3\] ") as caught:
            forward(TWO)
        assert isinstance(caught.value, ControlFlowError)


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_that_runs_no_iteration_checks_nothing(target):
    """Eagerly only an iteration's result is checked: a loop that never runs its body
    returns its variables whatever their shapes, on every target."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(lambda x: with_open_entry(x, times=0), input_spec=SPECS)
        np.testing.assert_array_equal(forward(TWO).numpy(), TWO * 3.0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_cond_of_an_open_path_taken_and_a_known_one(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(with_cond, input_spec=SPECS)
        both = ug.function(ug.value_and_grad(_weighted(with_cond)), input_spec=SPECS)
        for x in (ONE, -ONE * 4.0):  # each path
            want = (x * 2.0 if x.sum() > 0 else W - 1.0) * 3.0
            got = forward(x)
            assert got.shape == (1, 3)
            np.testing.assert_array_equal(got.numpy(), want)
            value, grad = both(x)
            np.testing.assert_allclose(value.numpy(), np.sum(want * W), rtol=1e-6)
            np.testing.assert_allclose(grad.numpy(), W * 6.0 if x.sum() > 0 else 0.0 * W,
                                       rtol=1e-6)
        # the open path taken with two rows: eagerly the other path's [1, 3] (traced), in a
        # static run the open path's check
        with pytest.raises(ShapeError, match=rf"cond at .*test_open_dim_control_flow\.py:"
                                             rf"{_line('# cond')}: value 0 ") as caught:
            forward(TWO)
        assert isinstance(caught.value, ControlFlowError)


@pytest.mark.parametrize("target", TARGETS)
def test_a_python_if_checks_no_path_it_does_not_take(target):
    """Eagerly autograph's `if` runs the branch taken and nothing else: with two rows the
    open path's value, on every target."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(with_if, input_spec=SPECS)
        both = ug.function(ug.value_and_grad(_weighted(ug.function(with_if))),
                           input_spec=SPECS)
        np.testing.assert_array_equal(forward(TWO).numpy(), TWO * 6.0)
        np.testing.assert_array_equal(forward(-ONE).numpy(), (W - 1.0) * 3.0)
        value, grad = both(ONE)
        np.testing.assert_allclose(value.numpy(), np.sum(ONE * 6.0 * W), rtol=1e-6)
        np.testing.assert_allclose(grad.numpy(), W * 6.0, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_ensure_shape(target):
    """The op the checks are: x itself where the sizes agree, its dim known in the trace;
    else the error with the message, when the program runs."""
    t = Target.parse(target)
    seen = {}

    def program(x):
        y = ug.ensure_shape(x, (1, None), message="one row")
        seen["shape"] = tuple(y.shape)
        return y + 1.0

    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(program, input_spec=SPECS)
        np.testing.assert_array_equal(forward(ONE).numpy(), ONE + 1.0)
        assert seen["shape"] == (1, 3)
        with pytest.raises(ShapeError, match=r"^one row; when the program ran it had "):
            forward(TWO)
