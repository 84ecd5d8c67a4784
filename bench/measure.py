"""One workload on one target, in this process: unigraph, the idiomatic native code and (where
it differs) the hand-tuned native code, timed alternately, their last results compared.

    python bench/measure.py TARGET WORKLOAD [--repeat N] [--threads N] [--json FILE] [--quick]

`bench/run.py` starts one such process per (target, workload) pair and round; the smoke test
imports `measure()` and runs every pair once, in its own process, with `quick=True`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before any TensorFlow import
os.environ.setdefault("GLOG_minloglevel", "2")  # Paddle's C++ log lines

# Every library's thread pool reads these when it loads: set by `--threads` before NumPy.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

if __name__ == "__main__" and "--threads" in sys.argv[:-1]:
    for _variable in THREAD_VARIABLES:
        os.environ[_variable] = sys.argv[sys.argv.index("--threads") + 1]

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402

# Targets fed NumPy arrays (their native code feeds NumPy to Session.run / exe.run); every
# other target gets `ug.tensor`s made once on it, as native eager code holds tensors.
FEEDS_NUMPY = {"tensorflow:static", "paddle:static"}
# Workloads timed against another workload's native code: the same computation, done
# another way on the unigraph side only (Adam's fused kernels).
NATIVE_NAMES = {"mlp_adam_fused": "mlp_adam"}
# Workloads whose hand-tuned builder in `native_<backend>` goes by another name.
HAND_NAMES = {"conv_n1": "conv2d", "conv_n64": "conv2d", "softmax_saturated": "softmax_step",
              **NATIVE_NAMES}


def _builders(kind: str, backend: str) -> dict:
    try:
        return importlib.import_module(f"{kind}_{backend}").BUILDERS
    except ModuleNotFoundError as error:
        if error.name != f"{kind}_{backend}":
            raise
        raise LookupError(f"no {kind} baseline for backend {backend!r}") from None


def native_builders(workload: str, target: Target) -> dict:
    """{"native": builder, "hand": builder}: the idiomatic native code of `workload` on
    `target`, and the hand-tuned one where it is a different piece of code."""
    idiomatic = _builders("idiomatic", target.backend)
    try:
        builders = {"native": idiomatic[(NATIVE_NAMES.get(workload, workload), target.mode)]}
    except KeyError:
        raise LookupError(f"idiomatic_{target.backend} has no {workload!r} for mode "
                          f"{target.mode!r}") from None
    hand = _builders("native", target.backend).get((HAND_NAMES.get(workload, workload),
                                                    target.mode))
    if hand is not None and hand is not builders["native"]:
        builders["hand"] = hand
    return builders


def unigraph_call(workload: str, target: Target, data: dict):
    """A zero-argument callable running the unigraph workload on `target` (made current by
    the caller)."""
    fn, inputs = workloads.UNIGRAPH[workload](data)
    if str(target) not in FEEDS_NUMPY:
        inputs = [ug.tensor(x) for x in inputs]
    return lambda: fn(*inputs)


def settings(workload: str, quick: bool, repeat: int | None) -> dict:
    """compare()'s arguments. A build (seconds on some targets) gets one untimed build per
    side and 3 samples; each call builds anew, so a fast build still gets >= 50 ms samples."""
    if quick:
        return {"repeat": 1, "warmup": 1, "min_sample_s": 0.0, "collect": False}
    if workloads.WORKLOADS[workload].kind == "build":
        return {"repeat": repeat or 3, "warmup": 1, "min_sample_s": 0.05}
    return {"repeat": repeat or 9, "warmup": 3, "min_sample_s": 0.05}


def measure(workload: str, target: str, repeat: int | None = None, quick: bool = False,
            threads: int | None = None) -> dict:
    """Time `workload` on `target` against its native versions; never raises. Returns
    {"workload", "target", "times": {side: {median, min, number, samples}},
    "difference": {side: max relative difference from unigraph's last result}, "error"}."""
    record = {"workload": workload, "target": target, "times": {}, "difference": {},
              "error": ""}
    try:
        parsed = Target.parse(target)
        data = workloads.make_data(workload, quick=quick)
        with ug.use_backend(parsed.backend, parsed.mode):  # raises if unigraph lacks it
            builders = native_builders(workload, parsed)
            if threads:  # the frameworks are imported now, and no TF op has run yet
                ug.set_threads(threads)
            calls = {"unigraph": unigraph_call(workload, parsed, data)}
            calls.update({side: build(data) for side, build in builders.items()})
            timings = harness.compare(calls, **settings(workload, quick, repeat))
        for side, timing in timings.items():
            record["times"][side] = {"median": timing.median, "min": timing.min,
                                     "number": timing.number, "samples": timing.samples}
            if side != "unigraph":
                result = getattr(calls[side], "to_reference", lambda r: r)(timing.result)
                record["difference"][side] = harness.max_difference(
                    timings["unigraph"].result, result)
    except Exception as error:  # one broken pair must not hide the others
        message = str(error).splitlines()[0] if str(error) else ""
        record["error"] = f"{type(error).__name__}: {message}"
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="backend:mode")
    parser.add_argument("workload", choices=list(workloads.WORKLOADS))
    parser.add_argument("--repeat", type=int, help="samples per side (default 9; builds 3)")
    parser.add_argument("--threads", type=int, help="threads for every library's pool")
    parser.add_argument("--quick", action="store_true", help="one sample, small build model")
    parser.add_argument("--json", help="write the record here (default: stdout)")
    args = parser.parse_args(argv)
    record = measure(args.workload, args.target, args.repeat, args.quick, args.threads)
    text = json.dumps(record)
    if args.json:
        Path(args.json).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
