"""Checking without the reference: the targets compared with each other.

The float64 reference cannot compute gradients of gradients (its VJP rules are NumPy code,
not ops it could differentiate again), so for a second-order function, or the gradient
check of a first-order one, it has no expected values. Then each target is compared with
the elementwise median of every target that produced the tensor: one wrong target among
three or more stands out (the median is the others' value), and two targets that disagree
both fail (the median is half way between them). The budget is twice the tensor's own,
since the median carries rounding of its own. With fewer than two targets there is nothing
to compare with, and the tensor fails as "unchecked": a check that cannot fail must not
pass.
"""

from __future__ import annotations

import numpy as np

from unigraph.checking import compare as cmp
from unigraph.checking.report import Comparison

WHAT = {"forward": "outputs", "gradient": "gradients"}


def expected_of(case, kind: str) -> tuple[list, list, list, list, str]:
    """(names, budgets, dtypes, shapes, comparison kind) of the tensors of `kind`."""
    if kind == "forward":
        values = case.graph.outputs
        return (case.output_names, case.output_budgets, [v.dtype for v in values],
                [tuple(v.shape) for v in values], "output")
    values = case.grad_graph.outputs[1:]
    return (case.grad_names, case.grad_budgets, case.grad_dtypes,
            [tuple(v.shape) for v in values], "grad")


def compare_across(case, reports: list, runs: dict) -> list:
    """Add to each report the comparisons, against the targets' median, of every kind the
    reference could not compute (`case.unreferenced`); update the statuses. Returns notes
    for the report."""
    notes = []
    for kind, reason in case.unreferenced.items():
        names, budgets, dtypes, shapes, label = expected_of(case, kind)
        produced = {r.target: _arrays(runs.get(r.target), kind) for r in reports}
        ran = [arrays for arrays in produced.values() if arrays is not None]
        for i, name in enumerate(names):
            candidates = [a[i] for a in ran if i < len(a) and np.shape(a[i]) == shapes[i]]
            median = (np.median(np.stack([np.asarray(a, np.float64) for a in candidates]),
                                axis=0) if len(candidates) >= 2 else None)
            budget = (2 * budgets[i][0], 2 * budgets[i][1])
            for report in reports:
                arrays = produced[report.target]
                if arrays is None:
                    continue
                actual = arrays[i] if i < len(arrays) else None
                report.comparisons.append(
                    _comparison(name, label, actual, median, budget, shapes[i], dtypes[i]))
        notes.append(f"{WHAT[kind]} not checked against the float64 reference ({reason}): "
                     f"each target is compared with the elementwise median of the {len(ran)} "
                     "targets that produced them, at twice the budget")
    for report in reports:
        if report.status in ("ok", "disagree") and not all(c.ok for c in report.comparisons):
            report.status = "disagree"
    return notes


def _arrays(run, kind: str):
    if run is None:
        return None
    return run.outputs if kind == "forward" else run.grads


def _comparison(name, label, actual, median, budget, shape, dtype) -> Comparison:
    size = int(np.prod(shape, dtype=np.int64))
    if actual is None:
        figures = cmp.Figures("shape", size=size, detail="missing")
    elif median is None:
        figures = cmp.Figures("unchecked", size=size, detail=(
            "no float64 reference and no other target to compare with: run the check on "
            "two or more targets"))
    else:
        figures = cmp.compare(actual, median, budget, dtype=dtype)
    return Comparison(name, label, figures, budget, shape, dtype)
