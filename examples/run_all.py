"""`make demo`: run every example on every target and check that they agree.

Each example's `run(args)` returns its numbers (outputs, losses, accuracies, and for the
training examples the weights after 20 steps from the same initial weights and batches);
every target's numbers are compared with numpy:eager's, within float32
tolerance. Softmax regression is then trained in full on every target (test accuracy must
reach 0.9). Then `unigraph check` runs each example's checkable functions on every target
against the float64 reference (forward and gradients). Exit status 1 on any disagreement.

    python examples/run_all.py [--targets numpy:static,torch:eager] [--examples cond,mlp]
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import unigraph as ug  # noqa: E402
from unigraph.plugins import all_targets, backends  # noqa: E402

EXAMPLES = ["counter_loop", "cond", "conv2d", "softmax_regression", "mlp"]
TRAINING = {"conv2d", "softmax_regression", "mlp"}  # they take training steps
RTOL, ATOL = 2e-4, 2e-5  # float32 runs of the same math on different frameworks
STEPS = 20  # training examples: compare the weights after this many steps


def numbers(result) -> dict:
    """Flatten an example's result into {name: float64 array} for comparison."""
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, str):
            return
        else:
            flat[prefix] = np.asarray(value, dtype=np.float64)

    walk("", result)
    return flat


def compare(reference: dict, got: dict) -> tuple[bool, str]:
    worst, where = 0.0, ""
    for key, want in reference.items():
        have = got.get(key)
        if have is None or have.shape != want.shape:
            return False, f"{key}: missing or shape {None if have is None else have.shape}"
        excess = np.abs(have - want) - (ATOL + RTOL * np.abs(want))
        if excess.size and excess.max() > worst:
            worst, where = float(excess.max()), key
    if worst > 0:
        return False, f"{where} differs beyond rtol={RTOL}, atol={ATOL}"
    return True, "agrees with numpy:eager"


def run_example(name: str, target: str):
    module = importlib.import_module(name)
    backend, mode = target.split(":")
    argv = ["--backend", backend, "--mode", mode, "--no-progress", "--steps", str(STEPS)]
    args = module_args(module, argv)
    return numbers(module.run(args))


def module_args(module, argv):
    from _cli import parse_args

    extra = getattr(module, "_extra", None)
    return parse_args(module.__doc__.splitlines()[0], extra, argv)


def inference_only(target: str) -> bool:
    """onnxruntime:static and the like run forward passes only: they skip the examples that
    train (and say so)."""
    backend = backends().get(target.split(":")[0])
    return bool(backend is not None and backend.inference_only)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=None, help="comma-separated (default: all)")
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--no-check", action="store_true", help="skip `unigraph check`")
    args = parser.parse_args(argv)
    targets = args.targets.split(",") if args.targets else [str(t) for t in all_targets()]
    failures = 0
    for name in args.examples.split(","):
        print(f"\n== examples/{name}.py")
        reference = run_example(name, "numpy:eager")
        for target in targets:
            if name in TRAINING and inference_only(target):
                print(f"  skip {target:22s}          inference-only: this example trains")
                continue
            start = time.perf_counter()
            try:
                ok, note = compare(reference, run_example(name, target))
            except ug.UnigraphError as error:
                ok, note = False, f"error: {error}"
            failures += not ok
            status = "ok  " if ok else "FAIL"
            print(f"  {status} {target:22s} {time.perf_counter() - start:6.2f}s  {note}")
    print("\n== examples/softmax_regression.py, full run (10 epochs on the digits)")
    for target in [t for t in targets if not inference_only(t)]:
        start = time.perf_counter()
        module = importlib.import_module("softmax_regression")
        backend, mode = target.split(":")
        accuracy = module.run(module_args(module, ["--backend", backend, "--mode", mode,
                                                   "--no-progress"]))["test_accuracy"]
        ok = accuracy >= 0.9
        failures += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {target:22s} {time.perf_counter() - start:6.2f}s  "
              f"test accuracy {accuracy:.4f} (must be >= 0.90)")
    if not args.no_check:
        for name in args.examples.split(","):
            command = [sys.executable, "-m", "unigraph.cli", "check", os.path.join(HERE,
                       f"{name}.py")]
            if args.targets:
                command += ["--targets", args.targets]
            print(f"\n== unigraph check examples/{name}.py", flush=True)
            failures += subprocess.run(command).returncode != 0
    print(f"\n{'all examples agree on every target' if not failures else f'{failures} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
