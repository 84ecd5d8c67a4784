"""int32 and int64 `sum` and `prod` wrap on overflow as NumPy's, over any axes, on all 9
targets and onnxruntime:static: ONNX Runtime's integer ReduceSum and ReduceProd saturate
(sum([2**31 - 1, 1]) in int32 was 2**31 - 1, an int64 product past the range 2**63 - 1),
so the ONNX emitters take each axis through CumSum or a Loop of Mul
(`unigraph.onnx.integer_reductions`). The axes are taken one at a time there: several axes,
all axes, keepdims, a negative axis, an empty axis and an axis `input_spec` leaves open are
each checked against the op record's NumPy reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on

import unigraph as ug
from unigraph.ops import OPS

AXES = [((0,), False), ((1,), True), ((0, 2), False), (None, False), (None, True),
        ((-1,), False)]


def _grid(dtype):
    """[3, 2, 2]: sums and products that pass the dtype's range along every axis."""
    info = np.iinfo(dtype)
    return np.array([[[info.max, 3], [2, info.max]], [[5, -7], [info.min, 1]],
                     [[info.max, 1], [info.max - 1, info.min + 1]]], dtype)


def _reference(name, x, axis, keepdims):
    if axis is not None:
        axis = tuple(k % x.ndim for k in axis)
    return OPS[name].reference(x, axis=axis, keepdims=keepdims)


def _problems(target, name, x, fn, axis, keepdims, what):
    got, want = run_on(target, fn, x), _reference(name, x, axis, keepdims)
    if got.dtype != want.dtype or got.shape != want.shape or (got != want).any():
        return [f"{name}{what} axis={axis} keepdims={keepdims}: got {got.dtype} "
                f"{got.tolist()}, reference {want.dtype} {want.tolist()}"]
    return []


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", ["sum", "prod"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_integer_sum_and_prod_wrap_over_any_axes(target, name, dtype):
    reduce = getattr(ug, name)
    problems = []
    for axis, keepdims in AXES:
        fn = ug.function(lambda v, a=axis, k=keepdims: reduce(v, axis=a, keepdims=k))
        problems += _problems(target, name, _grid(dtype), fn, axis, keepdims, "")
    empty = np.zeros((2, 0, 3), dtype)  # sum 0, product 1
    for axis in [(1,), (0, 1), None]:
        fn = ug.function(lambda v, a=axis: reduce(v, axis=a))
        problems += _problems(target, name, empty, fn, axis, False, " of [2, 0, 3]")
    opened = ug.function(lambda v: reduce(v, axis=(0,)), input_spec=[ug.Spec((None, 2, 2), dtype)])
    problems += _problems(target, name, _grid(dtype), opened, (0,), False, " (dim 0 open)")
    assert not problems, "\n".join(problems)
