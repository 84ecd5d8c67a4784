"""Scalar loops and branches as the static plans run them (issue 19, counter and cond): the
loop's iteration guard kept as a Python int, integer-only loops run whole with overflow
ignored, a scalar cast on NumPy's scalar, and the outputs of a plan's generated function
handed back without copies only where no feed can share them. Every case runs on all 9
targets, over three calls (a static plan walks its steps on the first, runs generated code
from the second), against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.control_flow import loop_limit
from unigraph.errors import ControlFlowError


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def three_calls(target, fn, *args):
    with on(target):
        return [fn(*args) for _ in range(3)]


@ug.function
def count_up(a, b):
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("limit, raises", [(9, True), (10, False), (None, False)])
def test_the_iteration_guard_stops_a_loop_past_its_limit(target, limit, raises):
    # 0 < 10 ... the loop runs exactly 10 times: a limit of 9 stops it, 10 lets it end
    a, b = np.int64(0), np.int64(10)
    if limit is None:
        results = three_calls(target, count_up, a, b)
    elif raises:
        with loop_limit(limit):
            for _ in range(3):
                with pytest.raises(ControlFlowError, match="ran more than 9 iterations"):
                    three_calls(target, count_up, a, b)
        return
    else:
        with loop_limit(limit):
            results = three_calls(target, count_up, a, b)
    for first, second in results:
        assert (first.dtype, second.dtype) == ("int64", "int64")
        assert (int(first.numpy()), int(second.numpy())) == (20, 20)


@ug.function
def nested_counts(n, m):
    """A guarded loop inside a guarded loop's body: both counters, both flags."""
    def body(i, total):
        _, inner = ug.while_loop(lambda j, t: j < m, lambda j, t: (j + 1, t + j), (i * 0, total))
        return i + 1, inner

    return ug.while_loop(lambda i, total: i < n, body, (n * 0, n * 0))


@pytest.mark.parametrize("target", TARGETS)
def test_nested_guarded_loops_count_and_stop(target):
    n, m = np.int64(4), np.int64(5)
    for i, total in three_calls(target, nested_counts, n, m):
        assert (int(i.numpy()), int(total.numpy())) == (4, 4 * sum(range(5)))
    with loop_limit(4):  # the inner loop runs 5 times
        for _ in range(3):
            with pytest.raises(ControlFlowError, match="ran more than 4 iterations"):
                three_calls(target, nested_counts, n, m)


@ug.function
def wrapping(x, n):
    """int16 arithmetic only: wraps around, silently on every target."""
    return ug.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 3 + 20000), (n * 0, x))


@pytest.mark.parametrize("target", TARGETS)
def test_an_integer_loop_wraps_under_any_numpy_error_state_and_leaves_it(target):
    want = 7
    for _ in range(4):
        want = (want * 3 + 20000 + 2**15) % 2**16 - 2**15  # int16 two's complement
    with np.errstate(all="raise"):
        before = np.geterr()
        results = three_calls(target, wrapping, np.int16(7), np.int16(4))
        assert np.geterr() == before  # the run switched overflow off only while it ran
    for i, v in results:
        assert (i.dtype, v.dtype) == ("int16", "int16")
        assert (int(i.numpy()), int(v.numpy())) == (4, want)


@ug.function
def grow(x, n):
    """A float loop with an int counter: float32 overflows to inf."""
    return ug.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 1e10), (n * 0, x))


@pytest.mark.parametrize("target", TARGETS)
def test_a_float_loop_with_an_int_counter_overflows_to_inf(target):
    with np.errstate(over="ignore"):  # (NumPy warns, the frameworks do not)
        results = three_calls(target, grow, np.float32(3.0), np.int64(5))
    for i, v in results:
        assert int(i.numpy()) == 5 and v.dtype == "float32"
        assert np.isposinf(v.numpy())


@ug.function
def flags(x, y, k):
    return (ug.cast(x > y, "int64"), ug.cast(k, "int64"), ug.cast(k, "float32"),
            ug.cast(k, "bool"), ug.cast(ug.cast(x > y, "int32"), "uint8"))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x, y, k", [(2.0, 1.0, -3), (1.0, 2.0, 0), (0.5, 0.5, 2**31 - 1)])
def test_casts_of_scalars_give_numpy_casts(target, x, y, k):
    args = (np.float32(x), np.float32(y), np.int32(k))
    want = [np.asarray(x > y).astype("int64"), np.asarray(args[2]).astype("int64"),
            np.asarray(args[2]).astype("float32"), np.asarray(args[2]).astype("bool"),
            np.asarray(x > y).astype("int32").astype("uint8")]
    for result in three_calls(target, flags, *args):
        for got, expected in zip(result, want):
            assert got.dtype == expected.dtype.name and got.shape == ()
            assert got.numpy().tobytes() == expected.tobytes()


@ug.function
def maybe_loop(x, n):
    """The carried value is the argument itself when the loop does not run."""
    _, out = ug.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v + 1.0), (n * 0, x))
    return out


@ug.function
def choose(p, x, y):
    return ug.cond(p, lambda: x, lambda: y * 2.0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(), (3,)])
def test_an_argument_passed_through_a_loop_or_branch_is_never_shared(target, shape):
    x = np.full(shape, 1.5, np.float32)
    y = np.full(shape, 4.0, np.float32)
    with on(target):
        loops = [maybe_loop(x, np.int64(0)) for _ in range(3)]
        ran = [maybe_loop(x, np.int64(2)) for _ in range(3)]
        branches = [choose(np.bool_(True), x, y) for _ in range(3)]
        others = [choose(np.bool_(False), x, y) for _ in range(3)]
    x[...] = -1.0  # the caller's later writes must reach no result
    y[...] = -1.0
    for result in loops + branches:
        np.testing.assert_array_equal(result.numpy(), np.full(shape, 1.5, np.float32))
    for result in ran:
        np.testing.assert_array_equal(result.numpy(), np.full(shape, 3.5, np.float32))
    for result in others:
        np.testing.assert_array_equal(result.numpy(), np.full(shape, 8.0, np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_a_compiled_loop_raises_past_its_limit_on_a_later_call(target):
    # The first calls compile and make the prebuilt caller (arrays: its key); a later call
    # of the same signature runs past the limit there, and the next fits again
    def ints(a, b):
        return np.asarray(a, np.int64), np.asarray(b, np.int64)

    with loop_limit(10), on(target):
        for _ in range(2):
            a, b = count_up(*ints(0, 10))
            assert (int(a.numpy()), int(b.numpy())) == (20, 20)
        for _ in range(2):
            with pytest.raises(ControlFlowError, match="ran more than 10 iterations"):
                count_up(*ints(0, 11))
        a, b = count_up(*ints(1, 10))  # 9 iterations
        assert (int(a.numpy()), int(b.numpy())) == (19, 19)
        if Target.parse(target).mode != "eager":
            assert len(count_up._fast) == 1


def results_of_every_shape(x, n):
    k = 0
    for i in ug.range(n):
        k = i  # the loop index, a weak int64 tensor: returned as an ordinary one
    return x * 2.0, (x, k), [k, x + 1.0], {"k": k, "x": x}, k


@pytest.mark.parametrize("target", TARGETS)
def test_a_converted_function_returns_ordinary_tensors(target):
    fn = ug.function(results_of_every_shape)
    single = ug.function(lambda x: x * 2.0)
    pair = ug.function(lambda x: (x, x - 1.0))
    x = np.array([1.5, -2.0], np.float32)
    for _ in range(3):
        with on(target):
            doubled, (same, k), listed, mapping, last = fn(x, np.int64(4))
            one = single(x)
            two = pair(x)
        assert type(two) is tuple and len(two) == 2
        assert type(listed) is list and type(mapping) is dict
        for t in (doubled, same, k, *listed, *mapping.values(), last, one, *two):
            assert type(t) is ug.Tensor
        assert int(k.numpy()) == int(last.numpy()) == 3 and k.dtype == "int64"
        np.testing.assert_array_equal(doubled.numpy(), x * 2.0)
        np.testing.assert_array_equal(one.numpy(), x * 2.0)
        np.testing.assert_array_equal(two[1].numpy(), x - 1.0)
