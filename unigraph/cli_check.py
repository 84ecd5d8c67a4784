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
naming. Training entries run in this process.

    unigraph check examples/mlp.py
    unigraph check examples/mlp.py:mlp --targets torch,tensorflow:static --format json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

TRAINING_KEYS = ("model", "loss_fn", "optimizer", "batches")


@dataclass
class CheckEntry:
    """One entry of a script's `CHECKS`."""

    name: str
    target: object  # the function or model (for training: the model)
    inputs: tuple = ()
    options: dict = field(default_factory=dict)
    training: dict | None = None  # check_training arguments, for a training entry


class ScriptError(Exception):
    """The script cannot be checked: no CHECKS, a malformed entry, an unknown name."""


def load_checks(path: str) -> dict:
    """{name: CheckEntry} from the script at `path` (imported once per process)."""
    from unigraph.checking.isolate import load_script

    if not os.path.isfile(path):
        raise ScriptError(f"no such file: {path}")
    module = load_script(path)
    checks = getattr(module, "CHECKS", None)
    if checks is None:
        raise ScriptError(
            f"{path} defines no CHECKS: add `CHECKS = {{'name': (function_or_model, "
            "(example inputs...))}}` (see `unigraph check --help`)"
        )
    if callable(checks):
        checks = checks()
    if not isinstance(checks, dict) or not checks:
        raise ScriptError(f"{path}: CHECKS must be a non-empty dict, got {type(checks).__name__}")
    return {str(name): _entry(path, str(name), value) for name, value in checks.items()}


def _entry(path: str, name: str, value) -> CheckEntry:
    where = f"{path}: CHECKS[{name!r}]"
    if isinstance(value, dict):
        if all(key in value for key in TRAINING_KEYS):
            training = dict(value)
            return CheckEntry(name, training["model"], training=training)
        if "fn" in value and "inputs" in value:
            options = {k: v for k, v in value.items() if k not in ("fn", "inputs")}
            return CheckEntry(name, value["fn"], tuple(value["inputs"]), options)
        raise ScriptError(f"{where}: a dict entry needs either fn and inputs, or "
                          f"{', '.join(TRAINING_KEYS)}")
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        inputs = value[1] if isinstance(value[1], tuple | list) else (value[1],)
        options = dict(value[2]) if len(value) == 3 else {}
        return CheckEntry(name, value[0], tuple(inputs), options)
    raise ScriptError(f"{where}: expected (function_or_model, (inputs...)) or "
                      "(function_or_model, (inputs...), {options})")


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


def _options(entry: CheckEntry, args) -> dict:
    options = dict(entry.options)
    if args.dtype is not None:
        options["dtype"] = args.dtype
    if args.grads is not None:
        options["grads"] = args.grads
    return options


def run_entry(entry: CheckEntry, path: str, args):
    """Run one entry; returns its Report."""
    from unigraph.checking import check, check_training, resolve_targets
    from unigraph.checking.isolate import check_isolated
    from unigraph.checking.run import prepare

    options = _options(entry, args)
    options.setdefault("name", entry.name)
    if entry.training is not None:
        arguments = {k: v for k, v in entry.training.items() if k != "grads"}
        arguments.setdefault("name", entry.name)
        if args.dtype is not None:
            arguments["dtype"] = args.dtype
        report = check_training(targets=args.targets, **arguments)
        if args.isolate:
            report.notes.append("training checks run in this process (--isolate applies to "
                                "function checks)")
        return report
    if not args.isolate:
        return check(entry.target, *entry.inputs, targets=args.targets, **options)
    targets, skipped = resolve_targets(args.targets)
    settings = {"grads": options.get("grads", True), "dtype": options.get("dtype", "float32"),
                "rtol": options.get("rtol"), "atol": options.get("atol"),
                "seed": options.get("seed", 0), "name": options["name"],
                "localize": options.get("localize_divergence", True)}
    case = prepare(entry.target, entry.inputs, settings["dtype"], settings["grads"],
                   settings["rtol"], settings["atol"], settings["seed"], settings["name"])
    source = {"kind": "checks", "path": os.path.abspath(path), "name": entry.name}
    return check_isolated(case, source, targets, skipped, settings, args.timeout)


def run_check_command(args) -> int:
    """The handler of `unigraph check`: prints the reports, returns the exit status."""
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
