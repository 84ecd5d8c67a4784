"""`unigraph export FILE[:NAME] --format F -o OUT`: a script's CHECKS entries, written in a
framework's own saved format (see `unigraph.export`).

The entries and their example inputs come from the script's `CHECKS` (the convention of
`unigraph check`, `unigraph.checking.scripts`). A function entry `(fn, (inputs...))` is
exported as it is; a training entry (`model`, `loss_fn`, `optimizer`, `batches`) exports
a copy of its model in eval mode, on the inputs of its first batch (the model is what is
deployed: the training step itself is never exported).

With `--verify`, each artifact is then reloaded in a fresh process that imports only its
framework (never unigraph), run on the entry's example inputs and compared with the float64
reference; a disagreement makes the exit status 1.

Beside each artifact goes `ARTIFACT.unigraph.json`, naming the script and entry it came
from, so that `unigraph check ARTIFACT` (`run_check_artifact`) can verify it later
against that entry as it is then.

With `FILE:NAME`, OUT is the artifact's path. With `FILE` alone every entry is written, and
OUT is a folder holding one artifact per entry, named after the entry (`OUT/forward.pt2`).
The exit status is 0 when everything was written, 1 when an entry could not be exported,
2 when the script cannot be used.

    unigraph export examples/cond.py:branch --format torch -o branch.pt2
    unigraph export examples/mlp.py --format savedmodel -o exported/ --verify
    unigraph export examples/mlp.py:forward --format onnx -o mlp.onnx --dynamic-batch --verify

With `--dynamic-batch`, dim 0 of every array input is left unknown in the artifact (see
`ug.export(..., dynamic_batch=True)`); `--verify` and `unigraph check ARTIFACT` then also
run it on the example's first row alone and on its rows twice over.
"""

from __future__ import annotations

import argparse
import os
import sys

from unigraph.cli_check import split_file_name


def add_export_command(subparsers) -> argparse.ArgumentParser:
    """Add the `export` subcommand to the `unigraph` parser; its handler is
    `run_export_command` (set as the `handler` default)."""
    from unigraph.export import FORMATS

    parser = subparsers.add_parser(
        "export", help="write a script's CHECKS entries in a framework's own saved format",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE[:NAME]",
                        help="a script defining CHECKS; NAME picks one entry")
    parser.add_argument("--format", "-f", required=True, choices=list(FORMATS),
                        help="; ".join(f"{f.name}: {f.description}" for f in FORMATS.values()))
    parser.add_argument("--output", "-o", required=True, metavar="OUT",
                        help="the artifact's path (FILE:NAME), or a folder (FILE)")
    parser.add_argument("--verify", action="store_true",
                        help="reload each artifact without unigraph and compare it with the "
                             "float64 reference")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="leave dim 0 of every array input unknown, so the artifact runs "
                             "on any batch size (with --verify: checked on two other sizes)")
    parser.set_defaults(handler=run_export_command)
    return parser


def exportable_entry(entry) -> tuple:
    """(function or model, example inputs) to export for one CHECKS entry."""
    if entry.training is None:
        return entry.target, tuple(entry.inputs)
    batches = list(entry.training["batches"])
    if not batches:
        raise ValueError(f"CHECKS[{entry.name!r}] has no batches to take example inputs from")
    first = batches[0]
    inputs = first[:-1] if isinstance(first, tuple | list) and len(first) > 1 else (first,)
    return entry.target.copy().eval(), tuple(inputs)


def artifact_path(output: str, entry_name: str, format: str, several: bool) -> str:
    """Where one entry's artifact goes: OUT itself, or OUT/NAME + the format's suffix."""
    from unigraph.export import FORMATS

    if not several:
        return output
    return os.path.join(output, entry_name + FORMATS[format].suffix)


def run_export_command(args) -> int:
    """The handler of `unigraph export`: writes the artifacts, returns the exit status."""
    from unigraph.checking.scripts import ScriptError, load_checks
    from unigraph.errors import UnigraphError
    from unigraph.export import export
    from unigraph.export.verify import other_batches, verify, write_provenance

    path, name = split_file_name(args.file)
    try:
        entries = load_checks(path)
    except ScriptError as error:
        print(f"unigraph export: {error}", file=sys.stderr)
        return 2
    if name is not None:
        if name not in entries:
            print(f"unigraph export: {path} has no check {name!r}; its CHECKS are: "
                  f"{', '.join(entries)}", file=sys.stderr)
            return 2
        entries = {name: entries[name]}
    several = name is None and len(entries) > 1
    status = 0
    for entry_name, entry in entries.items():
        target = artifact_path(args.output, entry_name, args.format, several)
        dynamic = getattr(args, "dynamic_batch", False)
        try:
            fn, inputs = exportable_entry(entry)
            if getattr(args, "verify", False):
                checked = verify(fn, *inputs, path=target, format=args.format,
                                 dynamic_batch=dynamic,
                                 more_inputs=other_batches(inputs) if dynamic else ())
                written = checked.path
            else:
                checked = None
                written = export(fn, *inputs, path=target, format=args.format, name=entry_name,
                                 dynamic_batch=dynamic)
        except (UnigraphError, ValueError, TypeError) as error:
            print(f"unigraph export: {path}:{entry_name}: {error}", file=sys.stderr)
            status = 1
            continue
        write_provenance(written, args.format, path, entry_name, dynamic)
        note = " (its model in eval mode; the training step is not exported)" \
            if entry.training is not None else ""
        print(f"{path}:{entry_name} -> {written} ({args.format}){note}")
        if checked is not None:
            print(f"  {checked.summary()}")
            status = status if checked.ok else 1
    return status


def run_check_artifact(path: str, format: str = "table") -> int:
    """`unigraph check ARTIFACT`: verify an artifact `unigraph export` wrote against the
    entry it came from (see `unigraph.export.verify.check_artifact`). Prints the verdict;
    returns 0 when it agrees, 1 when it disagrees or cannot run, 2 when it cannot be
    checked (no provenance, the script or entry gone)."""
    import json

    from unigraph.errors import UnigraphError
    from unigraph.export.verify import check_artifact

    try:
        result = check_artifact(path)
    except UnigraphError as error:
        print(f"unigraph check: {error}", file=sys.stderr)
        return 2
    if format == "json":
        print(json.dumps({"artifact": path, "format": result.format, "ok": result.ok,
                          "max_abs_error": None if result.error else result.max_abs_error,
                          "error": result.error}, indent=2))
    else:
        print(result.summary())
    return 0 if result.ok else 1


def main(argv=None) -> int:
    """`python -m unigraph.cli_export FILE[:NAME] ...` (the same as `unigraph export`)."""
    parser = argparse.ArgumentParser(prog="unigraph")
    add_export_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["export", *(sys.argv[1:] if argv is None else argv)])
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
