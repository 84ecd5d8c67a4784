"""Timing: unigraph and the native versions of one workload, in the same process,
alternating, so that machine noise lands on all of them.

`compare({"unigraph": call, "native": call, ...})`:

1. warm-up: each callable runs `warmup` times (a static target compiles on its first call);
2. calibration: `number`, the calls per sample, is chosen so that one sample of the slowest
   callable takes at least `min_sample_s` (timer resolution, loop overhead and the odd
   interruption by the scheduler shrink), judged by each callable's fastest warm-up call;
3. `repeat` samples of each, interleaved, the order rotating and reversing from one sample
   to the next (U N H, H N U, N H U, ...: none always goes first);
   each sample is `number` back-to-back calls divided by `number`.

The garbage collector stays on (unlike `timeit`): what unigraph allocates per call is part of
its cost. Every callable makes exactly the same number of calls, so a training step has
taken the same number of steps on every side when their last results are compared.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from unigraph.reference import aligned_copy


@dataclass
class Timing:
    median: float  # seconds per call
    min: float
    number: int  # calls per sample
    samples: list = field(default_factory=list)  # seconds per call, one per sample
    result: object = None  # the last call's result, for checking agreement

    @staticmethod
    def of(samples: list, number: int, result) -> Timing:
        return Timing(statistics.median(samples), min(samples), number, list(samples), result)


def _time(call, number: int) -> tuple[float, object]:
    result = None
    start = time.perf_counter()
    for _ in range(number):
        result = call()
    return (time.perf_counter() - start) / number, result


def _orders(names: list, count: int):
    """`count` orders of `names`: rotated by one each time, every other one reversed."""
    for i in range(count):
        shift = (i // 2) % len(names)
        order = names[shift:] + names[:shift]
        yield order if i % 2 == 0 else order[::-1]


def compare(calls: dict, repeat: int = 9, warmup: int = 3, min_sample_s: float = 0.05,
            collect: bool = True) -> dict:
    """Time zero-argument callables alternately (see the module docstring); returns
    {name: Timing}. `collect`: a full garbage collection before the timed samples (0.2-1 s
    once torch or TensorFlow is loaded: the smoke test, which times nothing, skips it)."""
    fastest = {name: math.inf for name in calls}
    for _ in range(max(warmup, 1)):
        for name, call in calls.items():
            fastest[name] = min(fastest[name], _time(call, 1)[0])
    # From each side's fastest warm-up call: one call that the scheduler interrupted (a
    # busy machine) must not make every sample a handful of calls, each interruption then
    # being most of a sample.
    number = max(1, math.ceil(min_sample_s / max(max(fastest.values()), 1e-9)))
    samples: dict = {name: [] for name in calls}
    results: dict = {}
    if collect:
        gc.collect()
    for order in _orders(list(calls), max(repeat, 1)):
        for name in order:
            seconds, results[name] = _time(calls[name], number)
            samples[name].append(seconds)
    return {name: Timing.of(samples[name], number, results[name]) for name in calls}


# -- results ------------------------------------------------------------------------------
def aligned(array: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on an `alignment`-byte boundary
    (`unigraph.reference.aligned_copy`, which numpy targets' tensors of 4 KiB or more
    get too). Every array a workload feeds goes through it, on both sides: TensorFlow
    copies a fed array that is not 64-byte aligned (~0.14 ms for conv_n64's input), and
    whether `malloc` aligns a given array changes from process to process, which made that
    copy land on one side or the other at random."""
    return aligned_copy(array, alignment)


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


