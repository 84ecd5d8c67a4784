"""The HTML page of a check suite: self-contained (inline CSS, no scripts, nothing fetched).

One table per model, one row per target x seed x dtype (`<tr class="task">` with data-model,
data-target, data-seed, data-dtype and data-status attributes, for people and programs);
each failing row links to its section below: the target's table as `ug.check` prints it
(with the first-divergence localization), the worker's log for a crash, and the traced
graph drawn by `unigraph.graph_view.to_html` with the diverging node marked, in an iframe whose
page is inlined (`srcdoc`).
"""

from __future__ import annotations

from unigraph.checking.suite_report import escape, figures_cells

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.4em 0; } td, th { padding: 2px 10px; }
th { border-bottom: 1px solid #999; text-align: left; }
tr.ok td.status { color: #176117; } tr.failed td.status, tr.crashed td.status { color: #b00; }
tr.failed, tr.crashed { background: #fdecea; } tr.skipped td.status { color: #777; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
section.failure { border-top: 2px solid #c00; margin-top: 1.5em; }
iframe { width: 100%; height: 480px; border: 1px solid #ccc; }
.summary td { font-family: ui-monospace, monospace; }
"""

HEADER = ("target", "seed", "dtype", "status", "worst tensor", "max abs", "max rel",
          "of budget", "seconds", "")


def render_html(report, title: str) -> str:
    """The page for a `SuiteReport`."""
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{escape(title)}</h1>", f"<p>{escape(report.headline())}</p>"]
    verdict = "OK" if report.ok else "FAILED"
    parts.append(f'<p id="verdict" class="{verdict.lower()}"><b>{verdict}</b></p>')
    for name, why in report.skipped.items():
        parts.append(f"<p>not checked: {escape(name)} ({escape(why)})</p>")
    failures: list = []
    by_model: dict = {}
    for task in report.tasks:
        by_model.setdefault(task.model, []).append(task)
    for index, (model, tasks) in enumerate(by_model.items()):
        parts.append(f'<h2 id="model-{index}">{escape(model)}</h2>')
        parts.append('<table class="model"><tr>' + "".join(f"<th>{escape(h)}</th>"
                                                             for h in HEADER) + "</tr>")
        for task in tasks:
            link = ""
            if task.outcome in ("failed", "crashed"):
                anchor = f"failure-{task.id}"
                failures.append((anchor, task))
                link = f'<a href="#{anchor}">localisation</a>'
            cells = (task.target, _seed(task), task.dtype or _dtype(task), task.status,
                     *figures_cells(task), f"{task.seconds:.2f}" + (" (cached)" * task.cached))
            parts.append(
                f'<tr class="task {task.outcome}" data-model="{escape(model)}" '
                f'data-target="{escape(task.target)}" data-seed="{escape(_seed(task))}" '
                f'data-dtype="{escape(task.dtype or _dtype(task))}" '
                f'data-status="{escape(task.status)}">'
                + "".join(f'<td class="{_column(i)}">{escape(c)}</td>'
                          for i, c in enumerate(cells)) + f"<td>{link}</td></tr>")
        parts.append("</table>")
    if failures:
        parts.append("<h2>Failures</h2>")
    for anchor, task in failures:
        parts.append(_failure(anchor, task))
    parts.append("</body></html>")
    return "\n".join(parts)


def _column(index: int) -> str:
    return HEADER[index].replace(" ", "-") or "link"


def _seed(task) -> str:
    return "default" if task.seed is None else str(task.seed)


def _dtype(task) -> str:
    return task.report.dtype if task.report is not None else "default"


def _failure(anchor: str, task) -> str:
    lines = [f'<section class="failure" id="{anchor}">',
             f"<h3>{escape(task.model)} on {escape(task.target)} (seed {escape(_seed(task))}, "
             f"{escape(task.dtype or _dtype(task))}): {escape(task.status)}</h3>"]
    if task.report is not None:
        lines.append(f"<pre>{escape(task.report.table(compact=False))}</pre>")
    elif task.error:
        lines.append(f"<pre>{escape(task.error)}</pre>")
    if task.log:
        lines.append(f"<details><summary>worker log</summary><pre>{escape(task.log)}</pre>"
                     "</details>")
    if task.graph_html:
        lines.append(f'<p>The traced graph, the first diverging node marked:</p>'
                     f'<iframe title="graph of {escape(task.model)}" '
                     f'srcdoc="{escape(task.graph_html)}"></iframe>')
    lines.append("</section>")
    return "\n".join(lines)
