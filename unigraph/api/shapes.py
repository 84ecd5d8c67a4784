"""Shape ops: reshape, transpose, concat, stack, squeeze, expand_dims, broadcast_to, take
(a gather), one_hot, and those composed from them (flatten, flip, tile, pad).
"""

from __future__ import annotations

import numpy as np

from unigraph.api.creation import full, full_like
from unigraph.api.elementwise import cast, where
from unigraph.api.operands import (
    _axes,
    _axis,
    _docs_from_records,
    _known_shape,
    _promote,
    _tensor_or_array,
    unchanged,
    zero_d_axis,
)
from unigraph.dispatch import apply
from unigraph.dtypes import as_dtype, is_int
from unigraph.errors import ShapeError
from unigraph.ops.shape import resolved_shape
from unigraph.shape_checks import check_size, shape_check_error
from unigraph.tensor import Tensor
from unigraph.tracing import user_source


def reshape(x, shape):
    """`x` with a new shape; one dimension may be -1."""
    x = _tensor_or_array(x)
    if not isinstance(shape, int) and any(d is None for d in shape):
        # (x.shape[i] of a dim left open by input_spec is None while tracing)
        raise ShapeError(
            f"ug.reshape at {user_source()}: the new shape {list(shape)} has a None, the size "
            "of a dim known only when the program runs (left open by input_spec); write -1 "
            "for it (at most one dim), e.g. ug.reshape(x, (-1, 3))")
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one dimension may be -1, got {list(shape)}")
    if None in x.shape:  # a dim known only at run time (input_spec): -1 is resolved then
        return apply("reshape", [x], {"shape": shape})
    shape = resolved_shape(tuple(x.shape), shape)
    if shape == tuple(x.shape):
        return unchanged(x)
    return apply("reshape", [x], {"shape": shape})


def transpose(x, perm=None):
    """Permute dimensions (default: reverse them)."""
    x = _tensor_or_array(x)
    ndim = len(x.shape)
    perm = tuple(reversed(range(ndim))) if perm is None else tuple(_axis(p, ndim, "transpose")
                                                                   for p in perm)
    if perm == tuple(range(ndim)):
        return unchanged(x)
    return apply("transpose", [x], {"perm": perm})


def concat(xs, axis=0):
    """Join tensors along an existing axis."""
    xs = _promote(*xs)
    return apply("concat", xs, {"axis": _axis(axis, len(xs[0].shape), "concat")})


def stack(xs, axis=0):
    """Join tensors along a new axis."""
    xs = _promote(*xs)
    return apply("stack", xs, {"axis": _axis(axis, len(xs[0].shape) + 1, "stack")})


def squeeze(x, axis=None):
    """Remove size-1 dimensions (all of them when `axis` is None)."""
    x = _tensor_or_array(x)
    if axis is None:
        unknown = [i for i, d in enumerate(x.shape) if d is None]
        if unknown:
            # Eagerly each size-1 dim goes; a trace cannot tell whether an open dim will be
            # 1, and the result's rank must be known: refused, not guessed.
            dims = ", ".join("None" if d is None else str(d) for d in x.shape)
            raise ShapeError(
                f"ug.squeeze at {user_source()}: x is [{dims}], and the size of "
                f"{'axis' if len(unknown) == 1 else 'axes'} {', '.join(map(str, unknown))} "
                "is known only when the program runs (left "
                "open by input_spec), so which dims are 1 is not known while tracing; name "
                "the axes to remove: ug.squeeze(x, axis=...)")
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    elif zero_d_axis(axis, len(x.shape)):  # NumPy's: a 0-d x unchanged
        axes = ()
    else:
        axes = _axes(axis, len(x.shape), "squeeze")
    if not axes:
        return unchanged(x)  # nothing to squeeze (the record never sees an empty axis)
    return apply("squeeze", [x], {"axis": axes})


def ensure_shape(x, shape, message=None):
    """x, unchanged, when its shape has the sizes `shape` gives (None: any size there); a
    dim that input_spec left open is then known while tracing and checked when the program
    runs, on every target: a `ControlFlowShapeError` (a ShapeError) with `message` (by
    default the call's line) and the shape it had.

    >>> ug.ensure_shape(x, (1, None))  # x [None, 3] in the trace: [1, 3]
    """
    x = _tensor_or_array(x)
    shape = tuple(None if d is None else int(d) for d in shape)
    if message is None:
        message = (f"ug.ensure_shape at {user_source()}: the tensor must have shape "
                   f"{[d for d in shape]} (None: any size)")
    if len(shape) != len(x.shape) or any(want is not None and got is not None and want != got
                                         for want, got in zip(shape, x.shape)):
        raise shape_check_error(message, x.shape if None not in x.shape else None)
    if not any(want is not None and got is None for want, got in zip(shape, x.shape)):
        return unchanged(x)  # every dim it names is known, and right: nothing to check
    return apply("ensure_shape", [x], {"shape": shape, "message": message})


def ensure_size(x, minimum, axis=None, message=None):
    """x, unchanged, when its dims `axis` (an int or a tuple; None: all) hold at least
    `minimum` elements together; else a `ShapeError` with `message` (by default the call's
    line) and x's shape: while tracing where those dims are known, and when the program
    runs where input_spec left one open, on every target, as eagerly.

    >>> ug.ensure_size(x, 2, axis=0)  # x [None, 3]: a run with 1 row raises
    """
    x = _tensor_or_array(x)
    axes = tuple(range(len(x.shape))) if axis is None else _axes(axis, len(x.shape),
                                                                 "ensure_size")
    if message is None:
        message = (f"ug.ensure_size at {user_source()}: the tensor's axes {list(axes)} must "
                   f"hold at least {int(minimum)} elements")
    attrs = {"axes": axes, "minimum": int(minimum), "message": message}
    if None not in [x.shape[a] for a in axes]:
        # every size known (eagerly, or given by input_spec): the record's rule checks now
        check_size(x, **attrs)
        return unchanged(x)
    return apply("ensure_size", [x], attrs)


def expand_dims(x, axis):
    """Insert a size-1 dimension at `axis`, or at each of a tuple of axes (positions in the
    result, as NumPy's)."""
    x = _tensor_or_array(x)
    if isinstance(axis, int | np.integer):
        return apply("expand_dims", [x], {"axis": _axis(axis, len(x.shape) + 1, "expand_dims")})
    rank = len(x.shape) + len(axis)
    axes = [_axis(a, rank, "expand_dims") for a in axis]
    if len(set(axes)) < len(axes):
        raise ShapeError(f"expand_dims: axis {tuple(axis)} at {user_source()} names one "
                         "position twice; name each new axis once")
    for a in sorted(axes):  # (in increasing order, each lands where the result has it)
        x = apply("expand_dims", [x], {"axis": a})
    return x


def broadcast_to(x, shape):
    x = _tensor_or_array(x)
    shape = tuple(int(d) for d in shape)
    if shape == tuple(x.shape):
        return unchanged(x)
    return apply("broadcast_to", [x], {"shape": shape})


def _wide_indices(indices):
    """int8/uint8/int16 indices as int64: no framework gathers with them (torch, TF, Paddle
    and ONNX take int32/int64 indices); the positions are the same."""
    if indices.dtype in ("int8", "uint8", "int16"):
        if isinstance(indices, np.ndarray):
            return indices.astype(np.int64)
        return apply("cast", [indices], {"dtype": "int64"})
    return indices


def take(x, indices, axis=0):
    """Gather entries of `x` along `axis` at integer `indices`; a negative index counts from
    the end, as in NumPy (-1 is the last).

    Example::

        >>> ug.take([10, 20, 30], [2, -1, 0])
        [30, 30, 10]
    """
    x = _tensor_or_array(x)
    if axis is None:  # NumPy's: over the flattened x
        x, axis = reshape(x, (-1,)), 0
    axis = _axis(axis, len(x.shape), "take")
    if isinstance(indices, list | tuple):
        from unigraph.tensor import as_array

        indices = as_array(indices, what="ug.take's indices")
        if indices.size == 0:  # `[]` reads as float32; NumPy's take of no indices is empty
            indices = indices.astype(np.int64)
    indices = _wide_indices(_tensor_or_array(indices))
    size = x.shape[axis]
    if isinstance(indices, np.ndarray):
        if size is not None and indices.dtype.kind in "iu":
            indices = np.where(indices < 0, indices + size, indices)  # known now: no ops
        elif indices.dtype.kind == "i" and (indices < 0).any():
            raise IndexError(
                f"ug.take at {user_source()}: a negative index ({int(indices.min())}) along "
                f"axis {axis}, whose size is known only when the program runs (left open "
                "by input_spec), cannot be counted from the end while tracing; use "
                "non-negative indices, x[i] for one index (resolved when it runs), or give "
                "the dim its size in input_spec")
    elif is_int(indices.dtype):
        # The op takes [0, n): map the negative ones (three ops, on every target), with
        # the size the program runs with where input_spec leaves the dim open.
        if size is None:
            size = cast(_run_time_size(x, axis), indices.dtype)
        indices = where(indices < 0, indices + size, indices)
    return apply("take", [x, indices], {"axis": axis})


def _ones_of(t):
    """int64 ones of t's shape, whatever its values (x == x is False for a NaN)."""
    return where(apply("equal", [t, t], {}), np.int64(1), np.int64(1))


def _run_time_size(x, axis: int):
    """The size of `axis` of x as an int64 scalar, known when the program runs (a dim left
    open by input_spec): the count of ones along it. The other axes are summed away first,
    so an empty one leaves a line of zeros of that size, not an empty line."""
    others = tuple(i for i in range(len(x.shape)) if i != axis)
    line = apply("sum", [_ones_of(x)], {"axis": others, "keepdims": False}) if others \
        else x
    return apply("sum", [_ones_of(line)], {"axis": (0,), "keepdims": False})


def run_time_positions(x, axis: int):
    """0, 1, ..., n - 1 as int64, n the size of `axis` of x when the program runs (a dim
    left open by input_spec): the running count of ones along it, less one."""
    others = tuple(i for i in range(len(x.shape)) if i != axis)
    line = apply("sum", [_ones_of(x)], {"axis": others, "keepdims": False}) if others \
        else x
    return apply("cumsum", [_ones_of(line)], {"axis": 0}) - np.int64(1)


gather = take


def one_hot(indices, depth, dtype="float32"):
    """`indices.shape + (depth,)` tensor with ones at the indices."""
    return apply("one_hot", [_wide_indices(_tensor_or_array(indices))],
                 {"depth": int(depth), "dtype": as_dtype(dtype)})


def flatten(x, start_axis=0, end_axis=-1):
    """x with the axes start_axis..end_axis merged into one (default: all, a 1-D result);
    a `reshape`.

    Example::

        >>> ug.flatten([[1, 2], [3, 4]])
        [1, 2, 3, 4]
    """
    x = _tensor_or_array(x)
    if not x.shape:
        return reshape(x, (1,))
    start = _axis(start_axis, len(x.shape), "flatten")
    end = _axis(end_axis, len(x.shape), "flatten")
    return merge_axes(x, start, end + 1)


def merge_axes(x, start: int, stop: int):
    """x with its axes start..stop-1 merged into one, a `reshape`. Dims left open by
    input_spec are one -1 there where one suffices: the merged axis where they are all
    among the merged, else the one open dim's own place. Open dims that would need two -1s
    (one merged, one kept, or two kept) take their sizes when the program runs
    (`reshape_to_sizes`)."""
    shape = tuple(x.shape)
    start = start + len(shape) if start < 0 else start
    open_dims = [i for i, d in enumerate(shape) if d is None]
    merged_open = [i for i in open_dims if start <= i < stop]
    if len(open_dims) - len(merged_open) + bool(merged_open) > 1:
        sizes = [_run_time_size(x, i) if d is None else d for i, d in enumerate(shape)]
        merged = np.prod([d for d in shape[start:stop] if d is not None], dtype=np.int64)
        for i in merged_open:
            merged = merged * sizes[i]
        return reshape_to_sizes(x, sizes[:start] + [merged] + sizes[stop:])
    if merged_open:
        merged = -1
    else:
        merged = int(np.prod(shape[start:stop], dtype=np.int64))
    kept = tuple(-1 if d is None else d for d in shape)
    return reshape(x, kept[:start] + (merged,) + kept[stop:])


def reshape_as(t, x):
    """t (of x's element count) laid out as x's shape: a dim input_spec leaves open is the
    reshape's -1, several are `reshape_to_sizes` of x's sizes counted when it runs."""
    if tuple(x.shape).count(None) < 2:
        return reshape(t, tuple(-1 if d is None else d for d in x.shape))
    return reshape_to_sizes(t, [_run_time_size(x, i) if d is None else d
                                for i, d in enumerate(x.shape)])


def reshape_to_sizes(x, sizes):
    """x laid out as `sizes`: each an int known while tracing or an int64 scalar computed
    when the program runs (`_run_time_size` of a dim left open by input_spec), which a
    reshape's one -1 cannot say where two are open. One `reshape` with a sizes input: the
    vector of all sizes, the known ones as constants."""
    known = tuple(None if isinstance(d, Tensor) else int(d) for d in sizes)
    if None not in known:
        return reshape(x, known)
    vector = concat([reshape(d, (1,)) if isinstance(d, Tensor) else np.array([d], np.int64)
                     for d in sizes])
    return apply("reshape", [x, vector], {"shape": known})


unsqueeze = expand_dims


def flip(x, axis=None):
    """x reversed along `axis` (an int, a tuple, or None: every axis); a `take` with the
    reversed positions, or along an axis left open by input_spec the op `flip`.

    Example::

        >>> ug.flip([[1, 2], [3, 4]], axis=1)
        [[2, 1], [4, 3]]
    """
    x = _tensor_or_array(x)
    axes = range(len(x.shape)) if axis is None else _axes(axis, len(x.shape), "flip")
    open_axes = ()
    for a in axes:
        size = x.shape[a]
        if size is None:
            open_axes += (a,)
        else:
            x = take(x, np.arange(size - 1, -1, -1), axis=a)
    if open_axes:  # sizes known only when the program runs: the op `flip`
        x = apply("flip", [x], {"axes": open_axes})
    return x


def tile(x, reps):
    """x repeated `reps[i]` times along axis i, as NumPy's tile (a shorter `reps` applies
    to the last axes; a longer one adds leading axes); a `take` per repeated axis (along
    an axis left open by input_spec, a `concat` of the copies).

    Example::

        >>> ug.tile([1, 2], 2)
        [1, 2, 1, 2]
    """
    x = _tensor_or_array(x)
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(int(r) for r in reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps {reps} at {user_source()} has a negative count; each "
                         "must be >= 0 (0 leaves that axis empty)")
    if len(reps) > len(x.shape):
        added = len(reps) - len(x.shape)
        if None in x.shape:  # a reshape could leave only one dim open
            for _ in range(added):
                x = expand_dims(x, 0)
        else:
            x = reshape(x, (1,) * added + tuple(x.shape))
    reps = (1,) * (len(x.shape) - len(reps)) + reps
    for a, r in enumerate(reps):
        if r == 1:
            continue
        size = x.shape[a]
        if size is None and r > 0:  # a size known only when the program runs: r copies
            x = concat([x] * r, axis=a)
        else:
            x = take(x, np.tile(np.arange(size or 0), r), axis=a)
    return x


def _pad_widths(pad_width, rank: int) -> list:
    if np.size(pad_width) == 0:  # (NumPy refuses it too: `pad_width` must be integral)
        raise ValueError(f"pad: widths {pad_width!r} at {user_source()} are empty; give an "
                         "int, a (before, after) pair, or one pair per axis")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64).reshape(-1, 2)
                             if np.ndim(pad_width) else np.full((1, 2), pad_width), (rank, 2))
    if (widths < 0).any():
        raise ValueError(f"pad: widths {pad_width!r} at {user_source()} must be >= 0")
    return [tuple(int(w) for w in pair) for pair in widths]


def _open_pad_block(x, axis: int, width: int, value):
    """`width` entries of `value` along `axis` with x's other dims, where x has a dim left
    open by input_spec: a `full_like` of x summed to one entry along `axis`, repeated."""
    one = apply("sum", [full_like(x, 0, "float32")], {"axis": (axis,), "keepdims": True})
    return take(full_like(one, value, x.dtype), np.zeros(width, np.int64), axis=axis)


def _no_edge(axis: int, pad_width) -> str:
    return (f"pad at {user_source()}: mode='edge' with widths {pad_width!r} repeats the first "
            f"and last entries of axis {axis}, but that axis is empty (size 0), so it has no "
            "edge to repeat; pad an empty axis with mode='constant', or skip the pad when "
            "the axis is empty")


def _open_edge(x, axis: int, end: int, width: int, pad_width):
    """`width` copies of x's entry `end` (0: the first, -1: the last) along `axis`, left open
    by input_spec: that entry, checked when the program runs to be there (an empty axis
    raises pad's error, as eagerly, on every target), repeated."""
    at = (slice(None),) * axis + (slice(end, end + 1 or None),)
    shape = tuple(x.shape[:axis]) + (1,) + tuple(x.shape[axis + 1:])
    entry = ensure_shape(x[at], shape, message=_no_edge(axis, pad_width))
    return take(entry, np.zeros(width, np.int64), axis=axis)


def pad(x, pad_width, mode="constant", value=0):
    """x padded as NumPy's pad: `pad_width` an int, a (before, after) pair, or one pair per
    axis; `mode` "constant" (with `value`; `concat` with `full` blocks), "reflect" (mirror
    without the edge; each width below the axis size) or "edge" (repeat the edge); the
    last two are one `take` per padded axis. A dim left open by input_spec takes any mode
    but "reflect" along it (its widths are checked against the size).

    Example::

        >>> ug.pad([1, 2, 3], (2, 1), mode="reflect")
        [3, 2, 1, 2, 3, 2]
    """
    x = _tensor_or_array(x)
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad: mode {mode!r} at {user_source()}; use 'constant', 'reflect' "
                         "or 'edge'")
    for axis, (before, after) in enumerate(_pad_widths(pad_width, len(x.shape))):
        if not before and not after:
            continue
        shape = tuple(x.shape)
        size = shape[axis]
        if mode == "constant":
            if None in shape:  # (no block of width 0: Paddle's Program lost its open dims)
                parts = [_open_pad_block(x, axis, before, value) if before else None, x,
                         _open_pad_block(x, axis, after, value) if after else None]
            else:
                parts = [full(shape[:axis] + (w,) + shape[axis + 1:], value, x.dtype)
                         for w in (before, after)]
                parts.insert(1, x)
            x = concat([part for part in parts if part is not None], axis=axis)
            continue
        if size is None and mode == "edge":  # the size known only when the program runs
            ends = [_open_edge(x, axis, 0, before, pad_width) if before else None, x,
                    _open_edge(x, axis, -1, after, pad_width) if after else None]
            x = concat([end for end in ends if end is not None], axis=axis)
            continue
        if size is None:  # reflect: each width must be below the size, unknown here
            _known_shape(x, "pad(mode='reflect') along an open axis")  # raises
        if mode == "reflect" and (before >= size or after >= size):
            raise ValueError(f"pad: reflect widths ({before}, {after}) at {user_source()} "
                             f"must be below the size {size} of axis {axis}")
        if mode == "edge" and size == 0:
            raise ShapeError(_no_edge(axis, pad_width))
        if mode == "reflect":
            positions = [*range(before, 0, -1), *range(size), *range(size - 2, size - 2 - after,
                                                                      -1)]
        else:
            positions = [0] * before + list(range(size)) + [size - 1] * after
        x = take(x, np.asarray(positions, dtype=np.int64), axis=axis)
    return x


_docs_from_records(reshape, transpose, concat, stack, squeeze, expand_dims, broadcast_to,
                   one_hot, ensure_shape)
