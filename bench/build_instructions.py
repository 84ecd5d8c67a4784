"""Exact instruction counts of `build100`'s phases on one target, under callgrind: the
instructions are counted only around the timed work (`--instr-atstart=no`, switched on and
off with `callgrind_control`), so one run gives a phase's count without the start-up.

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.out \\
        python bench/build_instructions.py numpy:static all [--builds 5]

callgrind prints `Collected : N` at exit: N / builds is the phase's instructions a build.
Phases: `build` (Sequential of Linear layers made), `load` (load_state_dict), `call` (a new
ug.function's first call: tracing, compiling and the first run on a static target), `all`
(the workload's build_and_run, as bench/run.py times it), `native` (the hand-written NumPy
of idiomatic_numpy.py); on a static target, the parts of `call`: `trace`
(`Function._trace_full`), `compile` (the backend's `compile`) and `run` (the first run,
`unigraph.function._run`), each counted only inside that function (a collection of the
cyclic garbage collector lands in whichever part allocates when it is due: compare the
parts of two trees with `call` and `all` beside them). Run with PYTHONHASHSEED=0 from two
checkouts (`PYTHONPATH=<checkout>:<checkout>/backends`) to compare them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # as bench/run.py's workers (--threads 1)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import idiomatic_numpy  # noqa: E402
import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402

PHASES = ("build", "load", "call", "all", "native", "trace", "compile", "run")
# the parts of a static target's first call: phase -> (module, owner's name or None, function)
CALL_PARTS = {"trace": ("unigraph.function", "Function", "_trace_full"),
              "compile": (None, None, "compile"),
              "run": ("unigraph.function", None, "_run")}


def _counting(on: bool) -> None:
    """Switch callgrind's counting for this process on or off."""
    subprocess.run(["callgrind_control", "--instr=" + ("on" if on else "off"),
                    str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def _count_inside(owner, name: str, armed: list) -> None:
    """Count `owner.name`'s calls only (while `armed[0]`): callgrind on around each."""
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        if armed[0]:
            _counting(True)
        try:
            return original(*args, **kwargs)
        finally:
            if armed[0]:
                _counting(False)

    setattr(owner, name, counted)


def _model(depth: int, width: int):
    return ug.nn.Sequential(*[ug.nn.Linear(width, width, act="relu") for _ in range(depth)])


def count(target: str, phase: str, builds: int) -> None:
    """Run `builds` times `phase` of build100 on `target`, counted (see the module doc)."""
    data = workloads.make_data("build100")
    depth, width = workloads.depth_of(data), data["w0"].shape[0]
    state = {}
    for i in range(depth):
        state[f"{i}.weight"], state[f"{i}.bias"] = data[f"w{i}"], data[f"b{i}"]
    parsed = Target.parse(target)
    armed = [False]  # (the warm-up builds are not counted)
    with ug.use_backend(parsed.backend, parsed.mode):
        x = ug.tensor(data["x"])
        if phase in CALL_PARTS:
            module, owner, name = CALL_PARTS[phase]
            if module is None:  # the backend's compile
                from unigraph.dispatch import current_backend

                place = type(current_backend())
            else:
                place = importlib.import_module(module)
                place = getattr(place, owner) if owner else place
            _count_inside(place, name, armed)
        build_and_run, args = workloads.build(data)
        native = idiomatic_numpy.build(data)
        for _ in range(2):  # warm: imports, caches
            build_and_run(*args)
            native()
        parts = phase in CALL_PARTS
        models = [_model(depth, width) for _ in range(builds)] \
            if phase in ("load", "call") or parts else []
        if phase == "call" or parts:
            for model in models:
                model.load_state_dict(state)
        if parts:
            armed[0] = True
            for model in models:
                ug.function(model)(x)
            return
        _counting(True)
        for index in range(builds):
            if phase == "build":
                _model(depth, width)
            elif phase == "load":
                models[index].load_state_dict(state)
            elif phase == "call":
                ug.function(models[index])(x)
            elif phase == "all":
                build_and_run(*args)
            else:
                native()
        _counting(False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="backend:mode, e.g. numpy:static")
    parser.add_argument("phase", choices=PHASES)
    parser.add_argument("--builds", type=int, default=5)
    args = parser.parse_args(argv)
    count(args.target, args.phase, args.builds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
