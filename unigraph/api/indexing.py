"""Indexing: `x[index]` (ints, slices, ..., None, one integer array, a boolean mask),
`ug.slice`, `ug.split`, and the functional updates `x.at[index].set/add` (`ug.index_update`).
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from unigraph.api.elementwise import cast, where
from unigraph.api.operands import (
    _axis,
    _promote,
    _tensor_or_array,
    unchanged,
)
from unigraph.api.shapes import (
    broadcast_to,
    ensure_shape,
    expand_dims,
    flatten,
    one_hot,
    reshape,
    reshape_as,
    run_time_positions,
    take,
)
from unigraph.api.updates import broadcast_like, scatter
from unigraph.dispatch import apply
from unigraph.dtypes import is_int
from unigraph.errors import ShapeError, TracingError
from unigraph.index_checks import TAKE, refuse
from unigraph.ops.indexing import TO_END
from unigraph.tensor import Tensor
from unigraph.tracing import user_source


def slice(x, begin, end, stride=None):
    """Static slice `x[begin:end:stride]` per dimension (resolved like Python slices).

    >>> ug.slice(ug.tensor([[1, 2, 3], [4, 5, 6]]), (0, 1), (2, 3))   # x[0:2, 1:3]
    """
    x = _tensor_or_array(x)
    stride = stride or (1,) * len(x.shape)
    return getitem(x, tuple(builtins.slice(b, e, s) for b, e, s in zip(begin, end, stride)))


def getitem(x, index):
    """`x[index]` as in NumPy for ints, slices with positive steps, `...`, `None`, one
    integer array (a list, NumPy array or int tensor: a gather along its axis) and, in eager
    mode, a boolean mask (the selected elements, in row-major order). On a dim left open by
    `input_spec`, slice bounds and ints are resolved when the program runs, with eager's
    meaning (an int outside [-n, n) is an `IndexOutOfRangeError` then).

    Example::

        >>> x = ug.tensor([[1, 2, 3], [4, 5, 6]])
        >>> x[:, [2, 0]], x[x > 2]
        ([[3, 1], [6, 4]], [3, 4, 5, 6])
    """
    if _is_array_index(index):
        index = _array_index(index)
        if index.dtype == "bool":
            return _masked(x, index)
        return take(x, index, axis=0)
    index = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, item in enumerate(index) if _is_array_index(item)]
    if arrays:
        return _gather_in_tuple(x, index, arrays)
    if builtins.sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(i is not None and i is not Ellipsis for i in index)
    if used > len(x.shape):
        raise IndexError(f"too many indices for a tensor of rank {len(x.shape)}")
    fill = (builtins.slice(None),) * (len(x.shape) - used)
    at = next((i for i, item in enumerate(index) if item is Ellipsis), len(index))
    index = index[:at] + fill + index[at + 1:]
    begin, end, stride, squeeze_axes, new_axes = [], [], [], [], []
    taken = []  # (dim, index) of the ints on dims of unknown size: a take each
    dim = out_dim = 0
    for item in index:
        if item is None:
            new_axes.append(out_dim)
            out_dim += 1
            continue
        size = x.shape[dim]
        if isinstance(item, int | np.integer):
            if size is None:  # checked when the program runs, by a take
                start, stop, position = _open_dim_index(int(item))
                taken.append((dim, position))
            else:
                if not -size <= item < size:  # the error a run-time check raises
                    refuse(TAKE, int(item) + size if item < 0 else int(item), size, axis=dim)
                start = int(item) % size
                stop = start + 1
                squeeze_axes.append(dim)
            begin.append(start), end.append(stop), stride.append(1)
        elif isinstance(item, builtins.slice):
            out_dim += 1
            if item.step is not None and item.step <= 0:
                raise IndexError(
                    f"slice step {item.step} is not supported: only positive steps; "
                    "reverse with ug.take and a reversed index tensor"
                )
            if size is None:  # bounds resolved and clamped when the program runs
                start, stop = _open_dim_bounds(item)
                begin.append(start), end.append(stop), stride.append(item.step or 1)
            else:
                start, stop, step = item.indices(size)
                begin.append(start), end.append(builtins.max(stop, start)), stride.append(step)
        else:
            raise IndexError(f"unsupported index {item!r} at {user_source()}: use ints, "
                             "slices, ..., None, one integer array or a boolean mask")
        dim += 1
    out = x
    full = all(b == 0 and e == (TO_END if s is None else s) and st == 1
               for b, e, st, s in zip(begin, end, stride, x.shape))
    if not full:
        out = apply("slice", [out], {"begin": tuple(begin), "end": tuple(end),
                                     "stride": tuple(stride)})
    if taken:
        out, squeeze_axes = _take_positions(out, taken, squeeze_axes)
    if squeeze_axes:
        out = apply("squeeze", [out], {"axis": tuple(squeeze_axes)})
    for position in new_axes:
        out = apply("expand_dims", [out], {"axis": position})
    return out


def _take_positions(x, taken, squeeze_axes):
    """x with each (axis, position) of `taken` taken (the axis dropped, the last first, so
    that the axes before it stay in place), and `squeeze_axes` renumbered to match. A pair
    of positions (see _open_dim_index) keeps the first."""
    for axis, position in reversed(taken):
        x = take(x, np.array(position, np.int64), axis=axis)
        if np.ndim(position):
            x = getitem(x, (builtins.slice(None),) * axis + (0,))
        squeeze_axes = [a - (a > axis) for a in squeeze_axes]
    return x, squeeze_axes


def _open_dim_bounds(item: builtins.slice) -> tuple[int, int]:
    """(begin, end) of a slice of a dim whose size is known only when the program runs (a
    dim left open by `input_spec`): resolved then, as Python's (a negative bound counts from
    the end, then both are clamped to 0..size); here only kept within int64."""
    start = 0 if item.start is None else _within_int64(item.start)
    stop = TO_END if item.stop is None else _within_int64(item.stop)
    return start, stop


def _within_int64(bound) -> int:
    return builtins.min(builtins.max(int(bound), -TO_END), TO_END)


def _open_dim_index(item: int) -> tuple[int, int, int | list]:
    """(begin, end, position) for the int index `item` of a dim whose size n is known only
    when the program runs: a slice, then a `take` of `position` from it, whose run-time
    check refuses an index outside [-n, n) with `IndexOutOfRangeError` (an IndexError, as
    eagerly), naming it and n. A non-negative index is taken from the whole dim; a negative
    one i from x[i:]: its rows 0 and -i - 1 (row 0 alone for -1), the first kept. x[i:] has
    -i rows when -n <= i, else the n rows of x, so the check of row -i - 1 refuses i < -n
    and names n (`index_checks` reads i back from the row and the slice)."""
    if item >= 0:
        return 0, TO_END, builtins.min(item, TO_END)
    item = _within_int64(item)
    return item, TO_END, 0 if item == -1 else [0, -item - 1]


# -- indexing with arrays -----------------------------------------------------------------
def _is_array_index(item) -> bool:
    return isinstance(item, Tensor | np.ndarray | list)


def _array_index(item):
    """An array index as an int/bool NumPy array (lists) or a Tensor, checked."""
    if isinstance(item, list):
        from unigraph.tensor import as_array

        item = as_array(item, what="an index")
    dtype = item.dtype if isinstance(item, Tensor) else item.dtype.name
    if not (dtype == "bool" or dtype.startswith(("int", "uint"))):
        raise IndexError(f"an index at {user_source()} is {dtype}: index with ints, an int "
                         "array or a boolean mask (cast floats first: ug.cast(i, 'int64'))")
    return item


def _masked(x, mask):
    """x[mask] for a boolean mask over x's leading dims: known only from the mask's values,
    so eager only (the values are fetched, as NumPy and torch do)."""
    x = _tensor_or_array(x)
    if isinstance(mask, Tensor) and mask.is_symbolic:
        raise TracingError(
            f"x[mask] with a boolean tensor at {user_source()}: in a static graph the number "
            "of selected elements is not known while tracing; keep the shape with "
            "ug.where(mask, x, 0) (then ug.sum(...) / ug.sum(ug.cast(mask, x.dtype)) for a "
            "masked mean), or select in eager mode"
        )
    values = mask._host() if isinstance(mask, Tensor) else mask
    rank = values.ndim
    lead = tuple(x.shape[:rank])
    if len(lead) != rank or any(d is not None and d != m for d, m in zip(lead, values.shape)):
        raise IndexError(f"a boolean mask of shape {list(values.shape)} at {user_source()} "
                         f"does not match the leading dims of a {list(x.shape)} tensor")
    if None in lead:  # dims input_spec left open: the mask gives their sizes, checked at run
        x = ensure_shape(x, values.shape + (None,) * (len(x.shape) - rank), message=(
            f"a boolean mask of shape {list(values.shape)} at {user_source()} must match "
            f"the leading dims of the tensor (of shape {list(x.shape)} while tracing)"))
    rows = x if rank == 1 else flatten(x, 0, rank - 1)
    return take(rows, np.flatnonzero(values), axis=0)


def _gather_in_tuple(x, index, arrays):
    """x[..., idx, ...] with one integer array among ints and slices: slice first, then
    gather along the axis the array indexes."""
    if len(arrays) > 1:
        raise IndexError(
            f"an index at {user_source()} has {len(arrays)} arrays: unigraph takes one array "
            "per index (NumPy's broadcast of several is ambiguous to read); index twice, "
            "e.g. x[rows][:, cols], or flatten and use one ug.take")
    position = arrays[0]
    indices = _array_index(index[position])
    if indices.dtype == "bool":
        raise IndexError(f"a boolean mask at {user_source()} must be the whole index (x[mask])")
    if any(item is Ellipsis for item in index[:position]):
        at = index.index(Ellipsis)
        used = builtins.sum(i is not None and i is not Ellipsis for i in index)
        fill = (builtins.slice(None),) * (len(x.shape) - used)
        index = index[:at] + fill + index[at + 1:]
        position = at + len(fill) + (position - at - 1)
    # The output axis of the array: one per slice or None before it (ints drop theirs).
    axis = builtins.sum(not isinstance(i, int | np.integer) for i in index[:position])
    basic = getitem(x, index[:position] + (builtins.slice(None),) + index[position + 1:])
    return take(basic, indices, axis=axis)


def split(x, indices_or_sections, axis=0):
    """A list of pieces of x along `axis`, as NumPy's split: an int n gives n equal pieces
    (the size must divide), a list gives the split points. Each piece is a `slice`.

    Example::

        >>> ug.split([1, 2, 3, 4, 5], [2])
        [[1, 2], [3, 4, 5]]
    """
    x = unchanged(_tensor_or_array(x))  # (a whole piece of a NumPy array: a tensor too)
    axis = _axis(axis, len(x.shape), "split")
    size = x.shape[axis]
    if size is None:
        return _split_open_axis(x, indices_or_sections, axis)
    if isinstance(indices_or_sections, int | np.integer):
        indices_or_sections = int(indices_or_sections)
        if indices_or_sections <= 0 or size % indices_or_sections:
            raise ShapeError(f"split: axis {axis} of size {size} does not split into "
                             f"{indices_or_sections} equal pieces (at {user_source()}); pass "
                             "the split points as a list instead")
        step = size // indices_or_sections
        bounds = list(range(step, size, step)) if step else [0] * (indices_or_sections - 1)
    else:
        bounds = [int(b) for b in indices_or_sections]
    # Each piece is x[a:b] between neighbouring points, each resolved as a Python slice (a
    # negative point counts from the end, both clamp to 0..size; b before a: empty), as
    # NumPy's split: [-2] of 5 rows is x[:-2], x[-2:], pieces of 3 and 2.
    starts, stops = [0, *bounds], [*bounds, size]
    lead = (builtins.slice(None),) * axis
    return [getitem(x, lead + (builtins.slice(a, b),)) for a, b in zip(starts, stops)]


def _split_open_axis(x, indices_or_sections, axis):
    """`split` along an axis input_spec leaves open. Split points are slices resolved when
    the program runs, as eagerly's (the last piece runs to the end). n equal pieces are
    takes of the rows of the axis's positions laid out as [n, -1], after an `ensure_size`
    whose `multiple` n is checked when the program runs (before it): a size n does not
    divide is a ShapeError naming split, the line and the fix, as eagerly."""
    lead = (builtins.slice(None),) * axis
    if not isinstance(indices_or_sections, int | np.integer):
        bounds = [int(b) for b in indices_or_sections]
        starts, stops = [0, *bounds], [*bounds, None]
        return [getitem(x, lead + (builtins.slice(a, b),)) for a, b in zip(starts, stops)]
    count = int(indices_or_sections)
    if count <= 0:
        raise ShapeError(f"split: axis {axis} (its size known only when the program runs) "
                         f"does not split into {count} equal pieces (at {user_source()}); "
                         "pass a count above 0, or the split points as a list")
    x = apply("ensure_size", [x], {
        "axes": (axis,), "minimum": 0, "multiple": count,
        "message": f"split: axis {axis} (its size known only when the program runs, left open "
                   f"by input_spec) does not split into {count} equal pieces (at "
                   f"{user_source()}); pass the split points as a list, or give the dim its "
                   "size in input_spec"})
    pieces = reshape(run_time_positions(x, axis), (count, -1))
    return [take(x, getitem(pieces, i), axis=axis) for i in range(count)]


# -- functional updates -------------------------------------------------------------------
def index_update(x, index, value, accumulate=False):
    """A copy of x with `value` written (or, with accumulate, added) at `index`: what
    `x.at[index].set(value)` / `.add(value)` do. The index is any NumPy index known while
    tracing (ints, slices, ..., None, int arrays, boolean masks; eager tensors are read);
    `value` broadcasts to the selection and takes x's dtype. Where an index repeats, set
    keeps the last value and add sums them all, in order. Built from `take` (the values
    laid out over x) and `where`, so gradients reach x and value.

    A traced int scalar as the whole index (a loop counter writing row i of a buffer) is
    taken too: a `one_hot` row mask and a `where` (an index outside [-n, n) raises take's
    error, as eagerly).
    A traced int array, alone or after full slices (`x.at[i]`, `x.at[:, i]`), is
    `ug.scatter` along its axis (an index outside [-n, n) raises take's error).
    Where input_spec leaves a dim of x open, the positions written are counted when the
    program runs (`_update_open_positions`), checked as x[index] checks them.

    Example::

        >>> ug.zeros(4).at[[0, 2, 2]].add(1.0)
        [1.0, 0.0, 2.0, 0.0]
    """
    x = _tensor_or_array(x)
    dtype = x.dtype if isinstance(x, Tensor) else x.dtype.name
    reduction = "add" if accumulate else "replace"
    if isinstance(index, Tensor) and index.is_symbolic and index.shape == ():
        if x.shape and x.shape[0] is None:  # rows known when it runs: scatter's row
            return scatter(x, index, value, 0, reduction)
        return _update_row(x, index, value, accumulate, dtype)
    traced = _traced_axis(index)
    if traced is not None:  # positions known only at run time: the scatter_add record
        axis, positions = traced
        return scatter(x, positions, value, axis, reduction)
    if None in x.shape:  # a dim input_spec leaves open: ints along one axis are a scatter
        along = _int_axis(index, len(x.shape))
        if along is not None:
            return scatter(x, along[1], value, along[0], reduction)
        rows = _update_open_rows(x, index, value, accumulate, dtype)
        if rows is not None:
            return rows
        return _update_open_positions(x, _concrete_index(index), value, accumulate, dtype)
    shape = tuple(x.shape)
    slots = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    try:
        chosen = slots[_concrete_index(index)]  # the flat position in x of each update
    except IndexError as error:
        raise IndexError(f"x.at[...] at {user_source()}: {error}") from None
    targets = chosen.reshape(-1)
    if not targets.size:
        return x
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    updates = reshape(broadcast_to(value, chosen.shape), (-1,))
    out = x
    for source in _layers(targets, slots.size, accumulate):
        hit = (source >= 0).reshape(shape)
        placed = take(updates, np.maximum(source, 0).reshape(shape))
        out = where(hit, out + placed if accumulate else placed, out)
    return out


def _update_open_positions(x, index, value, accumulate, dtype):
    """x.at[index].set/add(value) of a tensor with dims input_spec leaves open, at any index
    x[index] takes (a mask, slices, ints along any axes): the flat position of each element
    of x, counted when the program runs, indexed as x would be (so x[index]'s bounds, its
    run-time checks and its layout, as eagerly) are the positions written, a scatter into
    x flattened, laid back out as x."""
    flat = reshape(x, (-1,))
    try:
        chosen = getitem(reshape_as(run_time_positions(flat, 0), x), index)
    except IndexError as error:
        raise IndexError(f"x.at[...] at {user_source()}: {error}") from None
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    updates = broadcast_like(value, chosen)  # value broadcast to x[index]'s shape, as eagerly
    out = scatter(flat, reshape(chosen, (-1,)), reshape(updates, (-1,)), 0,
                  "add" if accumulate else "replace")
    return reshape_as(out, x)


def _layers(targets, size: int, accumulate: bool):
    """For each layer, the update (or -1) at each of `size` flat positions. Layer k holds
    the k-th occurrence of each repeated position: within a layer every position is written
    once, so a gather and a where place it (set: one layer, a repeat keeps the last)."""
    order = np.argsort(targets, kind="stable")
    first = np.searchsorted(targets[order], targets[order])
    rank = np.empty_like(targets)
    rank[order] = np.arange(targets.size) - first
    for layer in range(int(rank.max()) + 1) if accumulate else [None]:
        source = np.full(size, -1, dtype=np.int64)
        picked = np.flatnonzero(rank == layer) if accumulate else np.arange(targets.size)
        source[targets[picked]] = picked
        yield source


def _update_open_rows(x, index, value, accumulate, dtype):
    """x.at[:, rest].set/add(value) where only x's first dim is open (input_spec) and `rest`
    indexes the known dims: the same positions in every row, so the update of each row is
    the known-shape one over x as [rows, known size] (None where the index is another)."""
    items = index if isinstance(index, tuple) else (index,)
    if None in x.shape[1:] or type(items[0]) is not builtins.slice or \
            items[0] != builtins.slice(None):
        return None
    known = tuple(x.shape[1:])
    slots = np.arange(int(np.prod(known, dtype=np.int64))).reshape(known)
    rest = _concrete_index(items[1:])
    try:
        chosen = slots[rest]  # the flat position in a row of each update
        # (rows first: not an index whose advanced parts NumPy moves before the rows)
        rows_first = all(np.empty((n,) + known)[(items[0],) + rest].shape == (n,) + chosen.shape
                         for n in (2, 3))
    except IndexError as error:
        raise IndexError(f"x.at[...] at {user_source()}: {error}") from None
    if not rows_first:
        return None
    targets = chosen.reshape(-1)
    if not targets.size:
        return x
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    flat = reshape(x, (-1, slots.size))
    # the value broadcast over the selection, [rows] + chosen.shape
    selection = reshape(take(flat, targets, axis=1), (-1,) + chosen.shape)
    updates = broadcast_like(value, selection)
    updates = reshape(updates, (-1, targets.size))
    out = flat
    for source in _layers(targets, slots.size, accumulate):
        placed = take(updates, np.maximum(source, 0), axis=1)
        out = where(source >= 0, out + placed if accumulate else placed, out)
    return reshape(out, (-1,) + known)


def _update_row(x, row, value, accumulate, dtype):
    """x.at[row].set/add(value) for a traced int scalar `row`: where over a one_hot mask."""
    if not is_int(row.dtype):
        raise IndexError(f"x.at[i] at {user_source()}: i is {row.dtype}; index with an int")
    size = x.shape[0] if x.shape else None
    if size is None:
        raise IndexError(f"x.at[i] at {user_source()} on a 0-d tensor: there is no row")
    # take of the row numbers maps a negative row to n + row, and refuses one outside
    # [-n, n) as take does on every target (an all-False mask would write nothing, silently)
    row = take(np.arange(size, dtype=np.int64), row)
    mask = reshape(one_hot(row, size, "bool"), (size,) + (1,) * (len(x.shape) - 1))
    (value,) = _promote(value)
    value = value if value.dtype == dtype else cast(value, dtype)
    value = expand_dims(broadcast_to(value, x.shape[1:]), 0)  # one row, broadcast over rows
    return where(mask, x + value if accumulate else value, x)


def _traced_axis(index):
    """(axis, tensor) for an index that is one traced int tensor after full slices (and
    before nothing but full slices), else None."""
    items = index if isinstance(index, tuple) else (index,)
    traced = [i for i, item in enumerate(items) if isinstance(item, Tensor) and item.is_symbolic]
    if len(traced) != 1 or not is_int(items[traced[0]].dtype):
        return None
    axis = traced[0]
    full = builtins.slice(None)
    if any(type(item) is not builtins.slice or item != full
           for i, item in enumerate(items) if i != axis):
        return None
    return axis, items[axis]


def _int_axis(index, rank: int):
    """(axis, int array) for an index known while tracing that is ints (an int, or an int
    list or array) along one axis after full slices, else None."""
    items = index if isinstance(index, tuple) else (index,)
    if not items or len(items) > rank:
        return None
    full = builtins.slice(None)
    if any(type(item) is not builtins.slice or item != full for item in items[:-1]):
        return None
    last = items[-1]
    if isinstance(last, Tensor):
        if last.is_symbolic:
            return None
        last = last._host()
    if isinstance(last, bool | np.bool_) or not isinstance(
            last, numbers.Integral | list | np.ndarray):
        return None
    last = np.asarray(last)
    if last.dtype.kind not in "iu":
        return None
    return len(items) - 1, last


def _concrete_index(index):
    """`index` with eager tensors read to NumPy; a traced tensor is refused."""
    items = index if isinstance(index, tuple) else (index,)
    concrete = []
    for item in items:
        if isinstance(item, Tensor):
            if item.is_symbolic:
                raise TracingError(
                    f"x.at[index] with a traced tensor index at {user_source()}: a traced "
                    "index must be one int tensor, alone or after full slices (x.at[i], "
                    "x.at[:, i]: ug.scatter); for a data-dependent mask use "
                    "ug.where(mask, new, x)")
            item = item._host()
        concrete.append(item)
    return tuple(concrete) if isinstance(index, tuple) else concrete[0]
