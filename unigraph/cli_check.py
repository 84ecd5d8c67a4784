"""`unigraph check PATH...`: check scripts' CHECKS on every target, one merged report.

The script convention
---------------------
A checkable script defines `CHECKS` at module level: a dict from a check name to what to
check, or a function with no arguments returning that dict (so that building models and
example inputs happens only when a check runs):

    CHECKS = {
        # name: (function or ug.nn.Module, (example inputs, ...))
        "counter": (counter, (0, 10)),
        # an optional third item holds ug.check options for this entry
        "mlp": (model, (x,), {"rtol": 1e-4, "grads": True}),
        # a dict with `model`, `loss_fn`, `optimizer`, `batches` (and `steps`, options)
        # runs ug.check_training instead
        "mlp_training": {"model": model, "loss_fn": F.cross_entropy,
                         "optimizer": lambda m: ug.optim.SGD(m, lr=0.1),
                         "batches": [(x, y)], "steps": 3},
    }

The script is imported, not run: its `if __name__ == "__main__":` block does not execute,
and its folder is put on `sys.path` as `python script.py` would.

Paths and the matrix
--------------------
PATH is a script (`FILE:NAME` checks one entry), a folder (every script in it, at any
depth, that assigns CHECKS) or a glob (`"models/**/*.py"`). Every entry runs on every
target of `--targets`, for every seed of `--seeds` and dtype of `--dtypes`: one task per
(entry, target, seed, dtype), each in a worker process (see `unigraph.checking.suite`).
Options given on the command line win over an entry's own; the entry's own win over the
defaults (seed 0, float32, gradients on).

ONNX models
-----------
An `.onnx` path (alone, in a folder, or matched by a glob) is one check: the model imported
with `ug.onnx.load`, run on every target against the float64 reference, plus a row
`onnxruntime:file` where ONNX Runtime runs the file itself against the same reference (it
catches a misread op, with which every target would agree). Inputs are seeded random draws
of the shapes and dtypes the graph declares (`--dim batch=4` sizes a symbolic dimension), or
`--inputs inputs.npz` (one array per graph input, by name). Gradients with respect to the
float initializers (and float inputs) only with `--grads`.

    unigraph check model.onnx --dim batch=8
    unigraph check model.onnx --inputs inputs.npz --grads --targets torch,paddle

Saved artifacts
---------------
An artifact `unigraph export` wrote is checked against the CHECKS entry it came from (its
`ARTIFACT.unigraph.json`). One without that file (`.tflite`, `.pt2`, a SavedModel folder, a
Paddle inference model from elsewhere) is loaded by its own framework alone and run on
seeded random inputs of its signature (or `--inputs`): the report lists its inputs and
outputs (shapes, dtypes, finite or not) and says it is NOT CHECKED, as there is no reference
to compare with (exit 0 when it ran, 1 when it did not).

Executors: `--executor local` (default: `-j N` worker processes here) or `--executor ray`
(each task one Ray task, on the cluster at `--address` / `RAY_ADDRESS`, else on a local Ray
started for the run); a crash or a timeout of one task is that task's result.

Exit status: 0 when every target agrees everywhere, 1 when any disagrees, fails, crashes
or times out, 2 when the command cannot run as asked (no such file, a script that raises
on import or defines no CHECKS, an unknown entry, target, dtype or executor).

    unigraph check examples/mlp.py
    unigraph check examples/ --targets torch,tensorflow:static --seeds 0,1,2
    unigraph check "models/**/*.py" --executor ray --cache .unigraph-cache --html report.html
"""

from __future__ import annotations

import argparse
import os
import sys


def split_file_name(text: str) -> tuple[str, str | None]:
    """`"model.py:mlp"` -> ("model.py", "mlp"); a Windows drive colon is not a separator."""
    head, sep, tail = text.rpartition(":")
    if sep and head and tail and not os.path.exists(text) and "/" not in tail \
            and "\\" not in tail:
        return head, tail
    return text, None


def add_check_command(subparsers) -> argparse.ArgumentParser:
    """Add the `check` subcommand to the `unigraph` parser; its handler is
    `run_check_command` (set as the `handler` default)."""
    parser = subparsers.add_parser(
        "check", help="check that every target agrees with the float64 NumPy reference",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH[:NAME]",
                        help="scripts defining CHECKS, folders or globs; NAME picks one entry")
    matrix = parser.add_argument_group("what to check")
    matrix.add_argument("--targets", default="all",
                        help="comma-separated targets (torch:static) or backends (torch); "
                             "default: every available target")
    matrix.add_argument("--seeds", default=None, help="comma-separated seeds (default: 0)")
    matrix.add_argument("--dtypes", "--dtype", dest="dtypes", default=None,
                        help="comma-separated: float32 (default), float64, float16")
    matrix.add_argument("--grads", action=argparse.BooleanOptionalAction, default=None,
                        help="compare gradients too (default: each entry's own, else yes)")
    matrix.add_argument("--training", type=int, default=None, metavar="STEPS",
                        help="steps of the training entries (0: leave them out)")
    onnx = parser.add_argument_group("ONNX models (.onnx paths)")
    onnx.add_argument("--dim", action="append", default=None, metavar="NAME=SIZE",
                      help="size of a symbolic input dimension (--dim batch=4); repeatable")
    onnx.add_argument("--inputs", default=None, metavar="FILE.npz",
                      help="the inputs, one array per graph input name (default: seeded "
                           "random inputs of the declared shapes and dtypes)")
    run = parser.add_argument_group("how to run it")
    run.add_argument("--executor", choices=("local", "ray", "inline"), default="local",
                     help="local worker processes (default), Ray tasks, or this process")
    run.add_argument("-j", "--jobs", type=int, default=None,
                     help="local worker processes at once (default: the number of cores)")
    run.add_argument("--address", default=None,
                     help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray)")
    run.add_argument("--num-cpus", type=float, default=1, help="CPUs per Ray task (1)")
    run.add_argument("--memory", default=None,
                     help="memory per Ray task, reserved by Ray's scheduler (2G, 512M)")
    run.add_argument("--max-retries", type=int, default=2,
                     help="Ray retries of a task whose Ray worker died (2)")
    run.add_argument("--working-dir", default=None,
                     help="folder Ray ships to the cluster's nodes (holding the scripts)")
    run.add_argument("--threads", type=int, default=1,
                     help="threads of each worker's framework (OMP_NUM_THREADS; 1)")
    run.add_argument("--timeout", type=float, default=600.0,
                     help="seconds before a task counts as hung and its worker is killed")
    run.add_argument("--cache", default=None, metavar="DIR",
                     help="keep results by content hash here; unchanged tasks are not rerun")
    run.add_argument("--isolate", action="store_true", help=argparse.SUPPRESS)  # the default
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=("table", "json"), default="table",
                     help="what to print: the table (default) or the JSON report")
    out.add_argument("--json", default=None, metavar="FILE", help="write the JSON report")
    out.add_argument("--html", default=None, metavar="FILE",
                     help="write a self-contained HTML report")
    out.add_argument("--verbose", "-v", action="store_true",
                     help="the full table of every model, also those that agree")
    out.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="a progress bar (default: when stderr is a terminal)")
    parser.set_defaults(handler=run_check_command)
    return parser


def parse_memory(text: str | None) -> int | None:
    """`"2G"` -> 2147483648; `"512M"`, `"100000"` (bytes)."""
    if text is None:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("B")
    scale = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        return int(float(number) * scale)
    except ValueError:
        raise ValueError(f"--memory: expected a size such as 2G or 512M, got {text!r}") \
            from None


def run_check_command(args) -> int:
    """The handler of `unigraph check`: runs the suite, prints and writes its report,
    returns the exit status."""
    from unigraph.checking.bare_artifact import artifact_format
    from unigraph.checking.suite import SuiteError, check_suite
    from unigraph.cli_export import run_check_artifact
    from unigraph.export.verify import is_exported_artifact

    artifacts = [path for path in args.paths if is_exported_artifact(path)]
    bare = [path for path in args.paths
            if path not in artifacts and artifact_format(path) is not None]
    if artifacts or bare:  # saved models, not scripts
        if len(artifacts) + len(bare) != len(args.paths):
            print("unigraph check: give saved artifacts and scripts in separate runs",
                  file=sys.stderr)
            return 2
        # `unigraph export` wrote these: each is checked against the entry it came from
        status = [run_check_artifact(path, args.format) for path in artifacts]
        return max(status + [_probe(path, args) for path in bare])
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    try:
        report = check_suite(
            args.paths, targets=args.targets, seeds=args.seeds, dtypes=args.dtypes,
            grads=args.grads, training_steps=args.training, executor=args.executor,
            jobs=args.jobs, timeout=args.timeout, cache=args.cache, address=args.address,
            num_cpus=args.num_cpus, memory=parse_memory(args.memory),
            max_retries=args.max_retries, working_dir=args.working_dir,
            threads=args.threads, progress=progress, dims=args.dim, inputs=args.inputs)
    except (SuiteError, ValueError) as error:
        print(f"unigraph check: {error}", file=sys.stderr)
        return 2
    for path, text in ((args.json, report.to_json), (args.html, report.to_html)):
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text())
    if args.format == "json":
        print(report.to_json())
    else:
        print(report.table(verbose=args.verbose))
    return 0 if report.ok else 1


def _probe(path: str, args) -> int:
    """A saved artifact without provenance: load and run it, report its shapes, and say
    that nothing was compared. 0 when it ran, 1 when it did not."""
    import json

    from unigraph.checking.bare_artifact import probe_artifact

    probe = probe_artifact(path, inputs=args.inputs, timeout=args.timeout)
    if args.format == "json":
        print(json.dumps(probe.to_dict(), indent=2))
    else:
        print(probe.summary())
    return 0 if probe.ran else 1


def main(argv=None) -> int:
    """`python -m unigraph.cli_check FILE[:NAME] ...` (the same as `unigraph check`)."""
    parser = argparse.ArgumentParser(prog="unigraph")
    add_check_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *(sys.argv[1:] if argv is None else argv)])
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
