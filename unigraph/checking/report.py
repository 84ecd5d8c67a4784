"""What a check found: per target and per compared tensor, and where a target diverged.

`print(report)` gives a compact table (target x tensor: status, max abs, max rel, the
tolerance that would have passed, the budget), then the first-divergence localization of
each disagreeing target, the odd one out, and what was not checked. `report.ok`,
`report.assert_ok()` and `report.to_json()` are for programs and CI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from unigraph.checking.compare import Figures, format_number

MAX_ROWS_WHEN_OK = 4  # a target whose tensors all pass gets one summary row above this


class CheckFailed(AssertionError):
    """Raised by `Report.assert_ok()`; the message is the report's table."""


@dataclass
class Comparison:
    """One compared tensor: an output, a gradient, a loss or a weight after training."""

    name: str
    kind: str  # "output", "grad", "loss" or "weight"
    figures: Figures
    budget: tuple  # (rtol, atol)
    shape: tuple = ()
    dtype: str = ""

    @property
    def ok(self) -> bool:
        return self.figures.ok

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "status": self.figures.status,
                "rtol": self.budget[0], "atol": self.budget[1], "shape": list(self.shape),
                "dtype": self.dtype, "figures": self.figures.to_dict()}

    @staticmethod
    def from_dict(data: dict) -> Comparison:
        return Comparison(data["name"], data["kind"], Figures.from_dict(data["figures"]),
                          (data["rtol"], data["atol"]), tuple(data["shape"]), data["dtype"])


@dataclass
class Divergence:
    """Where a target starts to differ from the reference.

    kind: "forward" (an op's own output is wrong when fed the reference's inputs),
        "outside" (no node of the traced graph is wrong: see `note`),
        "gradient" (an op's VJP is wrong when fed the reference's inputs and cotangent),
        "error" (the op raised on this target), or "accumulated" (no single op exceeds its
        budget; `op`/`source` then name the first value whose error left its budget).
    within: the control-flow nodes around it, outermost first ("grad at model.py:30").
    own: the op's own error; carried: the error of that value in the target's full run.
    values: the ids of the blamed node's outputs, to highlight it in `unigraph.graph_view`;
    graph: which traced graph holds it, "forward" or "gradient".
    """

    target: str
    kind: str
    op: str = ""
    source: str = ""
    attrs: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    own: Figures | None = None
    carried: Figures | None = None
    budget: tuple = (0.0, 0.0)
    error: str = ""
    within: list = field(default_factory=list)
    note: str = ""
    values: list = field(default_factory=list)
    graph: str = "forward"

    def to_dict(self) -> dict:
        data = dict(self.__dict__)
        data["own"] = self.own.to_dict() if self.own else None
        data["carried"] = self.carried.to_dict() if self.carried else None
        data["budget"] = list(self.budget)
        return data

    @staticmethod
    def from_dict(data: dict) -> Divergence:
        data = dict(data)
        data["own"] = Figures.from_dict(data["own"]) if data.get("own") else None
        data["carried"] = Figures.from_dict(data["carried"]) if data.get("carried") else None
        data["budget"] = tuple(data["budget"])
        return Divergence(**data)

    def __str__(self):
        where = f" ({self.source})" if self.source else ""
        context = "".join(f" inside {w}," for w in self.within)
        if self.kind == "outside":
            return f"not localized: {self.note}"
        if self.kind == "gradient":
            head = f"first divergence in the backward pass,{context} at the gradient of " \
                   f"{self.op}{where}"
        elif self.kind == "error":
            head = f"first failing node,{context} {self.op}{where}"
        elif self.kind == "accumulated":
            head = "no single node exceeds its own budget: the error accumulates; the first " \
                   f"value out of budget,{context} is {self.op}{where}"
        else:
            head = f"first divergence,{context} at {self.op}{where}"
        lines = [head]
        attrs = ", ".join(f"{k}={v}" for k, v in self.attrs.items()) or "none"
        types = ", ".join(self.inputs) or "none"
        outs = ", ".join(self.outputs)
        lines.append(f"  attrs: {attrs}; inputs: {types}" + (f" -> {outs}" if outs else ""))
        rtol, atol = self.budget
        budget = f"budget atol {format_number(atol)}, rtol {format_number(rtol)}"
        if self.error:
            lines.append(f"  raised {self.error}")
        if self.own is not None:
            fed = "fed the reference's inputs" + (" and cotangent" if self.kind == "gradient"
                                                  else "")
            lines.append(f"  {fed}, its own error: {_figures_text(self.own)} ({budget})")
        if self.carried is not None:
            lines.append(f"  in the full run that value was off by {_figures_text(self.carried)}")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def _figures_text(figures: Figures) -> str:
    if figures.status in ("shape", "dtype", "unchecked"):
        return figures.detail
    rel = f", max rel {format_number(figures.max_rel)}" if figures.rel_count else ""
    text = (f"max abs {format_number(figures.max_abs)}{rel}, needs atol "
            f"{format_number(figures.needed_atol)}, rtol {format_number(figures.needed_rtol)}")
    if figures.worst is not None and figures.worst_actual is not None:
        text += (f"; worst at {list(figures.worst)}: {figures.worst_actual:.7g} vs "
                 f"{figures.worst_expected:.7g}")
    if figures.status == "nan/inf":
        text += f"; {figures.detail}"
    return text


@dataclass
class TargetReport:
    """One target's result. status: "ok", "disagree", "error", "crashed", "timeout", or
    "unsupported" (the target cannot run the case: the Report lists it as not checked)."""

    target: str
    status: str
    comparisons: list = field(default_factory=list)
    error: str = ""
    error_stage: str = ""
    divergence: Divergence | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return {"target": self.target, "status": self.status, "error": self.error,
                "error_stage": self.error_stage, "seconds": round(self.seconds, 4),
                "comparisons": [c.to_dict() for c in self.comparisons],
                "divergence": self.divergence.to_dict() if self.divergence else None}

    @staticmethod
    def from_dict(data: dict) -> TargetReport:
        return TargetReport(
            data["target"], data["status"],
            [Comparison.from_dict(c) for c in data["comparisons"]], data["error"],
            data["error_stage"],
            Divergence.from_dict(data["divergence"]) if data.get("divergence") else None,
            data.get("seconds", 0.0),
        )


@dataclass
class Report:
    """The result of `ug.check` or `ug.check_training`.

    >>> report = ug.check(counter, 0, 10)
    >>> print(report); report.assert_ok()
    """

    name: str
    dtype: str
    targets: list
    kind: str = "check"  # or "training"
    reference: str = "numpy float64"
    skipped: dict = field(default_factory=dict)  # target or plugin -> why it did not run
    odd_one_out: str = ""
    notes: list = field(default_factory=list)
    # "forward", "gradient": what was compared across the targets, without the reference
    across: list = field(default_factory=list)
    # called at module level while unigraph imported the script in a worker: not run there
    not_run: bool = False

    @property
    def ok(self) -> bool:
        """True when at least one target ran and every target agrees with the reference
        (and for a check that was `not_run` in a worker: nothing failed there)."""
        return self.not_run or (bool(self.targets) and all(t.ok for t in self.targets))

    def failing(self) -> list:
        return [t for t in self.targets if not t.ok]

    def __getitem__(self, target) -> TargetReport:
        for report in self.targets:
            if report.target == str(target):
                return report
        raise KeyError(f"no target {str(target)!r} in this report")

    def assert_ok(self) -> Report:
        """Raise `CheckFailed` (an AssertionError) with the table unless `ok`."""
        if not self.ok:
            raise CheckFailed("\n" + str(self))
        return self

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype,
                "reference": self.reference, "ok": self.ok,
                "targets": [t.to_dict() for t in self.targets], "skipped": self.skipped,
                "odd_one_out": self.odd_one_out, "notes": self.notes, "across": self.across}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self):
        return render(self)

    def table(self, compact: bool = True) -> str:
        """The printed form; `compact=False` gives one row per tensor even when a target
        passes everywhere (`print(report)` folds those into one row)."""
        return render(self, compact)

    def __repr__(self):
        verdict = "ok" if self.ok else f"{len(self.failing())} failing"
        return f"<Report {self.name!r}: {len(self.targets)} targets, {verdict}>"


def odd_one_out(reports: list, targets_agree=None) -> str:
    """Name the target (or backend) that disagrees when the others agree (3+ targets).

    targets_agree: a function telling whether the targets' results agree with each other;
    asked only when every target disagrees with the reference, to suspect the reference.

    >>> odd_one_out(report.targets)
    'paddle:static (the 8 other targets agree)'
    """
    from unigraph.config import Target

    if len(reports) < 3:
        return ""
    failing = [r for r in reports if not r.ok]
    passing = [r for r in reports if r.ok]
    if not failing:
        return ""
    if passing:
        if len(failing) == 1:
            return f"{failing[0].target} (the {len(passing)} other targets agree)"
        backends = {Target.parse(r.target).backend for r in failing}
        if len(backends) == 1 and len(passing) >= 2:
            names = ", ".join(r.target for r in failing)
            return f"the {backends.pop()} backend ({names}; the {len(passing)} other " \
                   "targets agree)"
        return ""
    if all(r.status == "disagree" for r in failing) and targets_agree is not None \
            and targets_agree():
        return ("the reference: every target agrees with every other, none with the float64 "
                "reference (suspect the op definition, or a budget too tight)")
    return ""


# -- the table ---------------------------------------------------------------------------
HEADER = ("target", "tensor", "status", "max abs", "max rel", "needed atol, rtol",
          "budget atol, rtol")


def _row(target: str, comparison: Comparison) -> tuple:
    f = comparison.figures
    if f.status in ("shape", "dtype", "unchecked"):
        return (target, comparison.name, f.status, f.detail, "", "", "")
    rtol, atol = comparison.budget
    return (target, comparison.name, f.status, format_number(f.max_abs), _rel_text([f]),
            f"{format_number(f.needed_atol)}, {format_number(f.needed_rtol)}",
            f"{format_number(atol)}, {format_number(rtol)}")


def _summary_row(target: str, comparisons: list) -> tuple:
    worst = max(comparisons, key=lambda c: c.figures.ratio)
    f = worst.figures
    rtol, atol = worst.budget
    return (target, f"all {len(comparisons)} tensors", "ok",
            format_number(max(c.figures.max_abs for c in comparisons)),
            _rel_text([c.figures for c in comparisons]),
            f"{format_number(f.needed_atol)}, {format_number(f.needed_rtol)}",
            f"{format_number(atol)}, {format_number(rtol)}")


def _rel_text(figures: list) -> str:
    """The max rel error over the elements where it means something (`Figures.rel_count`);
    "-" where there are none (every reference value is next to zero, or an exact tensor)."""
    counted = [f.max_rel for f in figures if f.rel_count]
    return format_number(max(counted)) if counted else "-"


def _rows(report: TargetReport, compact: bool) -> list:
    name = report.target
    if report.status in ("error", "crashed", "timeout") and not report.comparisons:
        return [(name, "-", report.status, "-", "-", "-", "-")]  # the reason follows
    comparisons = report.comparisons
    if compact and all(c.ok for c in comparisons) and len(comparisons) > MAX_ROWS_WHEN_OK:
        rows = [_summary_row(name, comparisons)]
    else:
        rows = [_row(name, c) for c in comparisons]
    if report.status == "error":
        rows.append((name, "-", "error", "-", "-", "-", "-"))
    return rows


def _table(rows: list) -> list:
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(len(HEADER))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _has_floats(report: Report) -> bool:
    """False when every compared tensor is an integer or boolean one."""
    from unigraph.ir import FLOAT_DTYPES

    dtypes = {c.dtype for t in report.targets for c in t.comparisons}
    return not dtypes or bool(dtypes & set(FLOAT_DTYPES)) or report.kind == "training"


def render(report: Report, compact: bool = True) -> str:
    if report.not_run:
        return f"ug.{'check_training' if report.kind == 'training' else 'check'}: " \
            f"{report.name}: {report.notes[0]}"
    what = "training" if report.kind == "training" else "check"
    count = len(report.targets)
    # A function with only integer outputs (a counter) computes nothing in float32.
    in_dtype = f" in {report.dtype}" if _has_floats(report) else ""
    lines = [f"ug.{'check_training' if what == 'training' else 'check'}: {report.name}"
             f"{in_dtype} on {count} target{'s' * (count != 1)}, against the "
             f"{report.reference}" + (" reference" if report.reference.startswith("numpy")
                                      else "")]
    rows = [HEADER]
    previous = None
    for target in report.targets:
        for row in _rows(target, compact):
            shown = row if row[0] != previous else ("",) + row[1:]
            rows.append(shown)
            previous = row[0]
    lines.extend(_table(rows))
    for target in report.targets:
        if target.divergence is not None:
            body = str(target.divergence).replace("\n", "\n  ")
            lines.append(f"{target.target}: {body}")
        if target.error and target.ok:  # the part it cannot run (unsupported)
            lines.append(f"{target.target}: {target.error_stage} not checked: {target.error}")
        elif target.error and target.status != "disagree":
            stage = f" ({target.error_stage})" if target.error_stage else ""
            lines.append(f"{target.target}: {target.status}{stage}: {target.error}")
    if report.odd_one_out:
        lines.append(f"odd one out: {report.odd_one_out}")
    for name, why in report.skipped.items():
        lines.append(f"not checked: {name} ({why})")
    lines.extend(report.notes)
    failing = report.failing()
    if not report.targets:
        lines.append("FAILED: no target ran")
    elif failing:
        names = ", ".join(t.target for t in failing)
        lines.append(f"FAILED: {len(failing)} of {count} targets disagree or fail ({names})")
    else:
        against = {(): "the reference", ("forward", "gradient"): "each other",
                   ("forward",): "each other", ("gradient",): "the reference (gradients: "
                   "with each other)"}[tuple(report.across)]
        lines.append(f"OK: all {count} targets agree with {against}")
    return "\n".join(lines)
