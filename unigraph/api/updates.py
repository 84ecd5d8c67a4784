"""Functional scatter: `ug.scatter` / `ug.scatter_add`, a copy of x with values written or
added at integer positions along one axis, the positions known only when the graph runs
(a traced int tensor) as well as when tracing. Built on the `scatter_add` record; "replace"
(the last write to a position wins) is that record and `where`, here, once for every
backend.
"""

from __future__ import annotations

import numpy as np

from unigraph.api.creation import full_like
from unigraph.api.elementwise import cast, equal, greater, logical_and, logical_not, where
from unigraph.api.operands import (
    _axis,
    _promote,
    _record_doc,
    _tensor_or_array,
    unchanged,
)
from unigraph.api.reductions import sum
from unigraph.api.shapes import (
    broadcast_to,
    expand_dims,
    merge_axes,
    reshape,
    run_time_positions,
    take,
)
from unigraph.dispatch import apply
from unigraph.dtypes import is_int
from unigraph.tensor import Tensor, tensor
from unigraph.tracing import user_source

REDUCTIONS = ("replace", "add")


def scatter(x, indices, updates, axis=0, reduction="replace"):
    """A copy of x with `updates` written (reduction "replace") or added ("add") at the
    integer `indices` along `axis`: for each position j of indices,
    out[..., indices[j], ..., ...] = updates[..., j, ...] — updates broadcast to the shape
    `ug.take(x, indices, axis)` has. Indices may be traced (known only at run time); a
    negative one counts from the end; one outside [-n, n) raises take's
    `IndexOutOfRangeError` on every target. A repeated index: "replace" keeps the last
    update, "add" sums them all. Gradients reach x (where nothing replaced it) and updates.

    Example::

        >>> ug.scatter([0.0, 0.0, 0.0, 0.0], [3, 1, 3], [1.0, 2.0, 5.0])
        [0.0, 2.0, 0.0, 5.0]
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"scatter: reduction={reduction!r} at {user_source()}; use "
                         "'replace' or 'add'")
    x = _tensor_or_array(x)
    rank = len(x.shape)
    axis = _axis(axis, rank, "scatter")
    indices = _indices(indices)
    if None in x.shape or None in indices.shape:
        return _open_scatter(x, indices, updates, axis, reduction)
    # The size along `axis` (the positions written) and the others (updates broadcast)
    size = x.shape[axis]
    # (How many positions: the updates are laid out by it.)
    count = int(np.prod(indices.shape, dtype=np.int64))
    dtype = x.dtype if isinstance(x, Tensor) else x.dtype.name
    (updates,) = _promote(updates)
    updates = updates if updates.dtype == dtype else cast(updates, dtype)
    lead, trail = tuple(x.shape[:axis]), tuple(x.shape[axis + 1:])
    updates = broadcast_to(updates, lead + tuple(indices.shape) + trail)
    updates = reshape(updates, lead + (count,) + trail)
    # take checks every index (one error, every target) and maps a negative one to n + i.
    positions = take(np.arange(size, dtype=np.int64), reshape(indices, (count,)))
    if reduction == "add":
        return _scatter_add(x, positions, updates, axis, dtype)
    if count == 0:
        return unchanged(x)
    later = np.triu(np.ones((count, count), dtype=bool), 1)
    return _last_write_wins(x, positions, updates, axis, dtype, later,
                            np.zeros(size, np.float32), np.ones(count, np.float32))


def _open_scatter(x, indices, updates, axis, reduction):
    """`scatter` where input_spec leaves a dim of x or of the indices open: the same ops,
    with the positions along `axis`, their count and the updates' broadcast made when the
    program runs (the out-of-range check is take's, at run time, as eagerly)."""
    dtype = x.dtype if isinstance(x, Tensor) else x.dtype.name
    if isinstance(indices, np.ndarray):  # a constant: a negative one is mapped when it runs
        indices = tensor(indices)
    # take checks every index (one error, every target) and maps a negative one to n + i.
    size = x.shape[axis]
    line = np.arange(size, dtype=np.int64) if size is not None else run_time_positions(x, axis)
    positions = take(line, indices if len(indices.shape) == 1 else reshape(indices, (-1,)))
    (updates,) = _promote(updates)
    updates = updates if updates.dtype == dtype else cast(updates, dtype)
    updates = broadcast_like(updates, take(x, indices, axis))
    if len(indices.shape) != 1:  # the updates laid out along the positions, one axis
        updates = merge_axes(updates, axis, axis + len(indices.shape))
    if reduction == "add":
        return _scatter_add(x, positions, updates, axis, dtype)
    # The pairs ordered by the positions' run-time order.
    order = run_time_positions(positions, 0)
    later = greater(expand_dims(order, 0), expand_dims(order, 1))
    zeros = np.zeros(size, np.float32) if size is not None else full_like(line, 0, "float32")
    return _last_write_wins(x, positions, updates, axis, dtype, later, zeros,
                            full_like(positions, 1, "float32"))


def _last_write_wins(x, positions, updates, axis, dtype, later, zeros, ones):
    """scatter's "replace" of `updates` (laid out along `axis` by `positions`): the last
    write wins, so each update that a later one to the same position replaces is dropped,
    the written positions of x zeroed and the rest added. `later[i, j]`: update j comes
    after update i; `zeros`, `ones`: float32 of x's size along `axis` and of the count."""
    trail = (1,) * (len(x.shape) - axis - 1)
    same = equal(expand_dims(positions, 1), expand_dims(positions, 0))
    replaced = greater(sum(cast(logical_and(same, later), "int32"), axis=1), 0)
    kept = where(reshape(logical_not(replaced), (1,) * axis + (-1,) + trail), updates, 0)
    written = greater(apply("scatter_add", [zeros, positions, ones], {"axis": 0}), 0)
    written = reshape(written, (1,) * axis + (-1,) + trail)
    return _scatter_add(where(written, 0, x), positions, kept, axis, dtype)


def broadcast_like(value, like):
    """`value` broadcast to the shape of `like`, read when the program runs (a dim left open
    by input_spec): a `where` over True of that shape."""
    return where(full_like(like, True, "bool"), value, value)


def scatter_add(x, indices, updates, axis=0):
    """`ug.scatter(x, indices, updates, axis, reduction="add")`: updates summed into a copy
    of x at the indices (repeats sum)."""
    return scatter(x, indices, updates, axis, reduction="add")


scatter_add.__doc__ = _record_doc("scatter_add", scatter_add.__doc__.strip())


def _indices(indices):
    if isinstance(indices, list | tuple):
        from unigraph.tensor import as_array

        indices = as_array(indices, what="ug.scatter's indices")
    indices = _tensor_or_array(indices)
    dtype = indices.dtype if isinstance(indices, Tensor) else indices.dtype.name
    if not is_int(dtype):
        raise IndexError(f"ug.scatter's indices at {user_source()} are {dtype}: index with "
                         "ints (cast floats first: ug.cast(i, 'int64'))")
    return indices


def _scatter_add(x, positions, updates, axis, dtype):
    if dtype == "bool":  # the record adds numbers: bools go through int32 and back
        out = apply("scatter_add", [cast(x, "int32"), positions, cast(updates, "int32")],
                    {"axis": axis})
        return cast(out, "bool")
    return apply("scatter_add", [x, positions, updates], {"axis": axis})
