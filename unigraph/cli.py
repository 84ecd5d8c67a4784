"""The `unigraph` command: `backends`, `run`, `check`."""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys

# Imports one backend's framework and prints its version: `unigraph backends --check` runs
# it in a fresh process per backend, so a framework that crashes on import is reported.
_IMPORT_CHECK = """
import sys
from unigraph.plugins import get_backend
backend = get_backend(sys.argv[1])
backend.load()
print(backend.version() or "?")
"""


def _backends_command(args) -> int:
    """Print every target, its framework version and whether it can run here."""
    from unigraph.plugins import backends, load_errors

    rows = [("target", "framework", "version", "status")]
    for backend in backends().values():
        available, reason = backend.status()
        if available and args.check:
            reason = _import_status(backend.name)
        for mode in backend.modes:
            rows.append((f"{backend.name}:{mode}", backend.framework, backend.version() or "-",
                         reason))
    for name, error in sorted(load_errors.items()):
        rows.append((f"{name}:*", "-", "-", f"plugin failed to load: {error}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    failed = any(not row[3].startswith("available") for row in rows[1:])
    return 1 if failed or load_errors else 0


def _import_status(name: str) -> str:
    """Import backend `name`'s framework in a subprocess: "available (imported)" or why not."""
    done = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, name], capture_output=True,
                          text=True, timeout=300)
    if done.returncode == 0:
        return "available (imported)"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    why = lines[-1] if lines else f"exit status {done.returncode}"
    if done.returncode < 0:
        why = f"the import crashed the process (signal {-done.returncode}); {why}"
    return f"import failed: {why}"


def _quirks_command(args) -> int:
    """Print every framework behaviour the backends route around (unigraph.quirks)."""
    from unigraph.quirks import all_quirks

    for name, quirk in all_quirks():
        print(f"[{name}] {quirk.op} ({quirk.framework} {quirk.versions})\n"
              f"    does:    {quirk.behaviour}\n    unigraph: {quirk.workaround}")
    return 0


def _view_command(args) -> int:
    """Draw the graph of a script's CHECKS entry (FILE[:NAME]) as HTML, SVG or DOT."""
    from unigraph.checking.scripts import ScriptError, load_checks
    from unigraph.errors import UnigraphError
    from unigraph.graph_view import view

    if args.netron or args.script.endswith(".onnx"):
        return _view_model_file(args)
    if args.output is None:
        raise UnigraphError("view: -o/--output is required (graph.html, graph.svg, ...), "
                            "unless --netron serves a model file")
    path, _, name = args.script.partition(":")
    try:
        entries = load_checks(path)
    except ScriptError as error:
        raise UnigraphError(f"view: {error}") from None
    if name and name not in entries:
        raise UnigraphError(f"view: {path} has no check {name!r}; its CHECKS are: "
                            f"{', '.join(entries)}")
    entry = entries[name or next(iter(entries))]
    target, inputs = entry.target, entry.inputs
    if entry.training is not None:  # a training entry: the model's forward on one batch
        target, inputs = entry.target, (next(iter(entry.training["batches"]))[0],)
    fmt = args.format or os.path.splitext(args.output)[1].lstrip(".") or "html"
    view(target, *inputs, path=args.output, format=fmt)
    print(f"wrote {args.output} ({fmt}, check {entry.name!r} of {path})")
    return 0


def _view_model_file(args) -> int:
    """`view model.onnx -o g.html` (the imported graph) or `view FILE --netron` (served)."""
    from unigraph import netron_view
    from unigraph.errors import UnigraphError

    if not args.netron:
        if args.output is None:
            raise UnigraphError(f"view: -o/--output is required for {args.script} "
                                "(graph.html, graph.svg, ...), or --netron to open it in Netron")
        fmt = args.format or os.path.splitext(args.output)[1].lstrip(".") or "html"
        netron_view.view_onnx(args.script, args.output, fmt)
        print(f"wrote {args.output} ({fmt}, ONNX model {args.script})")
        return 0
    server = netron_view.serve_netron(args.script, port=args.port, browse=not args.no_browser)
    print(f"Netron is serving {args.script} at {server.url} (Ctrl-C to stop)", flush=True)
    server.wait()
    return 0


def _run_command(args) -> int:
    """Run a script on a target. `--backend`/`--mode` set the process's configured target
    (the level of UNIGRAPH_BACKEND/UNIGRAPH_MODE), so a script's own `ug.set_backend` /
    `ug.use_backend` still choose for the code they cover."""
    from unigraph import config
    from unigraph.errors import UnigraphError

    backend, mode, script_args = _split_run_flags(args)
    path = args.file
    if not os.path.isfile(path):
        raise UnigraphError(f"run: no such file: {path!r}")
    if backend is not None or mode is not None:
        target = _chosen_target(backend, mode)
        os.environ["UNIGRAPH_BACKEND"] = target.backend
        os.environ["UNIGRAPH_MODE"] = target.mode
        config.reload()
    sys.argv = [path, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python FILE` does
    runpy.run_path(path, run_name="__main__")
    return 0


def _split_run_flags(args) -> tuple:
    """unigraph's own `--backend`/`--mode` may also follow FILE (before a `--`); everything
    else after FILE, and everything after `--`, is the script's."""
    backend, mode, rest = args.backend, args.mode, []
    items = list(args.args)
    while items:
        item = items.pop(0)
        if item == "--":
            rest.extend(items)
            break
        flag, equals, value = item.partition("=")
        if flag in ("--backend", "--mode"):
            if not equals:
                if not items:
                    from unigraph.errors import UnigraphError

                    raise UnigraphError(f"run: {flag} needs a value")
                value = items.pop(0)
            if flag == "--backend":
                backend = value
            else:
                mode = value
            continue
        rest.append(item)
    return backend, mode, rest


def _chosen_target(backend: str | None, mode: str | None):
    """`--backend torch:static`, `--backend torch --mode static`, or either flag alone: each
    key the flag does not give comes from the configuration (environment, then files, then
    numpy:eager), as for every other source. Checked to exist."""
    from unigraph.config import Target, current_target
    from unigraph.plugins import get_backend

    if backend is not None and ":" in backend:
        parsed = Target.parse(backend)
        backend, mode = parsed.backend, mode or parsed.mode
    from unigraph.config import default_mode_of

    configured = current_target()
    backend = backend or configured.backend
    if mode is None:  # the configured mode, if this backend has it
        modes = get_backend(backend).modes
        mode = configured.mode if configured.mode in modes else default_mode_of(backend)
    target = Target(backend, mode)
    get_backend(target.backend, target.mode)  # fails early, listing what is installed
    return target


def main(argv=None) -> int:
    from unigraph import __version__

    parser = argparse.ArgumentParser(prog="unigraph", description=__doc__)
    parser.add_argument("--version", action="version", version=f"unigraph {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("backends", help="list targets, framework versions and status")
    listing.add_argument("--check", action="store_true",
                         help="import each framework in a fresh process and show the real "
                              "status (an installed framework may still fail to import)")
    commands.add_parser("quirks", help="list the framework behaviours the backends route "
                                        "around, each pinned by a test")
    drawing = commands.add_parser(
        "view", help="draw a script's traced graph (HTML, SVG or DOT), or an ONNX model",
        description="Trace a CHECKS entry of FILE (the first one unless :NAME is given) on its "
                    "example inputs and write its graph; FILE may be an .onnx model (drawn "
                    "after ug.onnx.load), or any model file with --netron.")
    drawing.add_argument("script", metavar="FILE[:NAME]")
    drawing.add_argument("-o", "--output", default=None, help="graph.html, graph.svg, ...")
    drawing.add_argument("--format", choices=["html", "svg", "dot"], default=None,
                         help="default: from the output's extension, else html")
    drawing.add_argument("--netron", action="store_true",
                         help="serve a model file (e.g. model.onnx) in Netron on localhost "
                              "until Ctrl-C (needs `pip install netron`)")
    drawing.add_argument("--no-browser", action="store_true",
                         help="with --netron: print the address, open no browser (headless)")
    drawing.add_argument("--port", type=int, default=None,
                         help="with --netron: the port (default: a free one)")
    run = commands.add_parser(
        "run", help="run a script on a target",
        description="Run FILE with the target set by --backend/--mode (also accepted after "
                    "FILE, before `--`). Everything else after FILE goes to the script.")
    run.add_argument("--backend", default=None,
                     help="backend or target, e.g. torch or torch:static (default: configured)")
    run.add_argument("--mode", default=None,
                     help="eager, static, ... (default: configured, else eager)")
    run.add_argument("file")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    try:
        from unigraph.cli_check import add_check_command
    except ImportError:
        add_check_command = None
    if add_check_command is not None:
        add_check_command(commands)
    from unigraph.cli_export import add_export_command

    add_export_command(commands)
    args = parser.parse_args(argv)
    handlers = {"backends": _backends_command, "run": _run_command, "quirks": _quirks_command,
                "view": _view_command}
    handler = handlers.get(args.command) or args.handler
    from unigraph.errors import UnigraphError

    try:
        return handler(args)
    except UnigraphError as error:
        print(f"unigraph: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped early (`unigraph quirks | head`): no traceback. stdout points
        # at devnull, so that the flush at exit does not fail again (Python's own advice).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
