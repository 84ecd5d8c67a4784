"""What a check suite found: every task's result, and one merged `Report` per model variant.

`print(report)` gives a table grouped by model (one row per model, counts per outcome, the
worst error relative to its budget), then the full table of every (model, seed, dtype) that
failed, as `ug.check` prints it. `to_json()` holds every task and every merged report;
`to_html()` is a self-contained page with one row per model x target (x seed x dtype), each
failure linking to its localisation and the traced graph with the diverging node marked.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field

from unigraph.checking.compare import format_number
from unigraph.checking.report import CheckFailed, Report, TargetReport, odd_one_out

OUTCOMES = {"ok": "ok", "unsupported": "skipped", "disagree": "failed", "error": "failed",
            "crashed": "crashed", "timeout": "crashed"}


@dataclass
class TaskResult:
    """One (script entry, target, seed, dtype): its status and single-target Report."""

    id: int
    file: str
    entry: str
    target: str
    seed: int | None
    dtype: str | None
    status: str
    seconds: float = 0.0
    cached: bool = False
    error: str = ""
    report: Report | None = None
    graph_html: str | None = None
    log: str = ""
    node: str = ""

    @staticmethod
    def from_task(task: dict, result: dict, cached: bool = False) -> TaskResult:
        data = result.get("report")
        return TaskResult(
            task["id"], task["file"], task["entry"], task["target"], task["seed"],
            task["dtype"], result.get("status", "error"), float(result.get("seconds", 0.0)),
            cached, result.get("error", ""), report_from_dict(data) if data else None,
            result.get("graph_html"), result.get("log", ""), result.get("node", ""))

    @property
    def model(self) -> str:
        return f"{self.file}:{self.entry}"

    @property
    def outcome(self) -> str:
        """"ok", "failed", "crashed" (crashes and timeouts) or "skipped"."""
        return OUTCOMES.get(self.status, "failed")

    @property
    def target_report(self) -> TargetReport:
        """The target's row: from its Report, or made from the error when none came back."""
        if self.report is not None and self.report.targets:
            return self.report.targets[0]
        return TargetReport(self.target, self.status, error=self.error, seconds=self.seconds)

    def worst(self):
        """The compared tensor furthest from its budget, or None."""
        comparisons = self.target_report.comparisons
        return max(comparisons, key=lambda c: c.figures.ratio) if comparisons else None

    def to_dict(self) -> dict:
        return {"id": self.id, "file": self.file, "entry": self.entry, "target": self.target,
                "seed": self.seed, "dtype": self.dtype, "status": self.status,
                "seconds": round(self.seconds, 4), "cached": self.cached, "error": self.error,
                "log": self.log, "node": self.node}


def report_from_dict(data: dict) -> Report:
    report = Report(data["name"], data["dtype"],
                    [TargetReport.from_dict(t) for t in data["targets"]], kind=data["kind"],
                    reference=data["reference"], skipped=dict(data["skipped"]),
                    odd_one_out=data.get("odd_one_out", ""), notes=list(data["notes"]))
    report.across = list(data.get("across", []))
    return report


@dataclass
class ModelRun:
    """One model variant (script entry, seed, dtype) over every target: a merged Report."""

    file: str
    entry: str
    seed: int | None
    dtype: str | None
    tasks: list = field(default_factory=list)
    report: Report | None = None

    @property
    def model(self) -> str:
        return f"{self.file}:{self.entry}"

    @property
    def variant(self) -> str:
        seed = self.seed if self.seed is not None else "default"
        dtype = self.dtype or (self.report.dtype if self.report else "default")
        return f"seed {seed}, {dtype}"


def merge(tasks: list, skipped: dict) -> Report:
    """The tasks of one model variant (one per target) as one Report, like `ug.check`'s."""
    first = next((t.report for t in tasks if t.report is not None), None)
    targets, notes, not_checked = [], [], dict(skipped)
    for task in tasks:
        if task.report is not None:
            targets.extend(task.report.targets)
            not_checked.update(task.report.skipped)
            notes.extend(n for n in task.report.notes if n not in notes)
        else:
            targets.append(task.target_report)
    dtype = first.dtype if first is not None else (tasks[0].dtype or "float32")
    report = Report(first.name if first is not None else tasks[0].entry, dtype, targets,
                    kind=first.kind if first is not None else "check",
                    reference=first.reference if first is not None else "numpy float64",
                    skipped=not_checked, notes=notes)
    report.across = list(first.across) if first is not None else []
    report.odd_one_out = odd_one_out(targets)
    return report


class SuiteReport:
    """The result of `ug.check_suite` / `unigraph check PATH...`.

    >>> report = ug.check_suite(["examples/"], seeds=[0, 1])
    >>> report.ok, report.counts, len(report.models)
    >>> print(report); report.assert_ok()
    """

    def __init__(self, tasks: list, skipped: dict | None = None, executor: str = "local",
                 seconds: float = 0.0, ran: int = 0):
        self.tasks = list(tasks)
        self.skipped = dict(skipped or {})
        self.executor = executor
        self.seconds = seconds
        self.ran = ran  # tasks run (the others came from the cache)
        groups: dict = {}
        for task in self.tasks:
            key = (task.file, task.entry, task.seed, task.dtype)
            groups.setdefault(key, ModelRun(*key)).tasks.append(task)
        self.models = list(groups.values())
        for run in self.models:
            run.report = merge(run.tasks, self.skipped)

    @property
    def ok(self) -> bool:
        """True when some task ran and every model variant agrees on every target."""
        return bool(self.models) and all(run.report.ok for run in self.models)

    @property
    def counts(self) -> dict:
        counts = {"tasks": len(self.tasks), "ok": 0, "failed": 0, "crashed": 0, "skipped": 0}
        for task in self.tasks:
            counts[task.outcome] += 1
        counts["cached"] = sum(task.cached for task in self.tasks)
        return counts

    def reports(self) -> list:
        """The merged Report of every model variant, in order."""
        return [run.report for run in self.models]

    def assert_ok(self) -> SuiteReport:
        """Raise `CheckFailed` with the table unless `ok`."""
        if not self.ok:
            raise CheckFailed("\n" + self.table())
        return self

    def __repr__(self):
        return f"<SuiteReport: {len(self.models)} model variants, {self.counts}>"

    def __str__(self):
        return self.table()

    # -- the terminal table ---------------------------------------------------------------
    def table(self, verbose: bool = False) -> str:
        """Grouped by model: one row each, then the full table of each failing variant
        (every variant with `verbose`)."""
        rows = [("model", "runs", "ok", "failed", "crashed", "skipped", "worst/budget",
                 "seconds")]
        by_model: dict = {}
        for task in self.tasks:
            by_model.setdefault(task.model, []).append(task)
        for model, tasks in by_model.items():
            outcomes = [t.outcome for t in tasks]
            ratios = [w.figures.ratio for t in tasks if (w := t.worst()) is not None]
            worst = max(ratios) if ratios else None
            rows.append((model, str(len(tasks)), *(str(outcomes.count(k)) for k in
                                                   ("ok", "failed", "crashed", "skipped")),
                         "-" if worst is None else _ratio_text(worst),
                         f"{sum(t.seconds for t in tasks):.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [self.headline(), ""]
        for index, row in enumerate(rows):
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        for run in self.models:
            if verbose or not run.report.ok:
                lines += ["", f"{run.model} ({run.variant})", run.report.table(not verbose)]
        for name, why in self.skipped.items():
            lines.append(f"not checked: {name} ({why})")
        counts = self.counts
        if self.ok:
            lines.append(f"OK: {counts['ok']} of {counts['tasks']} tasks agree")
        else:
            failing = [run for run in self.models if not run.report.ok]
            lines.append(f"FAILED: {len(failing)} of {len(self.models)} model variants "
                         f"({counts['failed']} failed, {counts['crashed']} crashed tasks)")
        return "\n".join(lines)

    def headline(self) -> str:
        counts = self.counts
        rate = self.ran / self.seconds if self.seconds and self.ran else 0.0
        return (f"unigraph check: {len(self.models)} model variants, {counts['tasks']} tasks "
                f"on {self.executor} in {self.seconds:.1f} s ({rate:.2f} tasks/s): "
                f"{counts['ok']} ok, {counts['failed']} failed, {counts['crashed']} crashed, "
                f"{counts['skipped']} skipped, {counts['cached']} from the cache")

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"ok": self.ok, "executor": self.executor, "seconds": round(self.seconds, 3),
                "counts": self.counts, "skipped": self.skipped,
                "models": [{"file": run.file, "entry": run.entry, "seed": run.seed,
                            "dtype": run.dtype, "ok": run.report.ok,
                            "report": run.report.to_dict()} for run in self.models],
                "tasks": [task.to_dict() for task in self.tasks]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    # -- HTML -------------------------------------------------------------------------------
    def to_html(self, title: str = "unigraph check") -> str:
        """A self-contained page (inline CSS, no scripts, nothing fetched)."""
        from unigraph.checking.suite_html import render_html

        return render_html(self, title)


def _ratio_text(ratio: float) -> str:
    return "inf" if math.isinf(ratio) else f"{ratio:.2g}"


def escape(text) -> str:
    return html.escape(str(text), quote=True)


def figures_cells(task: TaskResult) -> tuple:
    """(worst tensor, max abs, max rel, of budget) for a task's row."""
    worst = task.worst()
    if worst is None:
        return ("-", "-", "-", "-")
    f = worst.figures
    if f.status in ("shape", "dtype", "unchecked"):
        return (worst.name, f.detail, "-", "-")
    rel = format_number(f.max_rel) if f.rel_count else "-"
    return (worst.name, format_number(f.max_abs), rel, _ratio_text(f.ratio))
