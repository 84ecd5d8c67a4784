"""Shape ops: they move, copy or reverse elements, and never change a value (picking by
position is in `indexing`, making tensors from attrs in `creation`).

Attrs arrive normalised by the frontend: non-negative axes, no -1 in `reshape`.
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import (
    check_axis,
    dims_conflict,
    fmt,
    grad_for,
    merge_dim,
    normal,
    require_int,
    require_same_dtype,
    unbroadcast,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register
from unigraph.shape_checks import check as check_shape
from unigraph.shape_checks import check_size


def _size(shape):
    """Number of elements, or None if a dim is unknown."""
    return None if None in shape else int(np.prod(shape, dtype=np.int64))


def resolved_shape(known: tuple, shape: tuple) -> tuple:
    """`shape` with its -1 (if any) resolved for a tensor of the `known` shape, or the
    `ShapeError` eager raises where its size does not divide (`ug.reshape`, and a static
    run's check of a reshape of a dim left open by `input_spec`, unigraph/shape_checks.py).

    >>> resolved_shape((3, 4), (-1, 2))  # (6, 2)
    """
    if -1 not in shape:
        return shape
    size = int(np.prod(known))
    divisor = int(np.prod([d for d in shape if d != -1]))
    if divisor == 0 or size % divisor:
        raise ShapeError(f"reshape: cannot reshape {list(known)} into {list(shape)}")
    return tuple(size // divisor if d == -1 else d for d in shape)


def _reshape_infer(x, sizes=None, *, shape):
    shape = tuple(shape)
    if sizes is not None:
        return _reshape_to_sizes_infer(x, sizes, shape)
    if None in x.shape and shape.count(-1) == 1 and all(d is not None for d in shape):
        # x has a dim known only at run time (an input_spec's None): the one -1 is resolved
        # by the framework when the graph runs, and is unknown here.
        if any(d < -1 for d in shape):
            raise ShapeError(f"reshape: target shape {shape} must hold sizes >= 0 and one -1")
        return TensorSpec(tuple(None if d == -1 else d for d in shape), x.dtype)
    if any(d is None or d < 0 for d in shape):
        raise ShapeError(f"reshape: target shape {shape} must hold known sizes >= 0 (no -1)")
    if _size(x.shape) is not None and _size(x.shape) != _size(shape):
        raise ShapeError(
            f"reshape: cannot reshape {fmt(x)} ({_size(x.shape)} elements) to {list(shape)} "
            f"({_size(shape)} elements); the number of elements must stay the same"
        )
    return TensorSpec(shape, x.dtype)


def _reshape_to_sizes_infer(x, sizes, shape):
    """The form with a `sizes` input: the target sizes are an int64 vector computed when
    the program runs (from dims input_spec leaves open: a flatten keeping one open dim and
    merging another needs two of them, which one -1 cannot say); `shape` holds the sizes
    known while tracing and None for the others."""
    require_int("reshape", "sizes", sizes)
    if len(sizes.shape) != 1 or sizes.shape[0] not in (None, len(shape)):
        raise ShapeError(f"reshape: sizes {fmt(sizes)} must be a vector of {len(shape)} "
                         f"sizes, one per dim of the target shape {list(shape)}")
    if any(d is not None and d < 0 for d in shape):
        raise ShapeError(f"reshape: target shape {list(shape)} must hold sizes >= 0 or None")
    return TensorSpec(shape, x.dtype)


def _reshape_reference(x, sizes=None, *, shape):
    return np.reshape(x, tuple(shape) if sizes is None else tuple(int(d) for d in sizes))


register(OpDef(
    name="reshape",
    infer=_reshape_infer,
    reference=_reshape_reference,
    vjp=lambda g, inputs, out, *, shape: [grad_for(g.reshape(inputs[0].shape), inputs[0])]
    + [None] * (len(inputs) - 1),
    differentiable_inputs=(0,),
    doc="The elements of x in row-major order, laid out as `shape` (no -1: the frontend "
        "resolves it, except over a dim of x known only at run time, where one -1 stays). "
        "With a second input `sizes` (int64, one per target dim, computed when the program "
        "runs from dims left open by input_spec), the layout is `sizes` and `shape` holds "
        "the dims known while tracing (None for the others).",
    example="ug.reshape([1, 2, 3, 4, 5, 6], (2, -1))  # [[1, 2, 3], [4, 5, 6]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 6)),), {"shape": (3, 4)}),
        Sample((normal(rng, (2, 3, 4)),), {"shape": (24,)}),
        Sample((normal(rng, (5,)),), {"shape": (1, 5, 1)}),
        Sample((normal(rng, (2, 3, 4)), np.array([6, 4])), {"shape": (None, 4)}),
    ],
))


def _transpose_infer(x, *, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(
            f"transpose: perm {tuple(perm)} is not a permutation of the {len(x.shape)} axes "
            f"of {fmt(x)} (list each of 0..{len(x.shape) - 1} once)"
        )
    return TensorSpec(tuple(x.shape[p] for p in perm), x.dtype)


register(OpDef(
    name="transpose",
    infer=_transpose_infer,
    reference=lambda x, *, perm: np.transpose(x, perm),
    vjp=lambda g, inputs, out, *, perm: [
        grad_for(np.transpose(g, np.argsort(perm)), inputs[0])
    ],
    doc="x with its axes reordered: output axis i is input axis perm[i].",
    example="ug.transpose([[1, 2, 3], [4, 5, 6]])  # [[1, 4], [2, 5], [3, 6]]",
    samples=lambda rng: [
        Sample((normal(rng, (3, 4)),), {"perm": (1, 0)}),
        Sample((normal(rng, (2, 3, 4)),), {"perm": (2, 0, 1)}),
    ],
))


def _named(specs):
    return {f"xs[{i}]": spec for i, spec in enumerate(specs)}


def _concat_infer(*xs, axis):
    if not xs:
        raise ShapeError("concat: needs at least one tensor")
    dtype = require_same_dtype("concat", _named(xs))
    check_axis("concat", xs[0], axis)
    shape = list(xs[0].shape)
    shape[axis] = 0
    for spec in xs:
        mismatch = len(spec.shape) != len(shape) or any(
            dims_conflict(d, shape[i]) for i, d in enumerate(spec.shape) if i != axis
        )
        if mismatch:
            listed = ", ".join(fmt(s) for s in xs)
            raise ShapeError(
                f"concat: shapes {listed} differ outside axis {axis} (all dims but the "
                "concatenated one must match)"
            )
        for i, d in enumerate(spec.shape):
            if i == axis:
                shape[i] = None if d is None or shape[i] is None else shape[i] + d
            else:
                shape[i] = merge_dim(shape[i], d)
    return TensorSpec(tuple(shape), dtype)


def _concat_vjp(g, inputs, out, *, axis):
    bounds = np.cumsum([x.shape[axis] for x in inputs])[:-1]
    parts = np.split(g, bounds, axis=axis)
    return [grad_for(part, x) for part, x in zip(parts, inputs, strict=True)]


register(OpDef(
    name="concat",
    infer=_concat_infer,
    reference=lambda *xs, axis: np.concatenate(xs, axis=axis),
    vjp=_concat_vjp,
    doc="The tensors joined along an existing `axis`; every other dim must match.",
    example="ug.concat([ug.tensor([1, 2]), ug.tensor([3])])  # [1, 2, 3]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3)), normal(rng, (4, 3))), {"axis": 0}),
        Sample((normal(rng, (2, 1)), normal(rng, (2, 3)), normal(rng, (2, 2))), {"axis": 1}),
        Sample((normal(rng, (3,)),), {"axis": 0}),
    ],
))


def _stack_infer(*xs, axis):
    if not xs:
        raise ShapeError("stack: needs at least one tensor")
    dtype = require_same_dtype("stack", _named(xs))
    shape = list(xs[0].shape)
    check_axis("stack", xs[0], axis, rank=len(shape) + 1)
    for spec in xs:
        if len(spec.shape) != len(shape) or any(map(dims_conflict, spec.shape, shape)):
            listed = ", ".join(fmt(s) for s in xs)
            raise ShapeError(f"stack: shapes {listed} differ (stack needs equal shapes)")
        shape = [merge_dim(a, b) for a, b in zip(shape, spec.shape, strict=True)]
    shape.insert(axis, len(xs))
    return TensorSpec(tuple(shape), dtype)


def _stack_vjp(g, inputs, out, *, axis):
    return [grad_for(np.take(g, i, axis=axis), x) for i, x in enumerate(inputs)]


register(OpDef(
    name="stack",
    infer=_stack_infer,
    reference=lambda *xs, axis: np.stack(xs, axis=axis),
    vjp=_stack_vjp,
    doc="Equal-shaped tensors joined along a new `axis` (0 <= axis <= rank).",
    example="ug.stack([ug.tensor([1, 2]), ug.tensor([3, 4])], axis=1)  # [[1, 3], [2, 4]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3)), normal(rng, (2, 3))), {"axis": 0}),
        Sample((normal(rng, (2, 3)), normal(rng, (2, 3)), normal(rng, (2, 3))), {"axis": 2}),
    ],
))


def _squeeze_infer(x, *, axis):
    if not axis:  # ug.squeeze returns x for nothing to squeeze: no backend reads axis=()
        raise ShapeError(f"squeeze: no axis to squeeze in {fmt(x)}; the node is x itself")
    for a in axis:
        check_axis("squeeze", x, a)
        if x.shape[a] not in (1, None):
            raise ShapeError(
                f"squeeze: axis {a} of {fmt(x)} has size {x.shape[a]}, not 1 (only size-1 "
                "axes can be squeezed)"
            )
    return TensorSpec(tuple(d for i, d in enumerate(x.shape) if i not in axis), x.dtype)


def _ensure_shape_infer(x, *others, shape, message):
    shape = tuple(shape)
    for value in (x, *others):
        if len(shape) != len(value.shape) or any(
                want is not None and got is not None and want != got
                for want, got in zip(shape, value.shape)):
            raise ShapeError(f"ensure_shape: {fmt(value)} can never have shape {list(shape)}")
    return TensorSpec(tuple(got if want is None else want for want, got in zip(shape, x.shape)),
                      x.dtype)


register(OpDef(
    name="ensure_shape",
    infer=_ensure_shape_infer,
    reference=check_shape,
    vjp=lambda g, inputs, out, *, shape, message: [g] + [None] * (len(inputs) - 1),
    doc="x, unchanged, when its shape (and each other input's: a while_loop's variable, "
        "checked with its body's result) has the sizes `shape` gives (None: any size "
        "there), its shape then known; else a ShapeError (`ControlFlowShapeError`) with "
        "`message` and the shape, when the program runs (unigraph/shape_checks.py).",
    example="ug.ensure_shape([[1.0, 2.0]], (None, 2))  # [[1.0, 2.0]]",
    samples=lambda rng: [
        Sample((normal(rng, (1, 3)),), {"shape": (1, 3), "message": "a check"}),
        Sample((normal(rng, (2, 3)),), {"shape": (None, 3), "message": "a check"}),
        Sample((normal(rng, (2, 3)), normal(rng, (2, 1))), {"shape": (2, None),
                                                            "message": "a check"}),
    ],
    differentiable_inputs=(0,),
))


def _ensure_size_infer(x, *, axes, minimum, message, multiple=1):
    check_size(x, axes=axes, minimum=minimum, message=message, multiple=multiple)
    return TensorSpec(x.shape, x.dtype)


register(OpDef(
    name="ensure_size",
    infer=_ensure_size_infer,
    reference=check_size,
    vjp=lambda g, inputs, out, *, axes, minimum, message, multiple=1: [g],
    doc="x, unchanged, when its dims `axes` hold at least `minimum` elements together (their "
        "product), a multiple of `multiple` (an optional attr, 1 by default); else a "
        "ShapeError with `message` and x's shape: while tracing where those dims are known, "
        "and where `input_spec` leaves one open, when the program runs, "
        "before it (unigraph/shape_checks.py, RULE_CHECKED). BatchNorm's training mode "
        "needs 2 values per channel.",
    example="ug.ensure_size([[1.0], [2.0]], 2, axis=0)  # [[1.0], [2.0]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3, 1, 1)),), {"axes": (0, 2, 3), "minimum": 2,
                                              "message": "a check"}),
        Sample((normal(rng, (1, 3)),), {"axes": (1,), "minimum": 3, "message": "a check"}),
    ],
))


register(OpDef(
    name="squeeze",
    infer=_squeeze_infer,
    reference=lambda x, *, axis: np.squeeze(x, axis=axis),
    vjp=lambda g, inputs, out, *, axis: [grad_for(g.reshape(inputs[0].shape), inputs[0])],
    doc="x without the size-1 axes listed in `axis` (a tuple; every listed axis must be 1).",
    example="ug.squeeze([[1, 2, 3]], axis=0)  # [1, 2, 3]",
    samples=lambda rng: [
        Sample((normal(rng, (1, 3, 1)),), {"axis": (0, 2)}),
        Sample((normal(rng, (2, 1, 3)),), {"axis": (1,)}),
    ],
))


def _expand_dims_infer(x, *, axis):
    check_axis("expand_dims", x, axis, rank=len(x.shape) + 1)
    return TensorSpec(x.shape[:axis] + (1,) + x.shape[axis:], x.dtype)


register(OpDef(
    name="expand_dims",
    infer=_expand_dims_infer,
    reference=lambda x, *, axis: np.expand_dims(x, axis),
    vjp=lambda g, inputs, out, *, axis: [grad_for(g.reshape(inputs[0].shape), inputs[0])],
    doc="x with a new size-1 axis at position `axis` (0 <= axis <= rank).",
    example="ug.expand_dims([1, 2], 1)  # [[1], [2]]",
    samples=lambda rng: [
        Sample((normal(rng, (2, 3)),), {"axis": 0}),
        Sample((normal(rng, (2, 3)),), {"axis": 2}),
    ],
))


def _broadcast_to_infer(x, *, shape):
    shape = tuple(shape)
    offset = len(shape) - len(x.shape)
    bad = offset < 0 or any(
        d != 1 and dims_conflict(d, shape[offset + i]) for i, d in enumerate(x.shape)
    )
    if bad:
        raise ShapeError(
            f"broadcast_to: cannot broadcast {fmt(x)} to {list(shape)} (each dim of x, aligned "
            "from the right, must be 1 or equal the target's)"
        )
    return TensorSpec(shape, x.dtype)


register(OpDef(
    name="broadcast_to",
    infer=_broadcast_to_infer,
    # A copy, not NumPy's read-only view: a result must be an ordinary array.
    reference=lambda x, *, shape: np.array(np.broadcast_to(x, shape)),
    vjp=lambda g, inputs, out, *, shape: [grad_for(unbroadcast(g, inputs[0].shape), inputs[0])],
    doc="x repeated along new leading axes and along its size-1 axes to `shape` "
        "(NumPy broadcasting). Gradient: summed back over the repeats.",
    example="ug.broadcast_to([1, 2], (2, 2))  # [[1, 2], [1, 2]]",
    samples=lambda rng: [
        Sample((normal(rng, (3, 1)),), {"shape": (2, 3, 4)}),
        Sample((normal(rng, (4,)),), {"shape": (3, 4)}),
    ],
))


def _flip_infer(x, *, axes):
    for axis in axes:
        check_axis("flip", x, axis)
    return TensorSpec(x.shape, x.dtype)


register(OpDef(
    name="flip",
    infer=_flip_infer,
    reference=lambda x, *, axes: np.flip(x, axes).copy(),
    vjp=lambda g, inputs, out, *, axes: [grad_for(np.flip(g, axes).copy(), inputs[0])],
    doc="x reversed along each of `axes` (the framework's own reverse, so a dim left open "
        "by input_spec needs no size). ug.flip makes this op along the open axes, a `take` "
        "of the reversed positions along the others. Gradient: g reversed the same way.",
    example="ug.flip([[1, 2], [3, 4]], axis=1)  # [[2, 1], [4, 3]]",
    samples=lambda rng: [
        Sample((normal(rng, (3, 4)),), {"axes": (1,)}),
        Sample((normal(rng, (2, 3, 4)),), {"axes": (0, 2)}),
        Sample((np.array([4, 0, 2]),), {"axes": (0,)}),
        Sample((normal(rng, (0, 2)),), {"axes": (0, 1)}),
    ],
))
