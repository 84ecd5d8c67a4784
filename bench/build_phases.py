"""Where `build100`'s time goes on one target: building the model, loading its weights, and
the first call, split into tracing, compiling, the first run and the rest of the call on a
static target.

    python bench/build_phases.py numpy:static [--builds 80] [--depth 100]

Each phase is timed on every build (a model built anew each time, as `build100` does) and
the minimum over the builds is printed, in ms: on a shared machine the minimum is what the
code costs, the median what the neighbours left. Run it from two checkouts, alternating
(`PYTHONPATH=<checkout>:<checkout>/backends`), to compare them; `bench/run.py` gives the
ratio to native code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # as bench/run.py's workers (--threads 1)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402
from unigraph.dispatch import current_backend  # noqa: E402

PHASES = ("build", "load", "call", "trace", "compile", "first run", "rest")


def _timed(owner, name: str, label: str, spent: dict) -> None:
    """Wrap `owner.name` so that each call adds its seconds to `spent[label]`."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)


def measure(target: str, builds: int = 80, depth: int = 100) -> dict:
    """{phase: min seconds over `builds` builds} of a `depth`-layer build100 on `target`."""
    data = workloads.make_data("build100")
    width = data["w0"].shape[0]
    state = {}
    for i in range(depth):
        state[f"{i}.weight"], state[f"{i}.bias"] = data[f"w{i}"], data[f"b{i}"]
    parsed = Target.parse(target)
    function_module = importlib.import_module("unigraph.function")
    spent: dict = {}
    samples: dict = {phase: [] for phase in PHASES}
    with ug.use_backend(parsed.backend, parsed.mode):
        x = ug.tensor(data["x"])
        if parsed.mode != "eager":
            _timed(function_module.Function, "_trace_full", "trace", spent)
            _timed(type(current_backend()), "compile", "compile", spent)
            _timed(function_module, "_run", "first run", spent)
        for index in range(builds + 3):  # three untimed builds first
            spent.clear()
            start = time.perf_counter()
            model = ug.nn.Sequential(*[ug.nn.Linear(width, width, act="relu")
                                       for _ in range(depth)])
            built = time.perf_counter()
            model.load_state_dict(state)
            loaded = time.perf_counter()
            ug.function(model)(x)
            spent.update(build=built - start, load=loaded - built,
                         call=time.perf_counter() - loaded)
            if parsed.mode != "eager":
                # the call's time outside the three: making the function, its cache and
                # checks, wrapping the output, and freeing the function (its graph and plan)
                spent["rest"] = spent["call"] - sum(spent.get(phase, 0.0) for phase in (
                    "trace", "compile", "first run"))
            if index >= 3:
                for phase, seconds in spent.items():
                    samples[phase].append(seconds)
    return {phase: min(values) for phase, values in samples.items() if values}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="backend:mode, e.g. numpy:static")
    parser.add_argument("--builds", type=int, default=80)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args(argv)
    best = measure(args.target, args.builds, args.depth)
    total = best["build"] + best["load"] + best["call"]
    print(f"{args.target}: " + "  ".join(f"{phase} {seconds * 1e3:.2f}"
                                          for phase, seconds in best.items())
          + f"  (build+load+call {total * 1e3:.2f}) ms, min of {args.builds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
