"""The differential tester: generate programs with hypothesis, run them everywhere, count,
and shrink one failing program per distinct failure to a minimal reproducer.

Two hypothesis runs with the same seed generate the same sequence of programs:

1. `survey`: `count` valid programs (phase "generate" only); every program runs on every
   target and is counted; the first program of each failure *signature* (target, status,
   error class or output/gradient) is kept.
2. `shrink`, once per signature: the same generation again, in which every program is
   skipped (ill-conditioned ones rejected again, so hypothesis sees the same outcomes)
   until the kept program comes up; it fails again, and hypothesis shrinks it while it
   still fails with that signature. If it does not come up, the unshrunk program is
   reported.

No example database is used (nothing is written into the repository). A run is
reproducible from its seed, count and strategy options (hypothesis sizes its examples by
the count, so another count draws other programs).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, assume, given, seed, settings

from unigraph.testing.random_programs.model import Program, render
from unigraph.testing.random_programs.runner import IllConditioned, Outcome, evaluate
from unigraph.testing.random_programs.strategies import programs
from unigraph.testing.random_programs.training import Training

STATUSES = ("ok", "disagree", "raw error", "crash", "timeout", "refused", "unclear refusal",
            "open-dim refusal", "open-dim limit")


@dataclass
class Failure:
    """One distinct failure: its signature, how many programs showed it, the first such
    program and, after shrinking, the smallest one with every target's outcome on it."""

    signature: tuple
    count: int
    program: Program
    outcome: Outcome
    shrunk: Program | None = None
    shrunk_outcomes: list = field(default_factory=list)

    @property
    def reproducer(self) -> Program:
        return self.shrunk or self.program


@dataclass
class Survey:
    """What a run found: per-target counts, reference errors, distinct failures."""

    targets: list
    programs: int = 0
    open_programs: int = 0  # of them, those whose input_spec leaves a dim open
    training_programs: int = 0  # of them, training programs (`training.Training`)
    rejected: int = 0
    reference_failed: int = 0  # programs the reference could not run (not run elsewhere)
    counts: dict = field(default_factory=lambda: defaultdict(Counter))  # target -> status
    failures: dict = field(default_factory=dict)  # signature -> Failure
    refusals: dict = field(default_factory=lambda: defaultdict(Counter))  # target -> message
    seconds: float = 0.0
    rejected_keys: set = field(default_factory=set)

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def record(self, outcome: Outcome, program: Program) -> None:
        failure = self.failures.get(outcome.signature)
        if failure is None:
            self.failures[outcome.signature] = Failure(outcome.signature, 1, program, outcome)
        else:
            failure.count += 1


def _key(program: Program) -> str:
    return hashlib.sha1(render(program).encode()).hexdigest()


def _settings(count: int, phases) -> settings:
    return settings(max_examples=count, database=None, phases=phases, deadline=None,
                    derandomize=False, report_multiple_bugs=False, print_blob=False,
                    suppress_health_check=list(HealthCheck))


def survey(targets, count: int, seed_value: int = 0, grads: bool = True, workers=None,
           progress=None, **strategy) -> Survey:
    """Run `count` valid random programs on `targets`; see the module docstring.

    >>> found = survey(["torch:eager"], count=50)
    >>> found.counts["torch:eager"]["disagree"]
    0
    """
    found = Survey([str(t) for t in targets])
    started = time.perf_counter()

    @_settings(count, [Phase.generate])
    @seed(seed_value)
    @given(programs(**strategy))
    def run(program):
        try:
            result = evaluate(program, found.targets, grads, workers)
        except IllConditioned:
            found.rejected += 1
            found.rejected_keys.add(_key(program))
            assume(False)
        found.programs += 1
        found.open_programs += program.is_open
        found.training_programs += isinstance(program, Training)
        if result.reference_error:
            found.reference_failed += 1
            found.record(_reference_outcome(result.reference_error), program)
        for outcome in result.outcomes:
            found.counts[outcome.target][outcome.status] += 1
            if outcome.failed:
                found.record(outcome, program)
            elif outcome.status in ("refused", "open-dim limit"):
                message = re.sub(r"random_program_\w+\.py:\d+", "<line>", outcome.detail)
                prefix = "(open-dim limit) " if outcome.status == "open-dim limit" else ""
                found.refusals[outcome.target][prefix + message.splitlines()[0][:300]] += 1
        if progress is not None:
            progress(found)

    run()
    found.seconds = time.perf_counter() - started
    return found


REFERENCE = "numpy:eager (reference)"


def _reference_outcome(error: str) -> Outcome:
    """A program the reference cannot run: the generator or the reference is wrong."""
    return Outcome(REFERENCE, "reference error", error.split(":")[0], error)


def _signatures(result) -> list:
    outcomes = list(result.outcomes)
    if result.reference_error:
        outcomes.append(_reference_outcome(result.reference_error))
    return [o.signature for o in outcomes]


class _Reproduced(Exception):
    """Raised inside hypothesis when a program fails with the signature being shrunk."""


def shrink(found: Survey, failure: Failure, count: int, seed_value: int = 0,
           grads: bool = True, workers=None, **strategy) -> Failure:
    """Shrink `failure.program` (see the module docstring); fill `failure.shrunk` and
    `failure.shrunk_outcomes` (the smallest program on every target)."""
    target = failure.signature[0]
    targets = [] if target == REFERENCE else [target]
    wanted = _key(failure.program)
    state = {"seen": False, "smallest": None}

    @_settings(count, [Phase.generate, Phase.shrink])
    @seed(seed_value)
    @given(programs(**strategy))
    def run(program):
        key = _key(program)
        if not state["seen"]:
            if key in found.rejected_keys:
                assume(False)
            if key != wanted:
                return
            state["seen"] = True
        try:
            result = evaluate(program, targets, grads, workers)
        except IllConditioned:
            assume(False)
        if failure.signature in _signatures(result):
            state["smallest"] = program
            raise _Reproduced(failure.signature)

    try:
        run()
    except _Reproduced:
        pass
    if state["smallest"] is not None:
        failure.shrunk = state["smallest"]
    try:
        result = evaluate(failure.reproducer, found.targets, grads, workers)
        failure.shrunk_outcomes = result.outcomes
        if result.reference_error:
            failure.shrunk_outcomes = [_reference_outcome(result.reference_error)]
    except IllConditioned:  # cannot happen for a program that failed, but never crash here
        failure.shrunk_outcomes = []
    return failure


# -- reporting -------------------------------------------------------------------------------
def counts_table(found: Survey) -> str:
    """Per-target counts, one row per target."""
    shown = [s for s in STATUSES if any(found.counts[t][s] for t in found.targets)
             or s in ("ok", "disagree", "raw error")]
    width = max(len(t) for t in found.targets) if found.targets else 6
    widths = [max(9, len(s)) for s in shown]
    lines = [f"{'target':<{width}}  {'programs':>8}  "
             + "  ".join(f"{s:>{w}}" for s, w in zip(shown, widths))]
    for target in found.targets:
        total = sum(found.counts[target].values())
        lines.append(f"{target:<{width}}  {total:>8}  " + "  ".join(
            f"{found.counts[target][s]:>{w}}" for s, w in zip(shown, widths)))
    return "\n".join(lines)


def refusals_text(found: Survey) -> str:
    """The distinct refusals (unigraph errors naming the user's line), per target."""
    lines = []
    for target, messages in sorted(found.refusals.items()):
        for message, count in messages.most_common():
            lines.append(f"{target}: {count} x {message}")
    return "\n".join(lines)


def reproducer_text(failure: Failure) -> str:
    """The reproducer: which targets fail and how, then the standalone source."""
    target, status, what = failure.signature
    failing = [o for o in failure.shrunk_outcomes if o.failed]
    lines = [f"## {status} on {target} ({what}): {failure.count} program(s)"
             + ("" if failure.shrunk else " [not shrunk]")]
    for outcome in failing or [failure.outcome]:
        lines.append(f"#   {outcome.target}: {outcome.status} {outcome.what}: "
                     f"{outcome.detail.splitlines()[0] if outcome.detail else ''}"[:400])
    title = f"Fails on {', '.join(o.target for o in failing) or target}: {status} ({what})."
    shown = [o.target for o in failing if o.target != REFERENCE] or (
        [] if target == REFERENCE else [target])
    source = render(failure.reproducer, title=title, targets=shown)
    return "\n".join(lines) + "\n" + source
