"""Timing: unigraph and the hand-written native code of one workload, in the same process,
alternating, so that machine noise lands on both.

`compare(unigraph_call, native_call)`:

1. warm-up: each callable runs `warmup` times (a static target compiles on its first call);
2. calibration: `number`, the calls per sample, is chosen so that one sample of the slower
   callable takes at least `min_sample_s` (timer resolution and loop overhead vanish);
3. `repeat` samples of each, interleaved (U N, N U, U N, ...: neither always goes first);
   each sample is `number` back-to-back calls divided by `number`.

The garbage collector stays on (unlike `timeit`): what unigraph allocates per call is part of
its cost. A sample's time is per call. A `Timing` holds the median and the minimum over samples;
`ratio = unigraph median / native median`. Both callables make exactly the same number of
calls, so a training step has taken the same number of steps on both sides when their last
results are compared.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class Timing:
    median: float  # seconds per call
    min: float
    number: int  # calls per sample
    samples: list = field(default_factory=list)  # seconds per call, one per sample

    @staticmethod
    def of(samples: list, number: int) -> Timing:
        return Timing(statistics.median(samples), min(samples), number, list(samples))


@dataclass
class Comparison:
    unigraph: Timing
    native: Timing
    unigraph_result: object  # the last call's result, for checking agreement
    native_result: object

    @property
    def ratio(self) -> float:
        return self.unigraph.median / self.native.median

    @property
    def min_ratio(self) -> float:
        return self.unigraph.min / self.native.min


def _time(call, number: int) -> tuple[float, object]:
    result = None
    start = time.perf_counter()
    for _ in range(number):
        result = call()
    return (time.perf_counter() - start) / number, result


def compare(unigraph_call, native_call, repeat: int = 15, warmup: int = 3,
            min_sample_s: float = 0.02) -> Comparison:
    """Time two zero-argument callables alternately; see the module docstring."""
    first = [_time(unigraph_call, 1)[0], _time(native_call, 1)[0]]
    for _ in range(max(warmup - 1, 0)):
        first = [_time(unigraph_call, 1)[0], _time(native_call, 1)[0]]
    number = max(1, math.ceil(min_sample_s / max(max(first), 1e-9)))
    samples: tuple[list, list] = ([], [])
    results = [None, None]
    calls = (unigraph_call, native_call)
    gc.collect()
    for i in range(max(repeat, 1)):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for side in order:
            seconds, results[side] = _time(calls[side], number)
            samples[side].append(seconds)
    return Comparison(Timing.of(samples[0], number), Timing.of(samples[1], number), *results)


# -- results ------------------------------------------------------------------------------
def as_arrays(result) -> list:
    """Any result (unigraph Tensor, torch/TF/Paddle tensor, NumPy, nested tuples and lists)
    as a flat list of NumPy arrays."""
    if isinstance(result, tuple | list):
        return [a for item in result for a in as_arrays(item)]
    if isinstance(result, dict):
        return [a for key in sorted(result) for a in as_arrays(result[key])]
    if hasattr(result, "detach"):  # torch
        result = result.detach()
    if hasattr(result, "numpy"):
        result = result.numpy()
    return [np.asarray(result)]


def max_difference(a, b) -> float:
    """Largest elementwise |a - b| / (1 + |b|) over two results of the same structure; inf
    when their structures or shapes differ."""
    left, right = as_arrays(a), as_arrays(b)
    if len(left) != len(right):
        return math.inf
    worst = 0.0
    for x, y in zip(left, right):
        if x.shape != y.shape:
            return math.inf
        x, y = x.astype(np.float64), y.astype(np.float64)
        if x.size:
            worst = max(worst, float(np.max(np.abs(x - y) / (1 + np.abs(y)))))
    return worst


@dataclass
class Row:
    workload: str
    target: str
    unigraph_s: float | None = None  # median seconds per call
    native_s: float | None = None
    unigraph_min_s: float | None = None
    native_min_s: float | None = None
    ratio: float | None = None
    goal: float | None = None  # the ratio the issue asks for; None: report only
    difference: float | None = None  # max relative difference of the last results
    error: str = ""
    number: int | None = None  # calls per sample
    unigraph_samples: list = field(default_factory=list)  # seconds per call, per sample
    native_samples: list = field(default_factory=list)

    @property
    def met(self) -> str:
        if self.error or self.ratio is None:
            return "error"
        if self.goal is None:
            return "-"
        return "yes" if self.ratio <= self.goal else "NO"


def row_of(workload: str, target: str, comparison: Comparison, goal, difference) -> Row:
    u, n = comparison.unigraph, comparison.native
    return Row(workload, target, u.median, n.median, u.min, n.min, comparison.ratio, goal,
               difference, number=u.number, unigraph_samples=u.samples,
               native_samples=n.samples)


def _ms(seconds) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 1 else f"{seconds * 1e3:.0f}"


COLUMNS = ("workload", "target", "unigraph ms", "native ms", "ratio", "min ratio", "goal",
           "met", "max diff")


def format_table(rows: list) -> str:
    """The results as an aligned text table (errors on their own lines underneath)."""
    lines = [COLUMNS]
    for r in rows:
        min_ratio = (r.unigraph_min_s / r.native_min_s) if r.native_min_s else None
        lines.append((
            r.workload, r.target, _ms(r.unigraph_s), _ms(r.native_s),
            f"{r.ratio:.2f}" if r.ratio is not None else "-",
            f"{min_ratio:.2f}" if min_ratio is not None else "-",
            f"<={r.goal:.2f}" if r.goal is not None else "-",
            r.met,
            f"{r.difference:.1e}" if r.difference is not None else "-",
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    right = {2, 3, 4, 5, 8}
    text = []
    for n, line in enumerate(lines):
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths))]
        text.append("  ".join(cells).rstrip())
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    errors = [f"  {r.workload} on {r.target}: {r.error}" for r in rows if r.error]
    if errors:
        text += ["", "errors:", *errors]
    return "\n".join(text)


def write_json(path: str, rows: list, extra: dict) -> None:
    payload = {**extra, "rows": [{**asdict(r), "met": r.met} for r in rows]}
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
