"""Benchmark unigraph against hand-written native code, workload by workload, target by target.

    python bench/run.py [--targets numpy:static,torch:eager,...] [--workloads conv2d,...]
                        [--repeat N] [--warmup N] [--threads N] [--json out.json]
                        [--isolate]

Default: every available target, every workload. For each pair, the workload written once
in unigraph (workloads.py) and the native version in the same style (native_<backend>.py)
run alternately in this process (harness.py), and one table is printed. See README.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before any TensorFlow import
os.environ.setdefault("GLOG_minloglevel", "2")  # Paddle's C++ log lines

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def _limit_threads(argv) -> None:
    """`--threads N`: every library's thread pool gets N threads, for unigraph and native
    alike. Thread pools read these variables when their library loads, so this runs before
    NumPy is imported (argparse comes later)."""
    if "--threads" in argv[:-1]:
        count = argv[argv.index("--threads") + 1]
        for variable in THREAD_VARIABLES:
            os.environ[variable] = count


if __name__ == "__main__":
    _limit_threads(sys.argv)

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402

# Targets fed NumPy arrays (their native baseline feeds NumPy to Session.run / exe.run);
# every other target gets `ug.tensor`s made once on it, as native eager code holds tensors.
FEEDS_NUMPY = {"tensorflow:static", "paddle:static"}
STATIC_GOAL, EAGER_GOAL, NUMPY_MLP_GOAL = 1.10, 1.3, 1.2


def goal_for(workload: str, target: Target):
    """The ratio the issues ask for, or None where the ratio is only reported."""
    if target.mode == "eager":
        return EAGER_GOAL
    if not workloads.WORKLOADS[workload].compute:
        return None
    if target.backend == "numpy" and workload.startswith("mlp"):
        return NUMPY_MLP_GOAL
    return STATIC_GOAL


def available_targets() -> list:
    from unigraph.plugins import all_targets, backends

    status = {name: backend.status()[0] for name, backend in backends().items()}
    return [t for t in all_targets() if status[t.backend]]


def native_builder(workload: str, target: Target):
    try:
        module = importlib.import_module(f"native_{target.backend}")
    except ModuleNotFoundError as error:
        if error.name != f"native_{target.backend}":
            raise
        raise LookupError(f"no hand-written baseline for backend {target.backend!r}") from None
    try:
        return module.BUILDERS[(workload, target.mode)]
    except KeyError:
        raise LookupError(f"native_{target.backend} has no {workload!r} for mode "
                          f"{target.mode!r}") from None


def unigraph_call(workload: str, target: Target, data: dict):
    """A zero-argument callable running the unigraph workload on `target` (made current by
    the caller)."""
    fn, inputs = workloads.UNIGRAPH[workload](data)
    if str(target) not in FEEDS_NUMPY:
        inputs = [ug.tensor(x) for x in inputs]
    return lambda: fn(*inputs)


def measure(workload: str, target: Target, repeat: int, warmup: int,
            min_sample_s: float = 0.02) -> harness.Row:
    """Time one workload on one target against its native baseline; never raises."""
    row = harness.Row(workload, str(target), goal=goal_for(workload, target))
    try:
        data = workloads.make_data(workload)
        with ug.use_backend(target.backend, target.mode):  # raises if unigraph lacks it
            native = native_builder(workload, target)(data)
            comparison = harness.compare(unigraph_call(workload, target, data), native,
                                         repeat=repeat, warmup=warmup,
                                         min_sample_s=min_sample_s)
        native_result = getattr(native, "to_reference", lambda r: r)(comparison.native_result)
        difference = harness.max_difference(comparison.unigraph_result, native_result)
    except Exception as error:  # one broken target must not hide the others
        row.error = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return row
    return harness.row_of(workload, str(target), comparison, row.goal, difference)


def import_time(runs: int = 5) -> dict:
    """`import unigraph` in fresh interpreters: seconds (median, min), frameworks imported."""
    code = ("import sys, time; t = time.perf_counter(); import unigraph; "
            "t = time.perf_counter() - t; "
            "print(t, ','.join(m for m in ('torch', 'tensorflow', 'paddle') if m in sys.modules))")
    times, frameworks = [], set()
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.split()
        times.append(float(out[0]))
        frameworks.update(f for f in out[1:2] if f)
    return {"median_s": statistics.median(times), "min_s": min(times),
            "frameworks_imported": sorted(frameworks)}


def run_isolated(targets, args) -> list:
    """Each target in its own interpreter (a crash there becomes an error row here)."""
    rows = []
    for target in targets:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "rows.json"
            command = [sys.executable, str(Path(__file__).resolve()), "--targets", str(target),
                       "--workloads", ",".join(args.workloads), "--repeat", str(args.repeat),
                       "--warmup", str(args.warmup), "--json", str(out), "--no-import-time",
                       "--quiet"]
            if args.threads:
                command += ["--threads", str(args.threads)]
            done = subprocess.run(command, capture_output=True, text=True)
            if out.exists():
                rows += [_row_from(d) for d in json.loads(out.read_text())["rows"]]
            else:
                reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])
                rows += [harness.Row(w, str(target), error=f"worker died: {reason[-1]}")
                         for w in args.workloads]
    return rows


def _row_from(record: dict) -> harness.Row:
    record = dict(record)
    record.pop("met", None)
    return harness.Row(**record)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", help="comma-separated backend:mode (default: all available)")
    parser.add_argument("--workloads", default=",".join(workloads.WORKLOADS),
                        help="comma-separated, from: " + ", ".join(workloads.WORKLOADS))
    parser.add_argument("--repeat", type=int, default=15, help="samples per side (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per side first")
    parser.add_argument("--threads", type=int,
                        help="threads for every library's pool (default: theirs); 1 steadies "
                             "timings on a small or busy machine")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--isolate", action="store_true",
                        help="run each target in its own process")
    parser.add_argument("--no-import-time", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in workloads.WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(workloads.WORKLOADS)}")
    targets = ([Target.parse(t) for t in args.targets.split(",") if t.strip()]
               if args.targets else available_targets())
    # Paddle before TensorFlow: importing tensorflow first crashes paddle 3.3.1.
    targets.sort(key=lambda t: t.backend != "paddle")

    extra = {"threads": args.threads, "repeat": args.repeat, "warmup": args.warmup}
    if not args.no_import_time:
        extra["import_unigraph"] = imported = import_time()
        print(f"import unigraph: {imported['median_s'] * 1e3:.1f} ms median, "
              f"{imported['min_s'] * 1e3:.1f} ms min (fresh interpreter); frameworks "
              f"imported: {', '.join(imported['frameworks_imported']) or 'none'}\n")
    if args.isolate:
        rows = run_isolated(targets, args)
    else:
        rows = []
        for target in targets:
            for workload in args.workloads:
                rows.append(measure(workload, target, args.repeat, args.warmup))
                if not args.quiet and sys.stderr.isatty():
                    print(f"  {workload:13s} {target}: done", file=sys.stderr, flush=True)
    if not args.quiet:
        print(harness.format_table(rows))
    if args.json:
        harness.write_json(args.json, rows, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
