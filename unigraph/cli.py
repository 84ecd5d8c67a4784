"""The `unigraph` command: `backends`, `run`, `check`."""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def _backends_command(args) -> int:
    """Print every target, its framework version and whether it can run here."""
    from unigraph.plugins import backends, load_errors

    rows = [("target", "framework", "version", "status")]
    for backend in backends().values():
        available, reason = backend.status()
        for mode in backend.modes:
            rows.append((f"{backend.name}:{mode}", backend.framework, backend.version() or "-",
                         reason))
    for name, error in sorted(load_errors.items()):
        rows.append((f"{name}:*", "-", "-", f"plugin failed to load: {error}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return 1 if load_errors else 0


def _run_command(args) -> int:
    """Run a script with the target chosen on the command line (via the env variables, so
    the script's own `ug.use_backend` calls still take precedence)."""
    os.environ["UNIGRAPH_BACKEND"] = args.backend
    os.environ["UNIGRAPH_MODE"] = args.mode
    from unigraph.plugins import get_backend

    get_backend(args.backend, args.mode)  # fail early with the list of what is installed
    sys.argv = [args.file, *args.args]
    runpy.run_path(args.file, run_name="__main__")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="unigraph", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("backends", help="list targets, framework versions and status")
    run = commands.add_parser("run", help="run a script on a target")
    run.add_argument("file")
    run.add_argument("--backend", default="numpy")
    run.add_argument("--mode", default="eager")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    try:
        from unigraph.cli_check import add_check_command
    except ImportError:
        add_check_command = None
    if add_check_command is not None:
        add_check_command(commands)
    args = parser.parse_args(argv)
    handlers = {"backends": _backends_command, "run": _run_command}
    handler = handlers.get(args.command) or args.handler
    from unigraph.errors import UnigraphError

    try:
        return handler(args)
    except UnigraphError as error:
        print(f"unigraph: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
