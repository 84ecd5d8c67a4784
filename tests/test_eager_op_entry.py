"""The eager fast path in front of each binary op function (`dispatch.eager_binary`: a plan per
op found by the backend and the operands' shapes and dtypes, or the tensor's shape and dtype
and a Python number's type and value) gives what the general path gives, on all 9 targets
(a static target's eager ops run on its backend): each op asked twice, the second from the
plan the first made, with operands the plan must not be used for in between: an int and a
float of one value, a bool, another shape or dtype, a zero, tensors held by another backend
or only as a static run's array, and a Parameter."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

X = np.array([1.5, -2.0, 0.25], np.float32)
N = np.array([3, -4, 0], np.int64)


def _want():
    x, n = X, N
    return [x + x, x + 2, x + 2.0, x * 0.0, x * -0.0, x + x, x[0] + x[0], x + 2,
            n + 2, n + 2.0, n + True, n - n, n + 2, n < n + 1, n.astype(np.float64) + 2,
            x > x[0], x + x, x + x, x + x, n + 2]


def _ops(x, n, foreign, from_static, weight):
    """`_want`'s values: `foreign` and `from_static` are X held elsewhere, `weight` is X as
    a Parameter."""
    return [x + x, x + 2, x + 2.0, x * 0.0, x * -0.0, x + x, x[0] + x[0], x + 2,
            n + 2, n + 2.0, n + True, n - n, n + 2, n < n + 1, ug.cast(n, "float64") + 2,
            x > x[0], foreign + x, from_static + x, weight + x, n + 2]


def _other(target: Target) -> Target:
    return Target("torch", "eager") if target.backend == "numpy" else Target("numpy", "eager")


@pytest.mark.parametrize("target", TARGETS)
def test_each_operand_kind_after_a_plan_gives_the_general_paths_result(target):
    parsed = Target.parse(target)
    other = _other(parsed)
    with ug.use_backend(other.backend, other.mode):
        foreign = ug.tensor(X)
    with ug.use_backend("numpy", "static"):  # a static run's output: an array, no native
        from_static = ug.function(lambda a: a * 1.0)(X)
    weight = ug.Parameter(X)
    with ug.use_backend(parsed.backend, parsed.mode):
        x, n = ug.tensor(X), ug.tensor(N)
        for _ in range(2):  # the second time from the plans the first made
            got = _ops(x, n, foreign, from_static, weight)
            for index, (g, w) in enumerate(zip(got, _want())):
                g = g.numpy()
                assert g.dtype == w.dtype and g.shape == w.shape, (index, g.dtype, w.dtype)
                np.testing.assert_array_equal(g, w, err_msg=f"op {index}")
                if g.dtype.kind == "f":
                    np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
                assert ug.tensor(0.0)._backend is got[index]._backend  # made on this target


@pytest.mark.parametrize("target", TARGETS)
def test_a_lowering_replaced_after_a_plan_runs_and_errors_stay_ours(target, monkeypatch):
    parsed = Target.parse(target)
    with ug.use_backend(parsed.backend, parsed.mode):
        x = ug.tensor(X)
        np.testing.assert_array_equal((x - x).numpy(), X - X)
        backend = ug.tensor(0.0)._backend
        if backend.lowerings is not None and "sub" in backend.lowerings:
            lowering = backend.lowerings["sub"]
            calls = []
            monkeypatch.setitem(backend.lowerings, "sub",
                                lambda a, b: calls.append(1) or lowering(a, b))
            np.testing.assert_array_equal((x - x).numpy(), X - X)
            assert calls == [1] or backend.name == "numpy"  # (NumPy runs its kernels)
        with pytest.raises(ShapeError):
            x + ug.tensor(np.ones(2, np.float32))
        with pytest.raises(OverflowError, match="does not fit in int64"):
            ug.tensor(N) + 2**70
