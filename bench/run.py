"""Benchmark unigraph against what users of each framework write without it.

    python bench/run.py [--targets numpy:static,torch:eager,...] [--workloads conv_n1,...]
                        [--rounds 5] [--repeat N] [--threads 1] [--json out.json]
    python bench/run.py --quick                 # every pair once, in this process: agreement
                                                # (exit status 1 if a pair fails or differs)
    python bench/run.py --load out.json --markdown   # the saved results as a Markdown table

Every (target, workload) pair runs in its own process (`measure.py`), once per round; the
pairs are shuffled anew each round, so that a slow minute of a busy machine lands on
different pairs each time. Inside a process, unigraph and the native code alternate. The
table shows, per pair, the median over rounds of unigraph time / idiomatic native time, its
spread (min-max over rounds), and whether the goal of issue 19 is met. See README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import measure  # noqa: E402
import workloads  # noqa: E402

from unigraph.config import Target  # noqa: E402

# The goals of issue 19 (ratio unigraph / idiomatic native, median over rounds).
STATIC_GOAL, EAGER_GOAL, NUMPY_STATIC_GOAL, CONTROL_GOAL, BUILD_GOAL = 1.05, 1.2, 1.1, 1.5, 2.0
WORKER_TIMEOUT_S = 900
# Largest |unigraph - native| / (1 + |native|) between last results that --quick accepts.
AGREEMENT_TOLERANCE = 1e-5


def goal_for(workload: str, target: Target) -> float:
    """The ratio issue 19 asks for: control flow <= 1.5 everywhere, a 100-layer build <= 2;
    on the compute workloads eager <= 1.2, static and function <= 1.05, numpy:static <= 1.1."""
    kind = workloads.WORKLOADS[workload].kind
    if kind == "control":
        return CONTROL_GOAL
    if kind == "build":
        return BUILD_GOAL
    if target.mode == "eager":
        return EAGER_GOAL
    return NUMPY_STATIC_GOAL if target.backend == "numpy" else STATIC_GOAL


def available_targets() -> list:
    """Every target whose framework loads and that has idiomatic native code to compare
    with (an `idiomatic_<backend>.py`; onnxruntime, inference only, has none)."""
    from unigraph.plugins import all_targets, backends

    status = {name: backend.status()[0] for name, backend in backends().items()}
    return [t for t in all_targets()
            if status[t.backend] and (HERE / f"idiomatic_{t.backend}.py").exists()]


# -- running ------------------------------------------------------------------------------
def run_worker(target: str, workload: str, args) -> dict:
    """One pair in a fresh interpreter; a crash or a timeout becomes an error record."""
    env = dict(os.environ)
    if args.threads:
        env.update({variable: str(args.threads) for variable in measure.THREAD_VARIABLES})
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "record.json"
        command = [sys.executable, str(HERE / "measure.py"), target, workload,
                   "--json", str(out)]
        if args.repeat:
            command += ["--repeat", str(args.repeat)]
        if args.threads:
            command += ["--threads", str(args.threads)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"workload": workload, "target": target, "times": {}, "difference": {},
                    "error": f"worker ran past {WORKER_TIMEOUT_S} s"}
        if out.exists():
            return json.loads(out.read_text())
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        return {"workload": workload, "target": target, "times": {}, "difference": {},
                "error": f"worker died ({done.returncode}): {lines[-1]}"}


def run_rounds(pairs: list, args, after_round=None) -> list:
    """Every pair once per round, each in its own process, in a new random order per round.
    `after_round(records)` is called after each round (saving partial results)."""
    records = []
    for round_index in range(args.rounds):
        order = list(pairs)
        random.Random(round_index).shuffle(order)
        for count, (target, workload) in enumerate(order, 1):
            started = time.perf_counter()
            record = run_worker(target, workload, args)
            record["round"] = round_index
            records.append(record)
            if not args.quiet:
                print(f"  round {round_index + 1}/{args.rounds} [{count}/{len(order)}] "
                      f"{target} {workload}: {time.perf_counter() - started:.1f} s"
                      f"{' ERROR' if record['error'] else ''}", file=sys.stderr, flush=True)
        if after_round:
            after_round(records)
    return records


# -- summarising --------------------------------------------------------------------------
def _ratio(record: dict, side: str):
    times = record["times"]
    if record["error"] or side not in times:
        return None
    return times["unigraph"]["median"] / times[side]["median"]


def summarise(records: list, pairs: list) -> list:
    """One row per pair: medians over rounds, the ratio's spread, the goal."""
    rows = []
    for target, workload in pairs:
        mine = [r for r in records if r["target"] == target and r["workload"] == workload]
        ratios = [x for x in (_ratio(r, "native") for r in mine) if x is not None]
        hand = [x for x in (_ratio(r, "hand") for r in mine) if x is not None]
        good = [r for r in mine if not r["error"]]
        row = {"target": target, "workload": workload, "rounds": len(ratios),
               "goal": goal_for(workload, Target.parse(target)),
               "errors": sorted({r["error"] for r in mine if r["error"]})}
        if ratios:
            row.update(
                unigraph_ms=statistics.median(r["times"]["unigraph"]["median"] for r in good)
                * 1e3,
                native_ms=statistics.median(r["times"]["native"]["median"] for r in good) * 1e3,
                ratio=statistics.median(ratios), low=min(ratios), high=max(ratios),
                hand=statistics.median(hand) if hand else None,
                difference=max(max(r["difference"].values()) for r in good),
            )
        rows.append(row)
    return rows


def met(row: dict) -> str:
    if "ratio" not in row:
        return "error"
    return "yes" if row["ratio"] <= row["goal"] else "NO"


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def _r(value) -> str:
    return "-" if value is None else f"{value:.2f}" if value < 10 else f"{value:.1f}"


COLUMNS = ("target", "workload", "native ms", "unigraph ms", "ratio", "spread", "goal", "met",
           "vs hand", "max diff")


def format_table(rows: list) -> str:
    """The rows as one aligned text table, the goals tally and any errors underneath."""
    lines = [COLUMNS]
    for row in rows:
        if "ratio" not in row:
            lines.append((row["target"], row["workload"], *"-" * 4, f"<={row['goal']:.2f}",
                          "error", "-", "-"))
            continue
        lines.append((row["target"], row["workload"], _ms(row["native_ms"]),
                      _ms(row["unigraph_ms"]), _r(row["ratio"]),
                      f"{_r(row['low'])}-{_r(row['high'])}", f"<={row['goal']:.2f}", met(row),
                      _r(row["hand"]), f"{row['difference']:.1e}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    right = {2, 3, 4, 5, 8, 9}
    text = []
    for n, line in enumerate(lines):
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths))]
        text.append("  ".join(cells).rstrip())
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    tally = [met(row) for row in rows]
    text += ["", f"goals met: {tally.count('yes')} of {len(rows)}, missed: {tally.count('NO')}"
             f", errors: {tally.count('error')}"]
    errors = [f"  {row['workload']} on {row['target']}: {error}"
              for row in rows for error in row["errors"]]
    if errors:
        text += ["", "errors:", *errors]
    return "\n".join(text)


def format_markdown(rows: list) -> str:
    """The ratios as the Markdown table of the README: targets x workloads, each cell
    "median (min-max)", in bold where the goal is missed."""
    names = list(dict.fromkeys(row["workload"] for row in rows))
    targets = list(dict.fromkeys(row["target"] for row in rows))
    cells = {(row["target"], row["workload"]): row for row in rows}
    text = ["| target | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for target in targets:
        line = []
        for name in names:
            row = cells.get((target, name))
            if row is None or "ratio" not in row:
                line.append("error" if row else "")
                continue
            cell = f"{_r(row['ratio'])} ({_r(row['low'])}–{_r(row['high'])})"
            line.append(cell if met(row) == "yes" else f"**{cell}**")
        text.append(f"| `{target}` | " + " | ".join(line) + " |")
    return "\n".join(text)


def import_time(runs: int = 5) -> str:
    """`import unigraph` in fresh interpreters: the median and the frameworks it pulled in
    (it must pull in none)."""
    code = ("import sys, time; t = time.perf_counter(); import unigraph; "
            "t = time.perf_counter() - t; "
            "print(t, ','.join(m for m in ('torch', 'tensorflow', 'paddle') if m in sys.modules))")
    times, frameworks = [], set()
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.split()
        times.append(float(out[0]))
        frameworks.update(f for f in out[1:2] if f)
    return (f"import unigraph: {statistics.median(times) * 1e3:.0f} ms (median of {runs} fresh "
            f"interpreters), frameworks imported: {', '.join(sorted(frameworks)) or 'none'}")


def quick_check(pairs: list) -> list:
    """Every pair once, in this process, tiny sizes: do all sides run and agree?"""
    records = []
    for target, workload in pairs:
        record = measure.measure(workload, target, quick=True)
        record["round"] = 0
        records.append(record)
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", help="comma-separated backend:mode (default: all available)")
    parser.add_argument("--workloads", default=",".join(workloads.WORKLOADS),
                        help="comma-separated, from: " + ", ".join(workloads.WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3, help="processes per pair (default 3)")
    parser.add_argument("--repeat", type=int,
                        help="timed samples per side in each process (default 9; builds 3)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for every framework's pools (default 1; 0: theirs)")
    parser.add_argument("--quick", action="store_true",
                        help="each pair once in this process, small sizes: checks agreement")
    parser.add_argument("--json", help="also write every record and row to this file "
                                       "(rewritten after each round)")
    parser.add_argument("--load", help="print the results saved by --json instead of running")
    parser.add_argument("--markdown", action="store_true", help="print the README's table")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)

    if args.load:
        saved = json.loads(Path(args.load).read_text())
        before, after = saved["load_average"]
        print(f"{args.load}: {saved['rounds']} round(s), threads per framework: "
              f"{saved['threads'] or 'default'}, load average {before[0]:.2f} at the start, "
              f"{after[0]:.2f} at the end")
        print(format_markdown(saved["rows"]) if args.markdown else format_table(saved["rows"]))
        return 0
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in workloads.WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(workloads.WORKLOADS)}")
    targets = ([str(Target.parse(t)) for t in args.targets.split(",") if t.strip()]
               if args.targets else [str(t) for t in available_targets()])
    pairs = [(target, name) for target in targets for name in names]

    load_before = os.getloadavg()
    started = time.perf_counter()

    def save(records, load_after=None):
        if args.json:
            rounds = len({record["round"] for record in records})
            Path(args.json).write_text(json.dumps(
                {"rounds": rounds, "threads": args.threads,
                 "load_average": [load_before, load_after or os.getloadavg()],
                 "records": records, "rows": summarise(records, pairs)}, indent=1))

    records = quick_check(pairs) if args.quick else run_rounds(pairs, args, save)
    rows = summarise(records, pairs)
    load_after = os.getloadavg()
    save(records, load_after)
    rounds = 1 if args.quick else args.rounds
    threads = "as this process has them" if args.quick else args.threads or "default"
    print(f"unigraph / idiomatic native code, median over {rounds} round(s) of one process per "
          f"pair; threads per framework: {threads}; "
          f"{time.perf_counter() - started:.0f} s; load average "
          f"{load_before[0]:.2f} at the start, {load_after[0]:.2f} at the end"
          + ("\nquick mode: one call per side after one warm-up, small models: the times "
             "mean nothing, the agreement does" if args.quick else ""))
    if not args.quick:
        print(import_time())
    print(format_markdown(rows) if args.markdown else format_table(rows))
    if args.quick:  # a check: every pair ran and agreed
        bad = [row for row in rows if "ratio" not in row
               or row["difference"] > AGREEMENT_TOLERANCE]
        for row in bad:
            reason = "; ".join(row["errors"]) or f"max diff above {AGREEMENT_TOLERANCE:g}"
            print(f"FAILED: {row['workload']} on {row['target']}: {reason}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
