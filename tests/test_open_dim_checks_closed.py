"""The run-time shape checks of control flow over dims `input_spec` leaves open (unigraph/
shape_checks.py), where two targets had gaps, on all 9 targets and onnxruntime:static.

onnxruntime:static checked by a Reshape of the value to the known dims: two open dims whose
sizes trade places ([3, 2] where [2, 3] is known) kept the element count and passed, giving
a value of another shape than the trace's where every other target raises
`ControlFlowShapeError`; and a while_loop variable that enters the loop open was not
checked (the Reshape took only the body's value). Now the check compares the run's Shape
with the known dims. paddle:static's message said "another shape" (its Assert carried no
data; an Assert's data is printed to stdout, not into the error); now the check is a reshape
to -2 - each size, whose error prints that shape, and the message names it, as on the
other targets; onnxruntime:static's check, a Reshape to -2s, printed no shape either: now
a Reshape to each size + 1, whose error prints the value's shape.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS
from test_open_dim_control_flow import TWO, _weighted, with_open_entry, with_while

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError, ShapeError

OPEN = [ug.Spec((None, None), "float32")]
KNOWN = np.arange(6, dtype=np.float32).reshape(2, 3)  # sum > 0
SWAPPED = np.arange(6, dtype=np.float32).reshape(3, 2)


def with_cond(x):
    z = ug.tensor(KNOWN)
    return ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0) * 3.0


def with_ensure_shape(x):
    return ug.ensure_shape(x, (2, 3), message="two by three") + 1.0


PROGRAMS = {"ug.cond": (with_cond, r"^cond at .*: value 0 ", KNOWN * 6.0),
            "ug.ensure_shape": (with_ensure_shape, r"^two by three; ", KNOWN + 1.0)}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_two_open_dims_whose_sizes_trade_places(target, program):
    function, message, want = PROGRAMS[program]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(function, input_spec=OPEN)
        np.testing.assert_array_equal(forward(KNOWN).numpy(), want)
        with pytest.raises(ShapeError, match=message) as caught:
            forward(SWAPPED)
        if program == "ug.cond":
            assert isinstance(caught.value, ControlFlowError)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_loop_variable_that_enters_open(target):
    """x [None, 3] enters the loop, the body gives [1, 3]: two rows are refused at the
    first iteration (eagerly the body's result against x's shape)."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(with_open_entry, input_spec=[ug.Spec((None, 3), "float32")])
        np.testing.assert_array_equal(forward(TWO[:1]).numpy(), TWO[:1] * 12.0)
        with pytest.raises(ShapeError, match=r"while_loop at .*float32\[1, 3\] ") as caught:
            forward(TWO)
        assert isinstance(caught.value, ControlFlowError)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_message_names_the_shape_the_run_gave(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(lambda x: ug.ensure_shape(x, (1, None), message="one row"),
                              input_spec=[ug.Spec((None, 3), "float32")])
        with pytest.raises(ShapeError, match=r"^one row; when the program ran it had "
                                             r"shape \[2, 3\]\.$"):
            forward(TWO)
        if target in INFERENCE_TARGETS:  # no gradients
            return
        # a loop's check in a gradient's program: the body's value [2, 3] (eagerly: the
        # iteration's result against the loop variable's first shape)
        both = ug.function(ug.value_and_grad(_weighted(ug.function(with_while))),
                           input_spec=[ug.Spec((None, 3), "float32")])
        with pytest.raises(ShapeError, match=r"^while_loop at .*(float32\[2, 3\] in the body"
                                             r"|when the program ran it had shape \[2, 3\]\.)"):
            both(TWO)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "bool"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_check_of_small_ints_and_bools(target, dtype):
    """paddle:static has no shape kernel for int16 (its check refused the program while
    tracing, a raw TypeError): the check reads an int32 copy's shape."""
    t = Target.parse(target)
    one = np.ones((1, 3), dtype)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(lambda x: ug.ensure_shape(x, (1, None), message="one row"),
                              input_spec=[ug.Spec((None, 3), dtype)])
        got = forward(one).numpy()
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, one)
        with pytest.raises(ShapeError, match=r"^one row; when the program ran it had "):
            forward(np.ones((2, 3), dtype))
