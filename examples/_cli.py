"""The command line every example shares: which target to run on, which data, progress bar,
loss plot.

    python examples/softmax_regression.py --backend torch --mode static
    python examples/mlp.py --data ~/mnist --plot loss.png --no-progress

Each example calls `parse_args(description, extra, argv)` and runs its work inside
`with target_context(args):`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools

import unigraph as ug


def parse_args(description: str, extra=None, argv=None) -> argparse.Namespace:
    """Parse the shared options (plus what `extra(parser)` adds) from `argv` (None: the
    process's arguments).

    --backend NAME   numpy, torch, tensorflow, paddle (default: the configured target,
                     see `ug.current_target`, which is numpy:eager unless set)
    --mode MODE      eager or static (or a backend's extra mode, e.g. tensorflow's function)
    --data PATH      a folder of MNIST IDX files instead of the bundled digits
    --plot PATH      save the loss curve there (PNG)
    --no-progress    no progress bar
    --seed N         unigraph's seed for weights, shuffling and dropout (default 0)
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", default=None,
                        help="backend to run on: numpy, torch, tensorflow, paddle "
                             "(default: the configured target)")
    parser.add_argument("--mode", default=None,
                        help="eager or static (default: the backend's eager mode, or the "
                             "configured one)")
    parser.add_argument("--data", default=None, metavar="PATH",
                        help="folder with the MNIST IDX files (default: scikit-learn's "
                             "bundled 8x8 digits)")
    parser.add_argument("--plot", default=None, metavar="PATH",
                        help="save the loss curve to this PNG file")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="do not show a progress bar")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="training examples: take only N steps and report the weights "
                             "(how `make demo` compares targets)")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


def target_context(args):
    """`ug.use_backend(args.backend, args.mode)`, or the configured target when neither
    option was given."""
    if args.backend is None and args.mode is None:
        return contextlib.nullcontext()
    backend = args.backend or ug.current_target().backend
    return ug.use_backend(backend, args.mode)


def target_name(args) -> str:
    """The target the example runs on, e.g. "numpy:static"."""
    with target_context(args):
        return str(ug.current_target())


def training_plan(args, batches, epochs: int):
    """(data, epochs) for `Trainer.fit`: all of `batches` for `epochs`, or with `--steps N`
    just the first N batches (cycling through epochs) once."""
    if not args.steps:
        return batches, epochs
    return list(itertools.islice(itertools.cycle(list(batches)), args.steps)), 1


def steps_report(args, model) -> dict:
    """With `--steps`, the weights after training (for comparing targets); else nothing."""
    return {"weights": model.state_dict()} if args.steps else {}


def load_data(args):
    """((x_train, y_train), (x_test, y_test)): MNIST from `--data`, else the digits."""
    if args.data:
        return ug.data.mnist(args.data)
    return ug.data.digits()
