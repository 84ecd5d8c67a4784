"""`ug.check`: run one function or model on every target and compare with the reference."""

from __future__ import annotations

import time

import numpy as np

from unigraph.checking import compare as cmp
from unigraph.checking.across import compare_across
from unigraph.checking.localize import localize
from unigraph.checking.report import Comparison, Report, TargetReport, odd_one_out
from unigraph.checking.run import Case, TargetRun, prepare, run_target
from unigraph.config import Target


def check(fn_or_module, *inputs, targets="all", grads=True, dtype="float32", rtol=None,
          atol=None, isolate=False, timeout=600.0, localize_divergence=True, seed=0,
          name=None) -> Report:
    """Run `fn_or_module(*inputs)` on every target and compare each output (and, with
    `grads`, the gradients of a weighted sum of the outputs with respect to every floating
    input and parameter) with the NumPy engine run in float64.

    targets: "all" (every registered backend that is installed, every mode), or a list /
        comma-separated string of targets ("torch:static") and backends ("torch": all its
        modes).
    dtype: the floating dtype the whole computation runs in: floating inputs and
        parameters are cast to it for the check (the parameters hold a cast copy of their
        value; their own dtype and value are back afterwards), and budgets follow it.
    rtol, atol: override the budgets: a number for every tensor, or {tensor name: number}
        using the names in the report ("output[0]", "grad(x)", "grad(fc1.weight)").
    isolate: run each target in its own worker process, so that a crash or a hang
        (`timeout` seconds) is that target's failure; the function must then be importable
        (a module-level function or model, or a "module:name" / "path.py:name" string): a
        local function or lambda is refused up front. A script needs no
        `if __name__ == "__main__":` guard: a worker imports it by path, and a check it
        calls at module level is not run again there (see `unigraph.checking.isolate`).

    Gradients of gradients: the float64 reference cannot compute them (its VJP rules are
    NumPy code), so what it cannot compute is compared across the targets (each against
    their elementwise median, at twice the budget), and targets that cannot run the case
    at all (the NumPy engine) are listed as not checked; see `unigraph.checking.across`.

    >>> report = ug.check(counter, 0, 10)
    >>> print(report); report.assert_ok()
    """
    from unigraph.checking.scripts import loading_script, not_run_report

    if loading_script():  # a worker importing a script without a main guard: not again
        return not_run_report("check", name or getattr(fn_or_module, "__name__", "check"),
                              dtype)
    if isinstance(fn_or_module, str) or isolate:
        from unigraph.checking.isolate import resolve_source

        source, fn_or_module = resolve_source(fn_or_module)
        if isolate:
            return check_source(source, fn_or_module, inputs, targets=targets, grads=grads,
                                dtype=dtype, rtol=rtol, atol=atol, timeout=timeout,
                                localize_divergence=localize_divergence, seed=seed, name=name)
    chosen, skipped = resolve_targets(targets)
    return check_in_process(fn_or_module, inputs, chosen, skipped, grads=grads, dtype=dtype,
                            rtol=rtol, atol=atol, localize_divergence=localize_divergence,
                            seed=seed, name=name)[0]


def check_in_process(fn_or_module, inputs: tuple, chosen: list, skipped: dict, grads=True,
                     dtype="float32", rtol=None, atol=None, localize_divergence=True, seed=0,
                     name=None):
    """(Report, Case): `check` on the resolved targets `chosen`, in this process; the Case
    holds the traced graphs (a suite worker draws the diverging node from them)."""
    case = prepare(fn_or_module, inputs, dtype, grads, rtol, atol, seed, name)
    reports, runs = [], {}
    for target in chosen:
        report, run = run_and_evaluate(case, target, localize_divergence)
        reports.append(report)
        runs[str(target)] = run
    return finish(case, reports, runs, skipped), case


def check_source(source: dict, fn_or_module, inputs: tuple, targets="all", grads=True,
                 dtype="float32", rtol=None, atol=None, timeout=600.0,
                 localize_divergence=True, seed=0, name=None) -> Report:
    """`check(..., isolate=True)` where each worker finds the function again by `source`
    (see `unigraph.checking.isolate`); `fn_or_module` is that same function, here."""
    from unigraph.checking.isolate import check_isolated

    chosen, skipped = resolve_targets(targets)
    options = {"grads": grads, "dtype": dtype, "rtol": rtol, "atol": atol, "seed": seed,
               "name": name, "localize": localize_divergence}
    case = prepare(fn_or_module, inputs, dtype, grads, rtol, atol, seed, name)
    return check_isolated(case, source, chosen, skipped, options, timeout)


def run_and_evaluate(case: Case, target: Target, localize_divergence=True):
    """(TargetReport, TargetRun) for one target, in this process."""
    started = time.perf_counter()
    run = run_target(case, target)
    report = evaluate(case, target, run, localize_divergence)
    report.seconds = time.perf_counter() - started
    return report, run


def finish(case: Case, reports: list, runs: dict, skipped: dict) -> Report:
    """The Report: targets that cannot run the case at all move to `skipped`; what the
    reference cannot compute is compared across the targets (`across`)."""
    skipped = dict(skipped)
    for target in [r for r in reports if r.status == "unsupported"]:
        skipped[target.target] = target.error
        reports.remove(target)
    notes = compare_across(case, reports, runs) if case.unreferenced else []
    notes += sorted({run.grads_skipped for run in runs.values() if run.grads_skipped})
    report = Report(case.name, case.dtype, reports, skipped=skipped,
                    notes=list(case.notes) + notes)
    report.across = [kind for kind in ("forward", "gradient") if kind in case.unreferenced]
    if "forward" in case.unreferenced:
        report.reference = "targets' median"
    report.odd_one_out = odd_one_out(reports, lambda: _agree_with_each_other(case, runs))
    return report


# -- targets -----------------------------------------------------------------------------
def resolve_targets(targets) -> tuple[list, dict]:
    """(targets to run, {name: why it is not run}) for the `targets` argument of check."""
    from unigraph import plugins

    known = plugins.backends()
    skipped: dict = {}
    if targets is None or targets == "all":
        chosen = []
        for name, backend in known.items():
            available, reason = backend.status()
            if available:
                chosen.extend(Target(name, mode) for mode in backend.modes)
            else:
                skipped[name] = reason
        for name, error in plugins.load_errors.items():
            if name not in known:
                skipped[name] = f"plugin failed to load: {error}"
        return chosen, skipped
    if isinstance(targets, str | Target):
        targets = [targets]
    chosen = []
    for item in targets:
        if isinstance(item, Target):
            chosen.append(item)
            continue
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if ":" in part or part not in known:
                chosen.append(Target.parse(part))
            else:
                chosen.extend(Target(part, mode) for mode in known[part].modes)
    return list(dict.fromkeys(chosen)), skipped


class UnknownTargetError(ValueError):
    """A target or backend name that no registered backend has (a usage error)."""


def validate_targets(chosen: list) -> None:
    """Raise `UnknownTargetError` naming every target in `chosen` that no registered
    backend offers, and the targets that exist.

    >>> validate_targets([Target("torhc", "eager")])
    Traceback (most recent call last):
    UnknownTargetError: unknown target 'torhc:eager' ...
    """
    from unigraph import plugins

    known = plugins.backends()
    unknown = [str(t) for t in chosen
               if t.backend not in known or t.mode not in known[t.backend].modes]
    if not unknown:
        return
    offered = ", ".join(f"{name}:{mode}" for name, backend in known.items()
                        for mode in backend.modes)
    failed = "".join(f"; plugin {name!r} failed to load: {error}"
                     for name, error in plugins.load_errors.items())
    raise UnknownTargetError(
        f"unknown target{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}: the "
        f"registered targets are {offered} (a backend name alone means all its modes)"
        + failed)


# -- comparing ---------------------------------------------------------------------------
def evaluate(case: Case, target: Target, run: TargetRun, localize_divergence=True):
    """Compare one target's run with the reference; localize when it disagrees."""
    report = TargetReport(str(target), "ok", error=run.error, error_stage=run.error_stage)
    if run.unsupported:
        report.error = run.unsupported
        if run.outputs is None:
            report.status = "unsupported"
            return report
    if run.outputs is not None and case.has_reference("forward"):
        expected = case.reference_outputs()
        for i, (name, budget) in enumerate(zip(case.output_names, case.output_budgets)):
            value = case.graph.outputs[i]
            report.comparisons.append(_comparison(
                name, "output", run.outputs[i] if i < len(run.outputs) else None,
                expected[i], budget, value.dtype))
    if run.grads is not None and case.has_reference("gradient"):
        expected = case.reference_grads()
        for i, name in enumerate(case.grad_names):
            report.comparisons.append(_comparison(
                name, "grad", run.grads[i] if i < len(run.grads) else None, expected[i],
                case.grad_budgets[i], case.grad_dtypes[i]))
    if run.error:
        report.status = "error"
    elif not all(c.ok for c in report.comparisons):
        report.status = "disagree"
    if report.status != "ok" and localize_divergence:
        report.divergence = _localize(case, target, run, report)
    return report


def _comparison(name, kind, actual, expected, budget, dtype) -> Comparison:
    expected = np.asarray(expected)
    if actual is None:
        figures = cmp.Figures("shape", size=int(expected.size), detail="missing")
    else:
        figures = cmp.compare(actual, expected, budget, dtype=dtype)
    return Comparison(name, kind, figures, budget, tuple(expected.shape), dtype)


def _localize(case: Case, target: Target, run: TargetRun, report: TargetReport):
    from unigraph.plugins import get_backend

    try:
        backend = get_backend(target.backend, target.mode)
    except Exception:
        return None
    forward_bad = run.error_stage == "forward" or any(
        not c.ok for c in report.comparisons if c.kind == "output")
    kind = "forward" if forward_bad or case.grad_graph is None else "gradient"
    if not case.has_reference(kind):
        return None  # nothing to localize against: the targets are compared with each other
    try:
        divergence = localize(case, target, backend, kind)
    except Exception as error:  # localization is a diagnosis: it must not hide the result
        case.notes.append(f"{target}: localization failed: {type(error).__name__}: {error}")
        return None
    outside = divergence is not None and divergence.kind == "outside"
    if divergence is not None:
        divergence.graph = kind
    if outside and _only_overrides(case, run, report):
        divergence.note = ("every op is within its own budget, and every failing tensor would "
                           "pass its default budget: the rtol/atol given to the check are "
                           "tighter than what these ops promise in " + case.dtype)
    return divergence


def _only_overrides(case: Case, run: TargetRun, report: TargetReport) -> bool:
    """True when every failing tensor passes under its budget before rtol/atol overrides."""
    failing = [c for c in report.comparisons if not c.ok]
    if not failing or run.error:
        return False
    actual = dict(zip(case.output_names, run.outputs or []))
    expected = dict(zip(case.output_names, case.reference_outputs()))
    if run.grads is not None:
        actual.update(zip(case.grad_names, run.grads))
        expected.update(zip(case.grad_names, case.reference_grads()))
    for comparison in failing:
        default = case.default_budgets.get(comparison.name)
        if default is None or default == comparison.budget or comparison.name not in actual:
            return False
        if not cmp.compare(actual[comparison.name], expected[comparison.name], default).ok:
            return False
    return True


def _agree_with_each_other(case: Case, runs: dict) -> bool:
    arrays = [run.outputs or [] for run in runs.values()]
    budgets = [(2 * r, 2 * a) for r, a in case.output_budgets]
    first = arrays[0]
    for other in arrays[1:]:
        if len(other) != len(first):
            return False
        for a, b, budget in zip(other, first, budgets):
            if not cmp.compare(a, b.astype(np.float64), budget).ok:
                return False
    return True
