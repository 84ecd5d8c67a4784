"""The seed article's branch, written once: x + y if x > y else x - y.

Paddle's static graph needs `paddle.static.nn.cond(x > y, lambda: x + y, lambda: x - y)`
inside a Program run by an Executor; dygraph takes a plain `if`. Here one function runs on
every target, as the explicit `ug.cond` and as a plain conditional expression that
autograph converts into the same `cond` node on static targets.

    python examples/cond.py --backend paddle --mode static
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _cli import parse_args, target_context, target_name  # noqa: E402

import unigraph as ug  # noqa: E402


@ug.function
def branch(x, y):
    """The explicit spelling: one `cond` node."""
    return ug.cond(ug.sum(x) > ug.sum(y), lambda: x + y, lambda: x - y)


@ug.function
def branch_python(x, y):
    """The dygraph spelling; on static targets autograph turns it into the same node."""
    return x + y if ug.sum(x) > ug.sum(y) else x - y


def inputs(seed: int):
    """Two random [1]-shaped float32 inputs, as in the seed (np.random.rand(1))."""
    rng = np.random.default_rng(seed)
    return rng.random(1).astype(np.float32), rng.random(1).astype(np.float32)


CHECKS = {"branch": (branch, inputs(0)), "branch_python": (branch_python, inputs(0))}


def run(args) -> dict:
    x, y = inputs(args.seed)
    with target_context(args):
        z = branch(x, y).numpy()
        z_python = branch_python(x, y).numpy()
    return {"x": x, "y": y, "z": z, "z_python": z_python}


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], None, argv)
    result = run(args)
    x, y = result["x"][0], result["y"][0]
    print(f"target: {target_name(args)}")
    print(f"x = {x:.6f}, y = {y:.6f}, so the branch is {'x + y' if x > y else 'x - y'}")
    print(f"ug.cond           : {result['z'][0]:.6f}")
    print(f"plain Python `if` : {result['z_python'][0]:.6f}")
    return result


if __name__ == "__main__":
    main()
