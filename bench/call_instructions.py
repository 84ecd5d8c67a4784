"""Exact instruction counts of one workload's repeated call on one target, under callgrind:
counted only around the calls (`--instr-atstart=no`, switched on and off with
`callgrind_control`), after 5 warm calls. The switching itself is counted once (~0.29M):
run with `--calls 0` too and subtract, then divide by the calls.

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.out \\
        python bench/call_instructions.py torch:eager cond [--calls 50] [--native]

callgrind prints `Collected : N` at exit. `--native`: the idiomatic native code of
`idiomatic_<backend>.py` instead of unigraph's. Run with PYTHONHASHSEED=0 from two checkouts
(`PYTHONPATH=<checkout>:<checkout>/backends`) to compare them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # as bench/run.py's workers (--threads 1)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402
import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402


def _counting(on: bool) -> None:
    """Switch callgrind's counting for this process on or off."""
    subprocess.run(["callgrind_control", "--instr=" + ("on" if on else "off"),
                    str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def count(target: str, workload: str, calls: int, native: bool) -> None:
    """Call `workload` on `target` `calls` times, counted (see the module doc)."""
    parsed = Target.parse(target)
    data = workloads.make_data(workload)
    with ug.use_backend(parsed.backend, parsed.mode):
        if native:
            call = measure.native_builders(workload, parsed)["native"](data)
        else:
            call = measure.unigraph_call(workload, parsed, data)
        for _ in range(5):  # warm: imports, plans, compiled graphs
            call()
        _counting(True)
        for _ in range(calls):
            call()
        _counting(False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="backend:mode")
    parser.add_argument("workload", choices=list(workloads.WORKLOADS))
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--native", action="store_true", help="the idiomatic native code")
    args = parser.parse_args(argv)
    count(args.target, args.workload, args.calls, args.native)
    return 0


if __name__ == "__main__":
    sys.exit(main())
