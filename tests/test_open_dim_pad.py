"""ug.pad of a tensor with a dim `input_spec` leaves open, on all 9 targets and
onnxruntime:static: every static target refused it while tracing ("has a dim known only at
run time; this function needs every dim"), along the open axis or another, although eager
ran it. Now constant blocks are a `full_like` (of x summed to one entry along the axis)
repeated, an open axis's edges `take`s of x and of x flipped; known shapes as before.
"reflect" along an open axis is still refused (its widths must be below the size).

"edge" along an axis that is empty (size 0) has no edge to repeat: eagerly pad raised a bare
ValueError ("axis 0 is empty, it has no edge to repeat"), where the axis was left open every
static target raised an IndexOutOfRangeError naming `take`, which the user never called. Now
pad's own ShapeError on every target (an open axis's edge entry is checked when the program
runs, `ensure_shape`), naming the call, the widths, the axis and the fix.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

X = np.arange(6, dtype=np.float32).reshape(3, 2) * 0.5 - 1.0
SPECS = {"open": ug.Spec((None, 2), "float32"), "closed": ug.Spec((3, 2), "float32")}
CASES = {
    "constant, open axis": (((2, 1), (0, 0)), "constant"),
    "constant, both axes": (((1, 2), (3, 1)), "constant"),
    "edge, open axis": (((2, 1), (0, 0)), "edge"),
    "edge, both axes": (((1, 2), (1, 3)), "edge"),
    "reflect, known axis": (((0, 0), (1, 1)), "reflect"),
    # one side of width 0 (an asymmetric pool's pad): paddle:static lost the open dim of
    # the empty block (a raw InvalidArgumentError from concat)
    "constant, one side": (((0, 0), (0, 1)), "constant"),
    "constant, open axis one side": (((0, 2), (0, 0)), "constant"),
    "edge, one side": (((1, 0), (0, 1)), "edge"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_pad_of_an_open_dim_runs(target, dim, case):
    widths, mode = CASES[case]
    fn = ug.function(lambda x: ug.pad(x, widths, mode=mode, value=2.5), input_spec=[SPECS[dim]])
    kwargs = {"constant_values": 2.5} if mode == "constant" else {}
    np.testing.assert_array_equal(run_on(target, fn, X), np.pad(X, widths, mode, **kwargs))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_ints_pad_too(target):
    fn = ug.function(lambda x: ug.pad(ug.cast(x, "int32"), 1, value=7), input_spec=[SPECS["open"]])
    np.testing.assert_array_equal(run_on(target, fn, X), np.pad(X.astype(np.int32), 1,
                                                                constant_values=7))


@pytest.mark.parametrize("target", TARGETS)
def test_reflect_along_an_open_axis_names_the_fix(target):
    fn = ug.function(lambda x: ug.pad(x, 1, mode="reflect"), input_spec=[SPECS["open"]])
    if target.endswith(":eager"):
        np.testing.assert_array_equal(run_on(target, fn, X), np.pad(X, 1, "reflect"))
    else:
        with pytest.raises(ShapeError, match=r"pad\(mode='reflect'\) along an open axis: .*"
                           r"give that dim a size in input_spec"):
            run_on(target, fn, X)


def _loss(x, mode):
    padded = ug.pad(x, ((2, 1), (1, 1)), mode=mode)
    return ug.sum(padded * np.arange(24, dtype=np.float32).reshape(6, 4))


@pytest.mark.parametrize("mode", ["constant", "edge"])
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_numpy_eagers(target, dim, mode):
    grad = ug.function(lambda x: ug.grad(_loss)(x, mode), input_spec=[SPECS[dim]])
    want = run_on("numpy:eager", grad, X)
    np.testing.assert_array_equal(run_on(target, grad, X), want)


EMPTY = np.zeros((0, 2), np.float32)
EMPTY_SPECS = {"open": ug.Spec((None, 2), "float32"), "closed": ug.Spec((0, 2), "float32")}
NO_EDGE = (r"pad at .*test_open_dim_pad.py:\d+: mode='edge' with widths {} repeats the first "
           r"and last entries of axis 0, but that axis is empty \(size 0\), so it has no edge "
           r"to repeat; pad an empty axis with mode='constant', or skip the pad when the axis "
           r"is empty")


@pytest.mark.parametrize("widths", [((1, 0), (0, 0)), ((0, 2), (1, 1))], ids=["before", "after"])
@pytest.mark.parametrize("dim", list(EMPTY_SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_edge_of_an_empty_axis_is_pads_error(target, dim, widths):
    fn = ug.function(lambda x: ug.pad(x, widths, mode="edge"), input_spec=[EMPTY_SPECS[dim]])
    with pytest.raises(ShapeError, match=NO_EDGE.format(re.escape(repr(widths)))):
        run_on(target, fn, EMPTY)
