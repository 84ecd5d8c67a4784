"""The draws added in s19: public functions a model or computation uses that the tester
did not draw before.

* `ug.gather`, `ug.flatten` (and `ug.nn.functional.flatten`), `ug.unsqueeze`, `ug.slice`
  (`shape_functions`);
* `ug.index_update` (set or accumulate, the index forms of `x.at`: `index_update`);
* `ug.nn.functional`: `linear`, `layer_norm`, `group_norm`, `embedding`, `conv1d`,
  `max_pool1d`, `avg_pool1d`, `adaptive_avg_pool2d`, `mse_loss`, `cross_entropy`
  (`functional`), and `dropout` where a `ug.random` draw may be (`dropout`);
* options of ops drawn before only without them: `max_pool2d`'s dilation and ceil_mode,
  `avg_pool2d`'s ceil_mode and count_include_pad (`pool_options`), `var` / `std` with
  ddof=1, `norm` with ord 1 and inf, `pad` with a constant value (`reduction_options`);
* a comparison chain as a branch's predicate (`logical_and` / `logical_or` of two
  comparisons of reductions: `chained_branch`).

Each is small and valid by construction, like the draws of `strategies`; the hazards
(`runner.HAZARDS`) watch the op records these are built from, so a tie or a kink inside
one is rejected as anywhere else (max_pool2d's hazard knows dilation and ceil_mode).

This module is imported by `strategies` after the helpers it uses are defined.
"""

from __future__ import annotations

from hypothesis import strategies as st

from unigraph.testing.random_programs.model import Branch, Var
from unigraph.testing.random_programs.strategies import (
    SCALARS,
    THRESHOLDS,
    Builder,
    _assign,
    _at_index,
    _axes,
    _block,
    _broadcasts_to,
    _floats,
    _image,
    _nonempty,
    _partner_shape,
    _reduced,
)

F = "ug.nn.functional"


def shape_functions(b: Builder, env, depth):
    """`ug.gather` at constant indices (negative ones too), `ug.flatten` of a range of
    axes, `F.flatten` from axis 1, `ug.unsqueeze`, or `ug.slice` with begin, end, stride."""
    a = b.operand(_floats(env))
    how = b.pick(["flatten", "unsqueeze", "gather", "slice", "nn_flatten"])
    rank = len(a.shape)
    if how == "gather" and rank and a.shape[b.draw(st.integers(0, rank - 1))]:
        axis = b.draw(st.integers(0, rank - 1))
        n = a.shape[axis]
        if n:
            values = b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
            shape = a.shape[:axis] + (len(values),) + a.shape[axis + 1:]
            return _assign(b, shape, f"ug.gather({a.name}, np.array({values}), axis={axis})",
                           [a.name])
    if how == "slice" and rank:
        begin, end, stride = [], [], []
        for d in a.shape:
            step = b.draw(st.integers(1, 2))
            start = b.draw(st.integers(0, max(d - 1, 0)))
            stop = b.draw(st.integers(start, d))
            begin, end, stride = begin + [start], end + [stop], stride + [step]
        shape = tuple(len(range(s, e, k)) for s, e, k in zip(begin, end, stride))
        return _assign(b, shape, f"ug.slice({a.name}, {begin!r}, {end!r}, {stride!r})",
                       [a.name])
    if how == "nn_flatten" and rank >= 2:
        size = 1
        for d in a.shape[1:]:
            size *= d
        return _assign(b, (a.shape[0], size), f"{F}.flatten({a.name})", [a.name])
    if how == "flatten" and rank:
        start = b.draw(st.integers(0, rank - 1))
        end = b.draw(st.integers(start, rank - 1))
        merged = 1
        for d in a.shape[start:end + 1]:
            merged *= d
        shape = a.shape[:start] + (merged,) + a.shape[end + 1:]
        written_end = end - rank if b.draw(st.booleans()) else end
        return _assign(b, shape, f"ug.flatten({a.name}, {start}, {written_end})", [a.name])
    axis = b.draw(st.integers(0, rank))
    return _assign(b, a.shape[:axis] + (1,) + a.shape[axis:],
                   f"ug.unsqueeze({a.name}, {axis})", [a.name])


def index_update(b: Builder, env, depth):
    """`ug.index_update(x, index, value, accumulate)`: what `x.at[index]` does, called by
    its function name (`strategies._at_index` gives the index)."""
    xs = [v for v in _floats(env) if v.shape and 0 not in v.shape]
    if not xs:
        return None
    x = b.operand(xs)
    index, selected, uses = _at_index(b, env, x)
    accumulate = b.draw(st.booleans())
    if b.draw(st.booleans()):
        value, uses = str(b.pick(SCALARS)), [x.name] + uses
    else:
        shape = _partner_shape(b, selected)
        if not _broadcasts_to(shape, selected):
            shape = selected
        other = b.new_input(shape)
        value, uses = other.name, [x.name, other.name] + uses
    expr = f"ug.index_update({x.name}, np.s_[{index}], {value}, accumulate={accumulate})"
    return _assign(b, x.shape, expr, uses)


def _sequence(b: Builder, env) -> Var:
    """A float value [N, C, L] (a new input, or one of the program's)."""
    found = [v for v in _nonempty(env) if len(v.shape) == 3 and v.shape[2] >= 2]
    if found and b.draw(st.booleans()):
        return b.pick(found)
    return b.new_input((b.pick([1, 2]), b.draw(st.integers(1, 3)), b.draw(st.integers(2, 6))))


def _linear(b: Builder, env):
    # x of rank >= 2: linear is a matmul, which refuses a vector (README: "matmul needs rank
    # >= 2 on both sides")
    matrices = [v for v in _floats(env) if len(v.shape) >= 2]
    if matrices and b.draw(st.booleans()):
        a = b.operand(matrices)
    else:
        a = b.new_input((b.draw(st.integers(1, 3)), b.draw(st.integers(1, 4))))
    width = b.draw(st.integers(1, 4))
    w = b.new_input((a.shape[-1], width))
    uses = [a.name, w.name]
    bias = ""
    if b.draw(st.booleans()):
        bias_var = b.new_input((width,))
        bias, uses = f", {bias_var.name}", uses + [bias_var.name]
    return _assign(b, a.shape[:-1] + (width,), f"{F}.linear({a.name}, {w.name}{bias})", uses)


def _layer_norm(b: Builder, env):
    a = b.operand([v for v in _nonempty(env) if v.shape] or _nonempty(env))
    if not a.shape:
        a = b.new_input((2, 3))
    count = b.draw(st.integers(1, len(a.shape)))
    normalized = a.shape[len(a.shape) - count:]
    uses = [a.name]
    affine = ""
    if b.draw(st.booleans()):
        w, bias = b.new_input(normalized), b.new_input(normalized)
        affine, uses = f", {w.name}, {bias.name}", uses + [w.name, bias.name]
    return _assign(b, a.shape, f"{F}.layer_norm({a.name}, {normalized!r}{affine})", uses)


def _group_norm(b: Builder, env):
    x = _image(b, env)
    channels = x.shape[1]
    groups = b.pick([g for g in (1, 2, 3, 4) if channels % g == 0])
    uses = [x.name]
    affine = ""
    if b.draw(st.booleans()):
        w, bias = b.new_input((channels,)), b.new_input((channels,))
        affine, uses = f", {w.name}, {bias.name}", uses + [w.name, bias.name]
    return _assign(b, x.shape, f"{F}.group_norm({x.name}, {groups}{affine})", uses)


def _embedding(b: Builder, env):
    rows, dim = b.draw(st.integers(1, 5)), b.draw(st.integers(1, 3))
    weight = b.new_input((rows, dim))
    count = b.draw(st.integers(1, 4))
    values = b.draw(st.lists(st.integers(0, rows - 1), min_size=count, max_size=count))
    shaped = b.draw(st.booleans()) and count % 2 == 0
    indices = f"np.array({values}).reshape(2, -1)" if shaped else f"np.array({values})"
    shape = ((2, count // 2) if shaped else (count,)) + (dim,)
    padding = ""
    if b.draw(st.booleans()):
        padding = f", padding_idx={b.pick(values)}"
    return _assign(b, shape, f"{F}.embedding({indices}, {weight.name}{padding})",
                   [weight.name])


def _conv1d(b: Builder, env):
    x = _sequence(b, env)
    channels, length = x.shape[1:]
    groups = b.pick([g for g in (1, 2, 3) if channels % g == 0])
    out_channels = groups * b.draw(st.integers(1, 2))
    stride, padding, dilation = (b.draw(st.integers(1, 2)), b.draw(st.integers(0, 1)),
                                 b.draw(st.integers(1, 2)))
    largest = (length + 2 * padding - 1) // dilation + 1
    kernel = b.draw(st.integers(1, min(3, largest)))
    w = b.new_input((out_channels, channels // groups, kernel))
    uses = [x.name, w.name]
    bias = ""
    if b.draw(st.booleans()):
        bias_var = b.new_input((out_channels,))
        bias, uses = f", {bias_var.name}", uses + [bias_var.name]
    out = (length + 2 * padding - (dilation * (kernel - 1) + 1)) // stride + 1
    expr = (f"{F}.conv1d({x.name}, {w.name}{bias}, stride={stride}, padding={padding}, "
            f"dilation={dilation}, groups={groups})")
    return _assign(b, (x.shape[0], out_channels, out), expr, uses)


def _pool_size(size, kernel, stride, padding, dilation, ceil_mode) -> int:
    """PyTorch's output size: with ceil_mode, a last window that starts inside the input
    or its left padding counts."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _pool1d(b: Builder, env):
    x = _sequence(b, env)
    length = x.shape[2]
    op = b.pick(["max_pool1d", "avg_pool1d"])
    kernel = b.draw(st.integers(1, min(3, length)))
    stride = b.draw(st.integers(1, 2))
    padding = b.draw(st.integers(0, kernel // 2))
    ceil_mode = b.draw(st.booleans())
    out = _pool_size(length, kernel, stride, padding, 1, ceil_mode)
    expr = (f"{F}.{op}({x.name}, {kernel}, stride={stride}, padding={padding}, "
            f"ceil_mode={ceil_mode})")
    return _assign(b, x.shape[:2] + (out,), expr, [x.name])


def _adaptive_pool(b: Builder, env):
    x = _image(b, env)
    size = (b.draw(st.integers(1, 4)), b.draw(st.integers(1, 4)))
    written = size[0] if size[0] == size[1] and b.draw(st.booleans()) else size
    return _assign(b, x.shape[:2] + size, f"{F}.adaptive_avg_pool2d({x.name}, {written!r})",
                   [x.name])


def _losses(b: Builder, env):
    a = b.operand(_nonempty(env))
    if b.draw(st.booleans()) and len(a.shape) == 2:
        n, classes = a.shape
        labels = b.draw(st.lists(st.integers(0, classes - 1), min_size=n, max_size=n))
        reduction = b.pick(["mean", "sum", "none"])
        shape = (n,) if reduction == "none" else ()
        return _assign(b, shape, f"{F}.cross_entropy({a.name}, np.array({labels}), "
                       f"reduction={reduction!r})", [a.name])
    target = b.new_input(a.shape)
    reduction = b.pick(["mean", "sum", "none"])
    shape = a.shape if reduction == "none" else ()
    return _assign(b, shape, f"{F}.mse_loss({a.name}, {target.name}, reduction={reduction!r})",
                   [a.name, target.name])


def functional(b: Builder, env, depth):
    """One of `ug.nn.functional`'s layers or losses, called as a function."""
    made = b.pick([_linear, _layer_norm, _group_norm, _embedding, _conv1d, _pool1d,
                   _adaptive_pool, _losses])
    return made(b, env)


def pool_options(b: Builder, env, depth):
    """max_pool2d with dilation and ceil_mode, avg_pool2d with ceil_mode and
    count_include_pad (the options `strategies.pool` leaves at their defaults)."""
    x = _image(b, env)
    op = b.pick(["max_pool2d", "avg_pool2d"])
    kernel = (b.draw(st.integers(1, 3)), b.draw(st.integers(1, 3)))
    stride = (b.draw(st.integers(1, 2)), b.draw(st.integers(1, 2)))
    padding = tuple(b.draw(st.integers(0, k // 2)) for k in kernel)
    ceil_mode = b.draw(st.booleans())
    if op == "max_pool2d":
        dilation = tuple(b.draw(st.integers(1, 2)) for _ in kernel)
        dilation = tuple(d if (k - 1) * d + 1 <= size + 2 * p else 1 for d, k, size, p in zip(
            dilation, kernel, x.shape[2:], padding))
        extra = f", dilation={dilation!r}"
    else:
        dilation = (1, 1)
        extra = f", count_include_pad={b.draw(st.booleans())}"
    out_hw = [_pool_size(size, k, s, p, d, ceil_mode) for size, k, s, p, d in zip(
        x.shape[2:], kernel, stride, padding, dilation)]
    expr = (f"ug.{op}({x.name}, {kernel!r}, stride={stride!r}, padding={padding!r}"
            f"{extra}, ceil_mode={ceil_mode})")
    return _assign(b, (*x.shape[:2], *out_hw), expr, [x.name])


def reduction_options(b: Builder, env, depth):
    """var / std with ddof=1 (over axes of more than one element), norm with ord 1 or
    inf, pad with a constant value."""
    how = b.pick(["ddof", "ord", "pad"])
    if how == "pad":
        a = b.operand([v for v in _floats(env) if v.shape] or _floats(env))
        if a.shape:
            widths = tuple((b.draw(st.integers(0, 2)), b.draw(st.integers(0, 2)))
                           for _ in a.shape)
            shape = tuple(d + sum(w) for d, w in zip(a.shape, widths))
            return _assign(b, shape, f"ug.pad({a.name}, {widths!r}, value={b.pick(SCALARS)})",
                           [a.name])
    if how == "ord":
        a = b.operand(_nonempty(env))
        axis = _axes(b, len(a.shape))
        keepdims = b.draw(st.booleans())
        order = b.pick(["1", "np.inf"])
        return _assign(b, _reduced(a.shape, axis, keepdims),
                       f"ug.norm({a.name}, ord={order}, axis={axis!r}, keepdims={keepdims})",
                       [a.name])
    a = b.operand(_nonempty(env))
    axis = _axes(b, len(a.shape))
    count = 1
    for i, d in enumerate(a.shape):
        if axis is None or i in ((axis % len(a.shape),) if isinstance(axis, int) else axis):
            count *= d
    if count < 2:  # ddof=1 of one element divides by 0
        return None
    op, keepdims = b.pick(["var", "std"]), b.draw(st.booleans())
    return _assign(b, _reduced(a.shape, axis, keepdims),
                   f"ug.{op}({a.name}, axis={axis!r}, keepdims={keepdims}, ddof=1)", [a.name])


def dropout(b: Builder, env, depth):
    """`F.dropout(a, p)` (its mask is a `ug.random.uniform` draw: only where a draw may be,
    `strategies.random_draw`), or with training=False, the identity."""
    a = b.operand(_floats(env))
    if depth != b.free_depth or not b.draw(st.booleans()):
        return _assign(b, a.shape, f"{F}.dropout({a.name}, p=0.5, training=False)", [a.name])
    p = b.pick([0.5, 0.25, 0.0])
    return _assign(b, a.shape, f"{F}.dropout({a.name}, p={p})", [a.name])


CHAINED = [
    "ug.logical_and(ug.sum({a}) > {c}, ug.max({a}) < {d})",
    "ug.logical_or(ug.mean({a}) < {c}, ug.min({a}) > {d})",
]


def chained_branch(b: Builder, env, depth):
    """`ug.cond` or a Python `if` whose predicate chains two comparisons of reductions
    with `logical_and` / `logical_or`."""
    anchor = b.operand(_floats(env))
    a = b.operand(_nonempty(env))
    pred = b.pick(CHAINED).format(a=a.name, c=b.pick(THRESHOLDS), d=b.pick([1.0, 1.5, -0.5]))
    style = b.pick(["cond", "if"])
    then = _block(b, env, depth + 1, anchor.shape)
    orelse = _block(b, env, depth + 1, anchor.shape)
    return Branch(Var(b.name(), anchor.shape), pred, (a.name,), then, orelse, style, b.tag())


OPERATIONS = [shape_functions, index_update, functional, pool_options, reduction_options,
              dropout]
CONTROL_FLOW = [chained_branch]
