"""`unigraph check FILE[:NAME]`: the agreement table for every target, from a script.

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
and its folder is put on `sys.path` as `python script.py` would. `FILE:NAME` runs one entry;
`FILE` runs them all. Options given on the command line (`--dtype`, `--no-grads`) win over
an entry's own; the entry's own win over the defaults. The exit status is 0 when every
target agrees everywhere, 1 when any disagrees or fails, 2 when the script cannot be used.

With `--isolate` each target runs in its own process (see `unigraph.checking.isolate`); the
worker imports the script again and takes the entry by name, so entries need no other
naming. Training entries run in this process. Loading scripts and running entries is
library code (`unigraph.checking.scripts`); this module is only the command line.

    unigraph check examples/mlp.py
    unigraph check examples/mlp.py:mlp --targets torch,tensorflow:static --format json
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("file", metavar="FILE[:NAME]",
                        help="a script defining CHECKS; NAME picks one entry")
    parser.add_argument("--targets", default="all",
                        help="comma-separated targets (torch:static) or backends (torch); "
                             "default: every available target")
    parser.add_argument("--isolate", action="store_true",
                        help="run each target in its own worker process")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before an isolated target counts as hung (default 600)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--dtype", default=None, help="float32 (default), float64 or float16")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="one row per tensor, also for targets that agree everywhere")
    parser.add_argument("--no-grads", dest="grads", action="store_false", default=None,
                        help="compare outputs only, not gradients")
    parser.set_defaults(handler=run_check_command)
    return parser


def run_entry(entry, path: str, args):
    """Run one entry with the command line's options; returns its Report."""
    from unigraph.checking.scripts import run_entry as run

    overrides = {}
    if args.dtype is not None:
        overrides["dtype"] = args.dtype
    if args.grads is not None:
        overrides["grads"] = args.grads
    return run(entry, path, targets=args.targets, isolate=args.isolate, timeout=args.timeout,
               **overrides)


def run_check_command(args) -> int:
    """The handler of `unigraph check`: prints the reports, returns the exit status."""
    from unigraph.checking.scripts import ScriptError, load_checks

    path, name = split_file_name(args.file)
    try:
        entries = load_checks(path)
    except ScriptError as error:
        print(f"unigraph check: {error}", file=sys.stderr)
        return 2
    if name is not None:
        if name not in entries:
            print(f"unigraph check: {path} has no check {name!r}; its CHECKS are: "
                  f"{', '.join(entries)}", file=sys.stderr)
            return 2
        entries = {name: entries[name]}
    reports = {entry_name: run_entry(entry, path, args) for entry_name, entry in entries.items()}
    ok = all(report.ok for report in reports.values())
    if args.format == "json":
        print(json.dumps({"file": path, "ok": ok,
                          "checks": {n: r.to_dict() for n, r in reports.items()}}, indent=2))
    else:
        compact = not getattr(args, "verbose", False)
        print("\n\n".join(report.table(compact) for report in reports.values()))
    return 0 if ok else 1


def main(argv=None) -> int:
    """`python -m unigraph.cli_check FILE[:NAME] ...` (the same as `unigraph check`)."""
    parser = argparse.ArgumentParser(prog="unigraph")
    add_check_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *(sys.argv[1:] if argv is None else argv)])
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
