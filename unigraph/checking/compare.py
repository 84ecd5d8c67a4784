"""Comparing one tensor with its float64 reference: tolerances and error figures.

A tensor passes when every finite element satisfies `|actual - ref| <= atol + rtol * |ref|`
(NumPy's `allclose` rule) and its NaN and +-Inf sit exactly where the reference has them.

Budgets (rtol, atol) come from the op records: `DEFAULT_TOLERANCE` per dtype, widened by an
op's own `tolerance` (long reductions, conv, matmul accumulate more rounding). That budget
holds for sums of up to `accumulation.REFERENCE_TERMS` (256) terms; a node summing n > 256
terms per output element (a matmul's inner dim, a conv's fan-in, and in a gradient its
VJP's sums too: a conv's weight gradient over batch x positions) gets rtol times
sqrt(n / 256) and atol times n / 256 (the growth of rounding error with n, probabilistic
and, near cancellation, worst-case: see `unigraph.checking.accumulation`). A tensor gets the
widest budget of the ops it depends on; a call may override rtol/atol for every tensor or
per tensor name.

The figures reported for each tensor: max abs error, max rel error, and the smallest
(atol, rtol) that would have passed, found by
scaling the budget: `ratio = max(|a - r| / (atol + rtol |r|))`, needed = ratio * budget, so
`ratio <= 1` is a pass.

The max rel error is taken only where it means something: over elements whose reference is
large enough for the relative part of the budget to count (`rtol * |ref| >= atol`, or any
non-zero reference when rtol is 0). Next to zero the budget is absolute, and 1e-9 against
1e-18 (relative error 1e9) is a pass that a relative figure would only make look alarming;
`rel_count` says how many elements the figure covers (0: it is not shown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from unigraph.checking import accumulation
from unigraph.ir import FLOAT_DTYPES, Graph
from unigraph.ops.base import DEFAULT_TOLERANCE, OPS

EXACT = (0.0, 0.0)  # integers and booleans must match exactly


@dataclass
class Figures:
    """How far one tensor is from its reference.

    status: "ok", "FAIL" (outside the budget), "nan/inf" (NaN/Inf positions differ),
        "shape" or "dtype" (the tensor is not even of the right type), "unchecked" (nothing
        to compare it with: see `unigraph.checking.across`).
    ratio: error / budget at the worst element (<= 1 passes; inf when the budget is 0).
    needed_atol, needed_rtol: the smallest budget of the same proportions that passes.
    mismatched: how many elements are outside the budget (or non-finite in the wrong place).
    rel_count: how many elements max_rel covers (see the module docstring).
    worst: index of the worst element, with the actual and reference values there.
    """

    status: str
    max_abs: float = 0.0
    max_rel: float = 0.0
    ratio: float = 0.0
    needed_atol: float = 0.0
    needed_rtol: float = 0.0
    nonfinite_match: bool = True
    mismatched: int = 0
    size: int = 0
    worst: tuple | None = None
    worst_actual: float | None = None
    worst_expected: float | None = None
    detail: str = ""
    rel_count: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        data = {key: _json_number(value) for key, value in self.__dict__.items()}
        data["worst"] = list(self.worst) if self.worst is not None else None
        return data

    @staticmethod
    def from_dict(data: dict) -> Figures:
        data = {key: _from_json_number(value) for key, value in data.items()}
        if data.get("worst") is not None:
            data["worst"] = tuple(data["worst"])
        return Figures(**data)


def _json_number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # "inf", "nan": JSON has no literal for them
    return value


def _from_json_number(value):
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def compare(actual, expected, budget: tuple, dtype: str | None = None) -> Figures:
    """Figures for `actual` (the target's tensor) against `expected` (the reference).

    `budget` is (rtol, atol). `dtype`, when given, is the dtype `actual` must have.

    >>> compare(np.float32([1.0, 2.0]), np.array([1.0, 2.0000001]), (1e-5, 1e-6)).ok
    True
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return Figures("shape", math.inf, math.inf, math.inf, size=int(expected.size),
                       detail=f"shape {list(actual.shape)}, expected {list(expected.shape)}")
    if dtype is not None and actual.dtype.name != dtype:
        return Figures("dtype", size=int(expected.size),
                       detail=f"dtype {actual.dtype.name}, expected {dtype}")
    rtol, atol = budget
    if actual.dtype.kind not in "fc" and expected.dtype.kind not in "fc":
        return _compare_exact(actual, expected)
    a = actual.astype(np.float64)
    r = expected.astype(np.float64)
    finite_a, finite_r = np.isfinite(a), np.isfinite(r)
    # Non-finite values must sit where the reference has them, with the same value.
    same_nonfinite = (~finite_a & ~finite_r) & ((a == r) | (np.isnan(a) & np.isnan(r)))
    wrong_nonfinite = (~finite_a | ~finite_r) & ~same_nonfinite
    both = finite_a & finite_r
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = np.where(both, np.abs(a - r), 0.0)
        magnitude = np.abs(np.where(both, r, 0.0))
        allowed = atol + rtol * magnitude
        ratios = np.where(diff > 0, diff / allowed, 0.0)
        relative = (magnitude > 0) & ((rtol * magnitude >= atol) if rtol > 0 else True)
        rel = np.where(relative, diff / magnitude, 0.0)
    bad = (diff > allowed) | wrong_nonfinite
    figures = Figures(
        status="ok",
        max_abs=float(diff.max(initial=0.0)),
        max_rel=float(rel.max(initial=0.0)),
        nonfinite_match=not bool(wrong_nonfinite.any()),
        mismatched=int(bad.sum()),
        size=int(r.size),
        rel_count=int(relative.sum()),
    )
    figures.ratio = float(ratios.max(initial=0.0))
    if rtol == 0 and atol == 0:
        figures.needed_atol, figures.needed_rtol = figures.max_abs, 0.0
    else:
        figures.needed_atol, figures.needed_rtol = figures.ratio * atol, figures.ratio * rtol
    if r.size:
        score = np.where(wrong_nonfinite, np.inf, ratios)
        index = np.unravel_index(int(np.argmax(score)), r.shape)
        if score[index] > 0:
            figures.worst = tuple(int(i) for i in index)
            figures.worst_actual = float(a[index])
            figures.worst_expected = float(r[index])
    if wrong_nonfinite.any():
        figures.status = "nan/inf"
        count = int(wrong_nonfinite.sum())
        figures.detail = f"{count} NaN/Inf value(s) where the reference differs"
    elif bad.any():
        figures.status = "FAIL"
    return figures


def _compare_exact(actual, expected) -> Figures:
    different = actual != expected
    count = int(different.sum())
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    figures = Figures("ok" if count == 0 else "FAIL", max_abs=float(diff.max(initial=0.0)),
                      mismatched=count, size=int(expected.size))
    figures.needed_atol = figures.max_abs
    figures.ratio = math.inf if count else 0.0
    if count:
        index = np.unravel_index(int(np.argmax(different)), expected.shape)
        figures.worst = tuple(int(i) for i in index)
        figures.worst_actual = float(actual[index])
        figures.worst_expected = float(expected[index])
        figures.detail = f"{count} of {expected.size} elements differ (exact comparison)"
    return figures


# -- budgets -----------------------------------------------------------------------------
def op_budget(op: str, dtype: str) -> tuple:
    """(rtol, atol) for one op run in `dtype`: its record's tolerance or the dtype default;
    for an accumulating use named by `ops_of` ("conv2d@4608"), grown with its length.

    >>> op_budget("conv2d@4096", "float32")   # conv2d's (1e-4, 1e-5) times (4, 16)
    (0.0004, 0.00016)
    """
    op, count = accumulation.untag(op)
    record = OPS.get(op)
    rtol, atol = DEFAULT_TOLERANCE.get(dtype, EXACT) if record is None else \
        record.tolerance_for(dtype)
    grow_rtol, grow_atol = accumulation.scale(count)
    return (rtol * grow_rtol, atol * grow_atol)


def widest(budgets) -> tuple:
    """The elementwise maximum of (rtol, atol) pairs."""
    budgets = list(budgets)
    if not budgets:
        return EXACT
    return (max(b[0] for b in budgets), max(b[1] for b in budgets))


def node_names(node, backward: bool) -> set:
    """The op name of `node`, and its accumulation tag ("conv2d@4608") when it sums more
    than `accumulation.REFERENCE_TERMS` terms. The checker's own weighted sum of the
    outputs is not tagged inside a gradient: its rounding never reaches the gradients
    (d sum(w * y) / dy is w, exactly)."""
    from unigraph.checking.run import REDUCTION_SOURCE

    if backward and node.source == REDUCTION_SOURCE:
        return {node.op}
    count = accumulation.terms(node, backward)
    if count > accumulation.REFERENCE_TERMS:
        return {node.op, accumulation.tag(node.op, count)}
    return {node.op}


def ops_of(graph: Graph, backward: bool = False) -> set:
    """Every op name used in `graph`, its subgraphs included, with the accumulation tags
    of those that sum long (forward, and backward inside a `grad` node or with
    `backward`)."""
    names = set()
    producers = {v.id: n for n in graph.nodes for v in n.outputs}
    for node in graph.nodes:
        names |= node_names(node, backward)
        for sub in node.subgraphs.values():
            inner = ops_of(sub, backward or node.op == "grad")
            names |= inner | accumulation.loop_tags(node, producers, inner)
    return names


def cone_ops(graph: Graph, value_ids) -> set:
    """Op names of every node the values `value_ids` depend on (subgraphs included)."""
    producer = {v.id: node for node in graph.nodes for v in node.outputs}
    seen, names = set(), set()
    stack = [producer[i] for i in value_ids if i in producer]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        names |= node_names(node, False)
        for sub in node.subgraphs.values():
            inner = ops_of(sub, node.op == "grad")
            names |= inner | accumulation.loop_tags(node, producer, inner)
        stack.extend(producer[v.id] for v in node.inputs if v.id in producer)
    return names


def budget_for(op_names, dtype: str) -> tuple:
    """The budget of a tensor computed in `dtype` by the ops `op_names`."""
    base = DEFAULT_TOLERANCE.get(dtype, EXACT)
    return widest([base] + [op_budget(name, dtype) for name in op_names])


def value_budget(dtype_of_value: str, compute_dtype: str, op_names) -> tuple:
    """Budget for one compared value: exact for integers/booleans; else `budget_for` in the
    checked dtype, or in the value's own dtype where that is narrower (a float32 parameter's
    gradient in a float64 check is rounded to float32 at the end)."""
    if dtype_of_value not in FLOAT_DTYPES:
        return EXACT
    return widest([budget_for(op_names, compute_dtype), budget_for(op_names, dtype_of_value)])


def override(budget: tuple, name: str, rtol=None, atol=None) -> tuple:
    """Apply call-level overrides: a number for every tensor, or {tensor name: number}."""
    new_rtol, new_atol = budget
    if isinstance(rtol, dict):
        new_rtol = rtol.get(name, new_rtol)
    elif rtol is not None:
        new_rtol = float(rtol)
    if isinstance(atol, dict):
        new_atol = atol.get(name, new_atol)
    elif atol is not None:
        new_atol = float(atol)
    return (float(new_rtol), float(new_atol))


def format_number(value: float) -> str:
    """Compact scientific notation for tables: 0, 3.1e-07, inf."""
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.1e}"
