"""The eager per-op path and the call path of a `@ug.function` (issue 19 item 3): what runs
is cheaper, the numbers and errors are the same. Each case runs on all 9 targets against
float64 NumPy or hand-computed values; where a mechanism is an eager one (a NumPy argument
converted without flattening the call, a Python number resolving the backend once, the
NumPy engine's kernel called without the tape), eager targets also check which path ran."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError

X = np.array([1.5, -2.0, 0.25], np.float32)
Y = np.array([0.5, 4.0, -3.0], np.float32)


def _eager(target: str) -> bool:
    return Target.parse(target).mode == "eager"


@pytest.mark.parametrize("target", TARGETS)
def test_numpy_arguments_are_private_copies_of_their_dtype(target, monkeypatch):
    """An eager call with NumPy arrays converts them as `ug.tensor` does (a copy: writing the
    caller's array afterwards changes no result; dtypes kept), without flattening the call."""
    from unigraph import pytree

    @ug.function
    def f(x, y, n):
        return x * y + 1.0, n + 2, x

    x, y, n = X.copy(), Y.copy(), np.array([3, -4], np.int64)
    run_on(target, f, x, y, n)  # the first call converts the function (general path)
    flattened = []
    original = pytree.flatten
    monkeypatch.setattr(pytree, "flatten",
                        lambda *a, **k: flattened.append(a) or original(*a, **k))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        product, count, same = f(x, y, n)
        x[...] = 100.0  # the caller writes its arrays after the call
        n[...] = 100
        got = [product.numpy(), count.numpy(), same.numpy()]
    assert not flattened or not _eager(target), "eager call with arrays flattened the call"
    want = X.astype(np.float64) * Y.astype(np.float64) + 1.0
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    assert got[0].dtype == np.float32
    np.testing.assert_array_equal(got[1], [5, -2])
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[2], X)  # not the 100s written afterwards


@pytest.mark.parametrize("target", TARGETS)
def test_an_unsupported_array_argument_still_names_the_fix(target):
    """A uint16 argument is refused as before (the fast path converts through `as_array`)."""
    f = ug.function(lambda x: x + 1)
    with pytest.raises(TypeError, match="uint16.*not supported"):
        run_on(target, f, np.arange(3, dtype=np.uint16))


@pytest.mark.parametrize("target", TARGETS)
def test_a_python_number_resolves_the_backend_once(target, monkeypatch):
    """`x + 1`, `2 * x`, `x - 0.5`: one backend lookup each eagerly (the number and the op
    share it; it was two), the same numbers and dtypes everywhere."""
    from unigraph import dispatch

    lookups = []
    original = dispatch.backend_of

    def counted(target):  # every resolution comes here: the last one is never kept
        lookups.append(1)
        backend = original(target)
        dispatch._last = (None, None, -1)
        return backend

    monkeypatch.setattr(dispatch, "backend_of", counted)
    monkeypatch.setattr(dispatch, "_last", (None, None, -1))

    def f(x, n):
        return x + 1, 2 * x, x - 0.5, n * 3, 7 - n

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x, n = ug.tensor(X), ug.tensor(np.array([2, -5], np.int64))
        lookups.clear()
        out = ug.function(f)(x, n) if t.mode != "eager" else f(x, n)
        got = [o.numpy() for o in out]
    if _eager(target):
        assert len(lookups) == 5
    xd = X.astype(np.float64)
    for value, want in zip(got[:3], (xd + 1, 2 * xd, xd - 0.5)):
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, want, rtol=1e-6)
    np.testing.assert_array_equal(got[3], [6, -15])
    np.testing.assert_array_equal(got[4], [5, 12])
    assert got[3].dtype == got[4].dtype == np.int64


@pytest.mark.parametrize("target", TARGETS)
def test_an_integer_too_large_for_its_tensor_still_raises(target):
    f = ug.function(lambda n: n + 2**70)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        run_on(target, f, np.array([1], np.int64))


@pytest.mark.parametrize("target", TARGETS)
def test_kernels_without_a_tape_and_gradients_with_one(target, monkeypatch):
    """numpy:eager runs an op's fast kernel directly when no gradient tape records, and
    through the engine (which records) under ug.grad: values and gradients are the float64
    ones on every target."""
    from unigraph import reference

    engine_calls = []
    original = reference.eager_op
    monkeypatch.setattr(reference, "eager_op",
                        lambda *a, **k: engine_calls.append(a[0]) or original(*a, **k))

    def value(x, y):
        return x * y + x

    def loss(x, y):
        return ug.sum(x * y + x * x)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x, y = ug.tensor(X), ug.tensor(Y)
        out = ug.function(value)(x, y) if t.mode != "eager" else value(x, y)
        got = out.numpy()
        kernel_calls = list(engine_calls)
        gx, gy = ug.grad(loss, (0, 1))(x, y)
        gx, gy = gx.numpy(), gy.numpy()
    xd, yd = X.astype(np.float64), Y.astype(np.float64)
    np.testing.assert_allclose(got, xd * yd + xd, rtol=1e-6)
    np.testing.assert_allclose(gx, yd + 2 * xd, rtol=1e-6)
    np.testing.assert_allclose(gy, xd, rtol=1e-6)
    if target == "numpy:eager":
        assert kernel_calls == []  # mul, add: their kernels, no engine call
        assert {"mul", "add", "sum"} <= set(engine_calls)  # recorded on the tape


@pytest.mark.parametrize("target", TARGETS)
def test_cond_checks_the_untaken_branch_again_when_a_captured_dtype_changes(target):
    """The untaken branch is checked once per signature: code and captured tensors' types.
    The same code capturing a float64 tensor is a new signature, checked (and refused)."""

    def pick(x, y):
        return ug.cond(ug.sum(x) > 0, lambda: x * 2.0, lambda: y)

    f = ug.function(pick)
    x = np.array([1.0, 2.0], np.float32)
    got = run_on(target, f, x, np.array([5.0, 6.0], np.float32))
    np.testing.assert_array_equal(got, [2.0, 4.0])
    with pytest.raises(ControlFlowError, match="float32.*float64|float64.*float32"):
        run_on(target, f, x, np.array([5.0, 6.0], np.float64))


def test_paddle_eager_ops_hold_the_dygraph_lock():
    """paddle:eager's ops still run inside EAGER_LOCK (Paddle's dygraph segfaults with two
    threads; the lock is now taken with acquire/release instead of `with`)."""
    pytest.importorskip("paddle")
    from unigraph_paddle.backend import EAGER_LOCK

    from unigraph.dispatch import current_backend

    with ug.use_backend("paddle", "eager"):
        backend = current_backend()
        backend.load()
        held = []
        original = backend.lowerings["add"]

        def spy(*args, **attrs):
            held.append(EAGER_LOCK._is_owned())
            return original(*args, **attrs)

        backend.lowerings["add"] = spy
        try:
            got = (ug.tensor(X) + ug.tensor(Y)).numpy()
        finally:
            backend.lowerings["add"] = original
    assert held == [True]
    assert not EAGER_LOCK._is_owned()
    np.testing.assert_allclose(got, X.astype(np.float64) + Y, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_predicates_read_as_python_bools(target, monkeypatch):
    """`bool()` of one-element bool tensors (shape () and (1,)), and the eager cond/while
    predicates: the same answers on every target; paddle:eager reads them through
    `Backend.truth` (the Tensor's `.item()`) instead of a NumPy copy."""
    from unigraph.dispatch import current_backend

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        backend = current_backend()
        reads = []
        if backend.truth is not None:
            original = backend.truth
            monkeypatch.setattr(backend, "truth",
                                lambda native: reads.append(1) or original(native))
        one, two = ug.tensor(np.float32(1.0)), ug.tensor(np.array([2.0], np.float32))
        answers = [bool(one < two), bool(one > two), bool(two == 2.0), bool(two != 2.0)]

        @ug.function
        def count(a, b):
            a, b = ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
            return ug.cond(a > 15, lambda: a * 10, lambda: a - 1)

        got = count(np.int64(0), np.int64(10)).numpy()
    assert answers == [True, False, True, False]
    assert got == 200  # a, b = 0, 10 -> 20, 20 in 10 trips; 20 > 15
    if target == "paddle:eager":
        assert len(reads) == 4 + 11 + 1  # four bool(), eleven loop tests, one cond
