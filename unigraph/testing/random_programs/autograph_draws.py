"""The draws added in s20: Python a user writes inside `@ug.function` that autograph
converts, which the tester did not draw before.

* a `for` loop over `range(n)` (unrolled when traced), over `ug.range(ug.tensor(n))` (a
  `while_loop` on static targets, its index a weak int tensor) or over the rows of a value
  (its first axis, zero rows included), the index perhaps used in the body, and perhaps a
  `break` or `continue` at the top of the body under a tensor condition on the carried
  value (`for_loop`);
* a call of a plain Python helper function (no `@ug.function`), which autograph converts
  where converted code calls it (`autograph.calls`), so a tensor `if` or loop inside it is
  graph control flow (`helper_call`).

Each is a control-flow draw (nested up to `max_depth`, like `strategies.branch`); the
comparisons of the exit tests are watched by the comparison hazards (`runner.HAZARDS`).
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from unigraph.testing.random_programs.model import Loop, Var
from unigraph.testing.random_programs.strategies import (
    THRESHOLDS,
    Builder,
    _block,
    _floats,
    call,
)

FOR_STYLES = ["for_range", "for_ug_range", "for_rows"]
# Tests on the carried value: sums only (a zero-size value has one, 0, and no max or mean)
EXIT_TESTS = ["ug.sum({v}) > {c}", "ug.sum({v}) < {c}"]


def _rows(b: Builder, env, init: Var) -> Var:
    """A value whose rows have `init`'s shape: one of the program's, or a new input of 0-3
    rows (zero rows: the loop never runs)."""
    fits = [v for v in _floats(env) if v.shape[1:] == init.shape and len(v.shape) >= 1]
    if fits and b.draw(st.booleans(), label="rows of a value"):
        return b.operand(fits)
    return b.new_input((b.draw(st.integers(0, 3), label="rows"),) + init.shape)


def for_loop(b: Builder, env, depth):
    """A Python `for` that autograph converts (`model.Loop`'s `for_*` styles): the carried
    value starts as one of the program's and the body, a block over it (and the row), gives
    its next value."""
    init = b.operand(_floats(env))
    style = b.pick(FOR_STYLES)
    out = Var(b.name(), init.shape)
    over, row, params, trips = "", None, (out,), 0
    if style == "for_rows":
        rows = _rows(b, env, init)
        over, row = rows.name, Var(b.name(), init.shape)
        params = (out, row)
    else:
        trips = b.draw(st.integers(0, 3), label="trips")
    body = _block(b, env, depth + 1, init.shape, params)
    exit_kind = b.pick(["", "break", "continue"])
    exit_test = b.pick(EXIT_TESTS).replace("{c}", str(b.pick(THRESHOLDS))) if exit_kind else ""
    indexed = style != "for_rows" and b.draw(st.booleans(), label="index used")
    return Loop(out, init.name, out, trips, body, style, b.tag(), over=over, row=row,
                exit=exit_kind, exit_test=exit_test, indexed=indexed)


def helper_call(b: Builder, env, depth):
    """`helper(a[, c])`: as `strategies.call`, but the helper is a plain Python function,
    converted because converted code calls it."""
    return dataclasses.replace(call(b, env, depth), plain=True)


CONTROL_FLOW = [for_loop, helper_call]
