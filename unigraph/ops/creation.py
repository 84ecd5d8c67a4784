"""Creation ops: tensors made from attrs alone (a constant array, a shape filled with a
number) or from another tensor's shape, never from its values.
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import normal, require_dtype_name
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _constant_infer(*, value):
    value = np.asarray(value)
    return TensorSpec(value.shape, require_dtype_name("constant", value.dtype))


register(OpDef(
    name="constant",
    infer=_constant_infer,
    reference=lambda *, value: np.array(value),
    vjp=None,
    doc="The array `value` (a copy, so nothing downstream can change the attr).",
    example="ug.constant([1.5, 2.5])  # [1.5, 2.5]",
    samples=lambda rng: [
        Sample((), {"value": normal(rng, (2, 3))}),
        Sample((), {"value": np.array(3, dtype=np.int32)}),
    ],
))


def _full_infer(*, shape, value, dtype):
    shape = tuple(shape)
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ShapeError(f"full: shape {shape} must hold known sizes >= 0")
    if not isinstance(value, bool | int | float):
        raise ShapeError(f"full: value {value!r} must be a Python number or bool")
    return TensorSpec(shape, require_dtype_name("full", dtype))


register(OpDef(
    name="full",
    infer=_full_infer,
    reference=lambda *, shape, value, dtype: np.full(shape, value, dtype=dtype),
    vjp=None,
    doc="A tensor of `shape` filled with the number `value`, in `dtype` (default: float32 "
        "for a float, int64 for an int, bool for a bool). ug.zeros, ug.ones and the *_like "
        "functions are this op.",
    example="ug.full((2, 2), 7)  # [[7, 7], [7, 7]]",
    samples=lambda rng: [
        Sample((), {"shape": (2, 3), "value": 1.5, "dtype": "float32"}),
        Sample((), {"shape": (4,), "value": -3, "dtype": "int64"}),
        Sample((), {"shape": (), "value": True, "dtype": "bool"}),
        Sample((), {"shape": (3, 0), "value": 0.25, "dtype": "float64"}),
    ],
))


def _full_like_infer(x, *, value, dtype):
    if not isinstance(value, bool | int | float):
        raise ShapeError(f"full_like: value {value!r} must be a Python number or bool")
    return TensorSpec(x.shape, require_dtype_name("full_like", dtype))


register(OpDef(
    name="full_like",
    infer=_full_like_infer,
    reference=lambda x, *, value, dtype: np.full(x.shape, value, dtype=dtype),
    vjp=None,
    differentiable_inputs=(),  # (x's values are not read: no gradient flows to x)
    doc="A tensor of x's shape filled with the number `value`, in `dtype`; x's values are "
        "not read. ug.full_like, zeros_like and ones_like make this op where x has a dim "
        "known only at run time (left open by input_spec), the op `full` otherwise.",
    example="ug.full_like([1.0, 2.0], 3)  # [3.0, 3.0]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3)),), {"value": 1.5, "dtype": "float32"}),
        Sample((np.array([4, 0, 2]),), {"value": -3, "dtype": "int64"}),
        Sample((normal(rng, (3, 0)),), {"value": True, "dtype": "bool"}),
    ],
))
