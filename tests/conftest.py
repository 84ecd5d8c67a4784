"""Shared test setup: the list of targets every parametrized suite runs over."""

import zlib

import numpy as np
import pytest

from unigraph.ops import OPS
from unigraph.plugins import all_targets, backends

# Every target that runs forward, backward and training (the 9 built-in ones): a behaviour
# is tested on all of them. Inference-only targets (onnxruntime:static) refuse gradients and
# training; they run the forward-only suites (FORWARD_TARGETS) and their own tests.
_INFERENCE = {name for name, backend in backends().items() if backend.inference_only}
TARGETS = [str(t) for t in all_targets() if t.backend not in _INFERENCE]
INFERENCE_TARGETS = [str(t) for t in all_targets() if t.backend in _INFERENCE]
FORWARD_TARGETS = TARGETS + INFERENCE_TARGETS


def op_seed(name: str) -> int:
    """The seed of an op's samples: fixed per op name, so ids and values stay stable."""
    return zlib.crc32(name.encode())


def op_samples() -> list:
    """pytest params (op record, sample) for every sample of every op record."""
    return [pytest.param(op, sample, id=f"{name}-{index}")
            for name, op in sorted(OPS.items())
            for index, sample in enumerate(op.samples(np.random.default_rng(op_seed(name))))]


def floats_as(dtype, arrays) -> tuple:
    """`arrays` with the floating ones cast to `dtype` (indices, labels, masks unchanged)."""
    return tuple(x.astype(dtype) if x.dtype.kind == "f" else x for x in arrays)


@pytest.fixture(autouse=True)
def _seed():
    import unigraph as ug

    ug.manual_seed(0)
    yield


def run_on(target: str, fn, *args):
    """Call `fn(*args)` with `target` current; return the outputs as NumPy arrays."""
    import unigraph as ug
    from unigraph.config import Target

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = fn(*args)
    if isinstance(out, tuple | list):
        return [np.asarray(o.numpy()) for o in out]
    return np.asarray(out.numpy())
