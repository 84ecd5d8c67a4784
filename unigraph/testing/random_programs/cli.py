"""The command line of the random-program tester (`python -m unigraph.testing.random_programs`).

Prints per-target counts (programs run, agreements, disagreements, raw errors, crashes,
refusals, refusals due to an open dim), then one shrunk, standalone reproducer per
distinct failure. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time

from unigraph.testing.random_programs.tester import (
    counts_table,
    refusals_text,
    reproducer_text,
    shrink,
    survey,
)
from unigraph.testing.random_programs.workers import Workers


def _targets(text: str | None) -> list:
    from unigraph.plugins import all_targets

    known = [str(t) for t in all_targets()]
    if not text:
        return known
    chosen = []
    for part in text.split(","):
        part = part.strip()
        matches = [t for t in known if t == part or t.split(":")[0] == part]
        if not matches:
            raise SystemExit(f"unknown target {part!r}; targets: {', '.join(known)}")
        chosen += [t for t in matches if t not in chosen]
    return chosen


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m unigraph.testing.random_programs",
        description="Run random valid unigraph programs (forward and ug.grad) on every "
                    "target against the float64 NumPy reference; shrink each distinct "
                    "failure to a minimal standalone reproducer.")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    p.add_argument("--count", type=int, default=200, help="valid programs to run")
    p.add_argument("--targets", help="comma-separated targets or backends (default: all)")
    p.add_argument("--grad", action=argparse.BooleanOptionalAction, default=True,
                   help="also compare ug.grad of a weighted sum of the outputs")
    p.add_argument("--max-statements", type=int, default=8)
    p.add_argument("--max-depth", type=int, default=2, help="control-flow nesting")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--open-dims", action=argparse.BooleanOptionalAction, default=True,
                   help="let a program's input_spec leave dims of its inputs open (None), "
                        "so static targets trace with those sizes unknown; --no-open-dims: "
                        "no input_spec, every dim known to the trace")
    p.add_argument("--training", action=argparse.BooleanOptionalAction, default=True,
                   help="about one draw in five is a training program: a small ug.nn model, "
                        "a loss and 1-3 ug.optim steps, comparing each step's loss, the "
                        "weights and the optimizer's state")
    p.add_argument("--training-only", action="store_true",
                   help="every draw is a training program (overrides --no-training)")
    p.add_argument("--no-shrink", action="store_true", help="report first programs as found")
    p.add_argument("--max-shrinks", type=int, default=20,
                   help="shrink at most this many distinct failures")
    p.add_argument("--jobs", type=int, default=2, help="backends run in parallel")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds one program may take on one target")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    targets = _targets(args.targets)
    strategy = {"max_statements": args.max_statements, "max_depth": args.max_depth,
                "dtypes": tuple(args.dtypes.split(",")), "open_dims": args.open_dims,
                "training": "only" if args.training_only else args.training}
    started = time.perf_counter()

    def progress(found):
        if found.programs % 50 == 0:
            print(f"... {found.programs} programs, {len(found.failures)} distinct failures, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    with Workers(timeout=args.timeout, jobs=args.jobs) as workers:
        found = survey(targets, args.count, args.seed, args.grad, workers, progress,
                       **strategy)
        print(f"{found.programs} programs x {len(targets)} targets (seed {args.seed}, "
              f"{'forward and grad' if args.grad else 'forward only'}; {found.open_programs} "
              f"with dims left open by input_spec; {found.training_programs} training "
              f"programs; {found.rejected} ill-conditioned programs "
              f"rejected), {found.seconds:.0f} s\n")
        print(counts_table(found))
        if found.reference_failed:
            print(f"({found.reference_failed} programs the reference could not run)")
        if found.refusals:
            print("\nrefusals (unigraph errors naming the user's line):")
            print(refusals_text(found))
        failures = sorted(found.failures.values(), key=lambda f: f.signature)
        for index, failure in enumerate(failures):
            if not args.no_shrink and index < args.max_shrinks:
                shrink(found, failure, args.count, args.seed, args.grad, workers, **strategy)
            print()
            print(reproducer_text(failure))
    print(f"\n{len(failures)} distinct failure(s); {time.perf_counter() - started:.0f} s in all")
    return 1 if found.failed else 0
