"""The eager per-op path after issue 19 item 3's cuts (a backend's own per-op kernel in the
dispatch plan, NumPy's ufuncs called with `out=...`, a Python number's cached operand looked
up inline, the output tensor made inline, `bool()`'s common case first): the same numbers,
dtypes and errors on all 9 targets, every op still recorded on a gradient tape, and a
kernel or op table patched after a plan was made is the one that runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError, TracingError

A = np.array(7, np.int64)
V = np.array([1.5, -0.0, 4.0], np.float32)
M = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)


def _same(got, want):
    """Bit for bit: dtype, shape and every byte (a signed zero, a wrapped integer)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.tobytes() == want.tobytes(), (got, want)


def _numbers(a, v, m):
    # twice each: the second runs from the cached plan and the cached number operand
    return (a + 2, a + 2, 3 - a, a * -1, a < 9, a < 9, a >= a, a + 2**62 + 2**62, a * 0.5,
            a + True,
            v + 0.5, 0.5 + v, v * -0.0, -0.0 * v, v - 0.0, v > 1.0, v + v, v < v,
            m + v[:2], m * m, ug.relu(m), ug.matmul(m, m), ug.relu(ug.matmul(m, m) + v[:2]))


@pytest.mark.parametrize("target", TARGETS)
def test_numbers_and_tensors_give_numpys_exact_results(target):
    """Results equal NumPy's bit for bit (Python numbers weak: the tensor's dtype, but a
    float makes an int tensor's result float64; int64 wraps around; the sign of a zero
    kept) on a 0-d, a vector and a matrix."""
    got = run_on(target, ug.function(_numbers), A, V, M)
    with np.errstate(over="ignore"):  # int64 wraps around, as on every target
        want = _numbers(A, V, M)
    want = want[:20] + (np.maximum(M, 0), M @ M, np.maximum(M @ M + V[:2], 0))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("target", TARGETS)
def test_numpy_eager_results_are_arrays(target):
    """A 0-d result of an op is a 0-d array natively on numpy:eager (the ufunc's `out=...`;
    a NumPy scalar would not be a native), and a tensor with the right shape everywhere."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        a = ug.tensor(A)
        out = [a + 2, a < a, ug.tensor(V) * 2.0]
        if target == "numpy:eager":
            assert all(type(x._native) is np.ndarray for x in out)
        assert [x.shape for x in out] == [(), (), (3,)]
        assert [x.dtype for x in out] == ["int64", "bool", "float32"]


@pytest.mark.parametrize("target", TARGETS)
def test_bad_operands_keep_their_errors(target):
    """A number too wide for the tensor, an impossible shape, a non-number: our errors,
    also when the op's plan and the number's operand were made before."""
    f = ug.function(lambda a, v: (a + 1, v + v))
    run_on(target, f, A, V)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        run_on(target, ug.function(lambda a: a + 2**64), A)
    with pytest.raises(ShapeError, match=r"test_eager_op_kernels\.py:\d+"):
        run_on(target, ug.function(lambda v, m: v + m), V, M)
    with pytest.raises(TypeError, match="not a tensor, array or number"):
        run_on(target, ug.function(lambda v: v + "1"), V)


@pytest.mark.parametrize("target", TARGETS)
def test_the_tape_records_every_op_after_plans_exist(target):
    """The ops run once without a tape (their plans and NumPy kernels made), then under
    ug.grad: every op is recorded, the gradients are the analytic ones."""

    def loss(x, y):
        return ug.sum((x + 2.0) * x + x * y - ug.relu(y) * 0.5)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x, y = ug.tensor(V), ug.tensor(-V)
        loss(x, y)
        gx, gy = (g.numpy() for g in ug.grad(loss, (0, 1))(x, y))
    xd, yd = V.astype(np.float64), -V.astype(np.float64)
    np.testing.assert_allclose(gx, 2 * xd + 2 + yd, rtol=1e-6)
    np.testing.assert_allclose(gy, xd - 0.5 * (yd > 0), rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_a_kernel_or_op_table_patched_after_a_plan_runs(target, monkeypatch):
    """The NumPy engine reads its fast kernels and its op table at each eager call, not
    once per plan: a kernel replaced after the op ran runs; a replaced op table (no fast kernel
    then) runs its own reference. Other targets: the true sums."""
    import dataclasses

    from unigraph.dispatch import current_backend
    from unigraph.ops import OPS
    from unigraph.reference import fast_kernels

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor(V)
        assert (x + x).numpy().tolist() == [3.0, -0.0, 8.0]
        monkeypatch.setitem(fast_kernels.KERNELS, "add", lambda a, b: np.asarray(a + b + 1))
        patched = (x + x).numpy().tolist()
        monkeypatch.undo()
        broken = dict(OPS, add=dataclasses.replace(OPS["add"],
                                                   reference=lambda a, b: np.asarray(a - b)))
        if t.backend == "numpy":
            monkeypatch.setattr(current_backend(), "ops", broken)
        swapped = (x + x).numpy().tolist()
    if t.backend == "numpy":  # (numpy:static's eager ops run on the engine too)
        assert patched == [4.0, 1.0, 9.0]
        assert swapped == [0.0, 0.0, 0.0]
    else:
        assert patched == swapped == [3.0, -0.0, 8.0]


@pytest.mark.parametrize("target", TARGETS)
def test_truth_of_tensors(target):
    """`bool()`: one-element bool tensors of shape () and (1,) read as Python bools, a
    one-element float tensor through a NumPy copy; a vector is refused eagerly, and a
    traced tensor in a static trace."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        a = ug.tensor(A)
        assert bool(a < 8) is True and bool(a > 8) is False
        assert bool(ug.tensor(np.array([True]))) is True
        assert bool(ug.tensor(np.float32(0.0))) is False
        with pytest.raises(ValueError, match="ambiguous"):
            bool(ug.tensor(V) > 0)

    def branch(v):
        return v + 1 if v[0] > 0 else v - 1

    if t.mode == "eager":
        _same(run_on(target, lambda v: branch(ug.tensor(v)), V), V + 1)
    else:
        with pytest.raises(TracingError, match="ug.cond"):
            run_on(target, ug.function(branch, autograph=False), V)


@pytest.mark.parametrize("target", TARGETS)
def test_an_eager_op_set_on_the_numpy_backend_sees_every_op(target):
    """The random-program tester's watch (an `eager_op` set on the numpy backend object)
    sees every eager op the NumPy engine applies, also ops whose plans and kernels were made
    before it was set; afterwards the kernels run again. Other targets: no NumPy op."""
    from unigraph.testing.random_programs.runner import watching

    seen = []
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor(V)

        def ops():
            return [(x + x).numpy(), ug.relu(x).numpy(), (x < 1.0).numpy(), (x * 2).numpy()]

        before = ops()
        with watching(lambda op, inputs, attrs, out: seen.append(op)):
            during = ops()
        after = ops()
    numpy_ops = t.backend == "numpy"  # (numpy:static's eager ops run on the engine too)
    assert seen == (["add", "relu", "less", "mul"] if numpy_ops else [])
    for got in (during, after):
        for g, w in zip(got, before):
            _same(g, w)
