"""The eager per-op path's caches (issue 19 item 3) on all 9 targets: a Python number's cached
operand is keyed by its type and value (a zero also by its sign), and an eager cond's check
of the branch not taken is keyed by what decides its structure, operands included."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


@pytest.mark.parametrize("target", TARGETS)
def test_number_operands_of_one_value_and_another_type_or_sign(target):
    # Numbers equal as dict keys (2, 2.0, True) or equal but for the sign: each must be its
    # own operand. Every value is exact in float32: the float64 reference rounds to it.
    @ug.function
    def floats(x):
        return (x + 2, x + 2.0, x - 2.0, x * -2.0, x + -2, x / 0.5, x * 0.125, x + -0.25,
                x * float("inf"), x - float("inf"))

    @ug.function
    def ints(i):
        return i + 2, i - 3, i * -1, i + 2**40, i * True

    x = np.array([1.5, -3.0], np.float32)
    i = np.array([7, -2], np.int64)
    x64 = x.astype(np.float64)
    want_floats = [x64 + 2, x64 + 2, x64 - 2, x64 * -2, x64 - 2, x64 / 0.5, x64 * 0.125,
                   x64 - 0.25, x64 * np.inf, x64 - np.inf]
    want_ints = [i + 2, i - 3, -i, i + 2**40, i]
    for _ in range(2):  # the second call reads every operand from the cache
        got = run_on(target, floats, x)
        for g, w in zip(got, want_floats, strict=True):
            assert g.dtype == np.float32
            np.testing.assert_array_equal(g, w.astype(np.float32))
        got = run_on(target, ints, i)
        for g, w in zip(got, want_ints, strict=True):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", TARGETS)
def test_number_too_wide_for_the_tensor_is_still_refused(target):
    @ug.function
    def f(i):
        return i + 2**70

    with pytest.raises(OverflowError, match="does not fit in int64"):
        run_on(target, f, np.array([1], np.int64))


@pytest.mark.parametrize("target", TARGETS)
def test_cond_branch_check_sees_the_operands(target):
    # The untaken branch's structure depends on the operand's shape: a check remembered
    # from a (2,) operand must not let a (3,) one through.
    @ug.function
    def f(pred, a):
        return ug.cond(pred, lambda a: a * 2.0, lambda a: a[:2], a)

    pred = np.array(True)
    np.testing.assert_array_equal(run_on(target, f, pred, np.ones(2, np.float32)), [2.0, 2.0])
    with pytest.raises(ug.ControlFlowError, match="cond at .*test_eager_dispatch_keys.py"):
        run_on(target, f, pred, np.ones(3, np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_while_body_types_checked_every_way(target):
    # The eager loop compares the body's result with the loop variables inline; a list is
    # accepted as the tuple, another dtype or shape is refused in the user's terms.
    @ug.function
    def as_list(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: [a + 3, b + 1], (a, b))

    got = run_on(target, as_list, np.int64(0), np.int64(5))
    assert [int(v) for v in got] == [9, 8] and got[0].dtype == np.int64  # hand-counted

    @ug.function
    def to_float(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 1.5, b), (a, b))

    with pytest.raises(ug.ControlFlowError, match="while_loop at .*test_eager_dispatch_keys"):
        run_on(target, to_float, np.int64(0), np.int64(5))

    @ug.function
    def grows(a, b):
        return ug.while_loop(lambda a, b: ug.sum(a) < b,
                             lambda a, b: (ug.concat([a, a], 0), b), (a, b))

    with pytest.raises(ug.ControlFlowError, match="while_loop at .*test_eager_dispatch_keys"):
        run_on(target, grows, np.ones(1, np.float32), np.float32(4))
