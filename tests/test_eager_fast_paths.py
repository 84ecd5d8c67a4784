"""The eager dispatch fast paths (issue 19 item 3) give what the general path gives, on all 9
targets: elementwise ops on same-dtype tensors and on a tensor and a Python number (the
wrappers skip promotion), the per-signature plans (shape inference once, the lowering
called directly), a cond or while_loop on a concrete bool scalar, and every fallback: a
traced predicate, a Python or NumPy bool, a (1,) predicate, a bad predicate with our error,
an impossible shape with our ShapeError. Expected values are float64 NumPy or by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ControlFlowError, ShapeError

X = np.array([[0.5, -1.25], [2.0, 3.5]], np.float32)
Y = np.array([[1.5, 0.25], [-2.0, 0.75]], np.float32)
N = np.array([3, -4, 7], np.int64)


def _close(got, want, dtype):
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_elementwise_fast_paths_agree_with_numpy(target):
    @ug.function
    def f(x, y, n):
        # twice each: the second call of a signature runs from its cached plan
        return (x + y, x + y, y - x, x * 2, 2 * x, x - 0.5, 1.5 / x, ug.exp(x), ug.exp(x),
                -x, n + 1, 3 - n, n * 0.5, x + n[:1].astype("float32"), x > y, n < 0, x @ y,
                x @ y)

    out = run_on(target, f, X, Y, N)
    x, y, n = X.astype(np.float64), Y.astype(np.float64), N
    want = [(x + y, "float32"), (x + y, "float32"), (y - x, "float32"), (x * 2, "float32"),
            (2 * x, "float32"), (x - 0.5, "float32"), (1.5 / x, "float32"),
            (np.exp(x), "float32"), (np.exp(x), "float32"), (-x, "float32"),
            (n + 1, "int64"), (3 - n, "int64"), (n * 0.5, "float64"),  # a float widens ints
            (x + 3.0, "float32"), (x > y, "bool"), (n < 0, "bool"), (x @ y, "float32"),
            (x @ y, "float32")]
    assert len(out) == len(want)
    for got, (value, dtype) in zip(out, want):
        _close(got, value, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_plans_follow_shapes_and_keep_our_shape_error(target):
    @ug.function
    def add(a, b):
        return a + b

    for shape in [(2,), (3, 2), (2,)]:  # a new signature after a cached one, and back
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        got = run_on(target, add, a, np.float32(2.0) * np.ones(shape[-1:], np.float32))
        _close(got, a + 2.0, "float32")
    for _ in range(2):  # refused every time, by our inference, naming this file
        with pytest.raises(ShapeError, match=r"test_eager_fast_paths\.py:\d+"):
            run_on(target, add, np.ones(3, np.float32), np.ones(2, np.float32))


def _add_or_sub(x, y):
    return ug.cond(x > y, lambda: x + y, lambda: x - y)


@pytest.mark.parametrize("target", TARGETS)
def test_cond_on_each_kind_of_predicate(target):
    f = ug.function(_add_or_sub)
    for x, y in [(2.0, 0.5), (0.5, 2.0), (2.0, 0.5)]:  # both branches, the first again
        got = run_on(target, f, np.float32(x), np.float32(y))
        _close(got, x + y if x > y else x - y, "float32")

    @ug.function
    def by_kind(x, flag):
        one = ug.reshape(x > 0, (1,))  # a (1,) predicate
        return (ug.cond(one, lambda: x * 2, lambda: x * 3),
                ug.cond(flag, lambda: x + 1, lambda: x - 1),  # a Python bool: Python's `if`
                ug.cond(np.bool_(False), lambda: x + 1, lambda: x - 1))

    for value, flag in [(1.5, True), (-1.5, False)]:
        fn = ug.function(by_kind.fn, static_argnums=1)
        got = run_on(target, fn, np.float32(value), flag)
        _close(got[0], value * (2 if value > 0 else 3), "float32")
        _close(got[1], value + (1 if flag else -1), "float32")
        _close(got[2], value - 1, "float32")


@pytest.mark.parametrize("target", TARGETS)
def test_cond_refuses_bad_predicates_and_branches_in_our_words(target):
    @ug.function
    def vector_pred(x):
        return ug.cond(x > 0, lambda: x, lambda: -x)

    with pytest.raises(ControlFlowError, match=r"cond at .*test_eager_fast_paths\.py:\d+: "
                                               r"the predicate must be a scalar, got shape \[2\]"):
        run_on(target, vector_pred, np.array([1.0, -1.0], np.float32))

    @ug.function
    def float_pred(x):
        return ug.cond(x, lambda: x, lambda: -x)

    with pytest.raises(ControlFlowError, match=r"the predicate is a float32\[\] tensor"):
        run_on(target, float_pred, np.float32(1.0))

    @ug.function
    def mismatched(x):
        return ug.cond(x > 0, lambda: x, lambda: ug.cast(x, "float64"))

    for value in (1.0, -1.0, 1.0):  # whichever branch runs, every time
        with pytest.raises(ControlFlowError, match=r"float32\[\].*float64\[\]|float64\[\]"
                                                   r".*float32\[\]"):
            run_on(target, mismatched, np.float32(value))


@pytest.mark.parametrize("target", TARGETS)
def test_while_loop_fast_path_and_fallbacks(target):
    @ug.function
    def counter(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

    for _ in range(2):
        got = run_on(target, counter, np.int64(0), np.int64(10))
        assert [int(v) for v in got] == [20, 20] and got[0].dtype == np.int64

    @ug.function
    def from_numbers(x):  # Python numbers and a dict as loop variables: the general path
        out = ug.while_loop(lambda s: s["i"] < 4, lambda s: {"i": s["i"] + 1, "x": s["x"] * x},
                            {"i": 0, "x": 1.0}, maximum_iterations=3)
        return out["i"], out["x"]

    got = run_on(target, from_numbers, np.float32(1.5))
    assert int(got[0]) == 3
    _close(got[1], 1.5 ** 3, "float32")

    @ug.function
    def int_pred(n):
        return ug.while_loop(lambda n: n, lambda n: (n - 1,), (n,))

    with pytest.raises(ControlFlowError, match=r"while_loop cond_fn at .*test_eager_fast_paths"
                                               r"\.py:\d+: the predicate is a int64\[\] tensor"):
        run_on(target, int_pred, np.int64(3))


@pytest.mark.parametrize("target", TARGETS)
def test_truth_of_one_element_bool_tensors(target):
    @ug.function
    def pick(x):
        return ug.where(ug.reshape(x > 0, (1,)), x, -x)

    backend, mode = target.split(":")
    with ug.use_backend(backend, mode):
        for value in (2.0, -2.0):
            flag = ug.tensor(np.array([value > 0]))  # a (1,) bool tensor made on the target
            assert bool(flag) is (value > 0)
            assert bool(ug.tensor(np.bool_(value > 0)) & flag) is (value > 0)
        _close(pick(np.array([-3.0], np.float32)).numpy(), [3.0], "float32")


@pytest.mark.parametrize("target", TARGETS)
def test_cached_number_operands_keep_the_sign_of_zero(target):
    # A Python number becomes a cached eager tensor; 0.0 and -0.0 are equal as dict keys,
    # so a cache keyed by value alone gave x + (-0.0) = +0.0 once x + 0.0 had run.
    @ug.function
    def f(z, x):
        return z + 0.0, z + -0.0, x * 0.0, x * -0.0, -0.0 * x, 0.0 - -z

    z = np.array([-0.0, -0.0], np.float32)
    x = np.array([1.0, 2.0], np.float32)
    want = [False, True, False, True, True, False]  # the sign bit of each result, as IEEE gives
    # In a tf.function Grappler rewrites z + 0.0 to z and 0.0 - y to -y where the number is
    # a Const of its graph (quirks "add", "sub"): tensorflow:function captures its constants.
    # (paddle:static makes its -0.0 constants without a -0.0 attribute, which its IR shares
    # with 0.0: unigraph_paddle.program_scalars.)
    for _ in range(2):
        out = run_on(target, f, z, x)
        assert [bool(o[0]) for o in map(np.signbit, out)] == want, out
        assert all(o[0] == o[1] for o in map(np.signbit, out))
