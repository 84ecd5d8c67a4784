"""Comparisons and bool logic of two 0-d operands of one dtype: numpy:eager computes them by
the Python operator on the operands' NumPy scalars (NumPy's scalar math) instead of the
ufunc on 0-d arrays, and makes the answer a 0-d array again. The same answers as NumPy's
ufunc on every target, for NaN, signed zeros, infinities, integer extremes, small ints and
bools, with no floating-point warning or error under any error state; a fresh 0-d array as
the native, a read-only array from `.numpy()`; a kernel patched after a plan, the tape and
the random-program tester's watch still see the op."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

NAN, INF = np.float32("nan"), np.float32("inf")
PAIRS = [  # (x, y) of one dtype
    (np.float32(1.5), NAN), (NAN, NAN), (np.float32(-0.0), np.float32(0.0)),
    (INF, INF), (-INF, np.float32(3.0)), (np.float64(0.5), np.float64(0.25)),
    (np.float16(2.0), np.float16(-2.0)),
    (np.int64(-(2**63)), np.int64(2**63 - 1)), (np.int64(7), np.int64(7)),
    (np.uint8(250), np.uint8(3)), (np.int8(-128), np.int8(127)), (np.int32(5), np.int32(6)),
    (np.bool_(True), np.bool_(False)), (np.bool_(False), np.bool_(False)),
]


def _compares(x, y):
    # twice each: the second runs from the dispatch plan made by the first
    out = [x < y, x <= y, x > y, x >= y, x == y, x != y, x < y, x == y]
    if x.dtype == "bool":
        out += [x & y, x | y, x & y]
    return tuple(out)


def _expected(x, y):
    x, y = np.asarray(x), np.asarray(y)
    out = [np.less(x, y), np.less_equal(x, y), np.greater(x, y), np.greater_equal(x, y),
           np.equal(x, y), np.not_equal(x, y), np.less(x, y), np.equal(x, y)]
    if x.dtype == bool:
        out += [np.logical_and(x, y), np.logical_or(x, y), np.logical_and(x, y)]
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_compares_give_the_ufuncs_answers_without_warnings(target):
    """Each pair, eagerly as written and in a `@ug.function`, under NumPy's error state
    raising everything and warnings as errors: the ufunc's answers, bool 0-d arrays."""
    compares = ug.function(_compares)
    t = Target.parse(target)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for x, y in PAIRS:
            want = _expected(x, y)
            with ug.use_backend(t.backend, t.mode):
                eager = [o.numpy() for o in _compares(ug.tensor(x), ug.tensor(y))]
            for got in (eager, run_on(target, compares, x, y)):
                assert len(got) == len(want)
                for g, w in zip(got, want):
                    assert type(g) is np.ndarray and g.shape == () and g.dtype == bool
                    assert g.tobytes() == w.tobytes(), (x, y, got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_a_scalar_compare_is_a_fresh_array_and_reads_as_before(target):
    """numpy:eager: the native of `x < y` is a new writable 0-d bool array that owns its
    memory (as the ufunc's); everywhere `.numpy()` is a read-only 0-d array, `bool()` and
    `.item()` Python bools, and the result feeds further ops."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        a, b = ug.tensor(np.int64(3)), ug.tensor(np.int64(4))
        out = a < b
        if target == "numpy:eager":
            native = out._native
            assert type(native) is np.ndarray and native.base is None
            assert native.flags.writeable and native.dtype == bool
            assert (a < b)._native is not native
        view = out.numpy()
        assert type(view) is np.ndarray and view.shape == () and not view.flags.writeable
        assert bool(out) is True and out.item() is True
        assert (ug.where(out, a, b) + 1).numpy().tolist() == 4
        assert ((a > b) | out).numpy().tolist() is True


@pytest.mark.parametrize("target", TARGETS)
def test_patched_kernels_the_tape_and_the_watch_see_scalar_compares(target, monkeypatch):
    """A comparison kernel replaced after the 0-d comparison's plan was made runs (NumPy
    targets); under `ug.grad` a function with a 0-d comparison in it still differentiates;
    the random-program tester's watch sees the comparison."""
    from unigraph.reference import fast_kernels
    from unigraph.testing.random_programs.runner import watching

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x, y = ug.tensor(np.float32(2.0)), ug.tensor(np.float32(3.0))
        assert bool(x < y) is True
        monkeypatch.setitem(fast_kernels.KERNELS, "less", lambda a, b: np.asarray(a >= b))
        patched = bool(x < y)
        monkeypatch.undo()

        def loss(x, y):
            return ug.where(x < y, x * y, x - y)

        gx, gy = (g.numpy() for g in ug.grad(loss, (0, 1))(x, y))
        seen = []
        with watching(lambda op, inputs, attrs, out: seen.append(op)):
            watched = bool(x < y)
    assert patched is (t.backend != "numpy")  # (numpy:static's eager ops run on the engine)
    assert (gx.tolist(), gy.tolist()) == (3.0, 2.0)
    assert watched is True
    assert seen == (["less"] if t.backend == "numpy" else [])
