"""A repeated static @ug.function call runs its generated caller, which on numpy:static and
torch:static calls the executable's compiled function itself (`direct_run`), makes each
output tensor inline (`tensor.eager_tensor_lines`), and is entered without reading the
tracing ContextVar while no trace is open (`tracing.open_builders`). Every case runs each
call several times (the first, the one that makes the caller, the repeats) on all 9
targets and checks values computed by hand, the output tensors whole, and that each error
a bad call raises is the same class and message on the repeats as on the first call."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import IndexOutOfRangeError, ShapeError, TracingError
from unigraph.tensor import Tensor
from unigraph.tracing import open_builders

REPEATS = 4  # first call, second (makes the caller), then the caller's own calls


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def check_tensor(result, expected, dtype):
    """`result` a whole eager tensor (every slot set) of `expected` values and `dtype`."""
    assert type(result) is Tensor
    for slot in Tensor.__slots__:
        getattr(result, slot)  # an unset slot raises AttributeError
    assert result._value is None and result._builder is None
    assert result.dtype == dtype and result.shape == np.shape(expected)
    assert result.numpy().tolist() == expected
    assert np.asarray(result.numpy()).dtype == np.dtype(dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_repeats_after_a_change_of_dtype_shape_or_rank(target):
    cond = ug.function(lambda x, y: ug.cond(ug.sum(x) > ug.sum(y), lambda: x + y,
                                            lambda: x - y))
    cases = [
        (np.float32(3.0), np.float32(1.0), 4.0, "float32"),
        (np.float32(1.0), np.float32(3.0), -2.0, "float32"),
        (np.float64(3.0), np.float64(1.0), 4.0, "float64"),  # a new dtype
        (np.int64(5), np.int64(9), -4, "int64"),
        (np.float32([2.0, 1.0])[:1], np.float32([0.5]), [2.5], "float32"),  # rank 1
        (np.float32([[2.0]]), np.float32([[0.5]]), [[2.5]], "float32"),  # rank 2
        (np.float32(3.0), np.float32(1.0), 4.0, "float32"),  # the first type again
    ]
    with on(target):
        for x, y, expected, dtype in cases:
            tx, ty = ug.tensor(np.asarray(x)), ug.tensor(np.asarray(y))
            for _ in range(REPEATS):
                check_tensor(cond(tx, ty), expected, dtype)
            for _ in range(REPEATS):  # NumPy arrays: the same graph, their own caller
                check_tensor(cond(np.asarray(x), np.asarray(y)), expected, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_python_numbers_and_tensors_and_keywords(target):
    scale = ug.function(lambda x, factor: x * factor)
    with on(target):
        x = ug.tensor(np.float32([1.0, -2.0]))
        for _ in range(REPEATS):
            check_tensor(scale(x, ug.tensor(np.float32(3.0))), [3.0, -6.0], "float32")
        for _ in range(REPEATS):  # a Python float is a float32 scalar tensor
            check_tensor(scale(x, 3.0), [3.0, -6.0], "float32")
        for _ in range(REPEATS):
            check_tensor(scale(x, factor=ug.tensor(np.float32(0.5))), [0.5, -1.0], "float32")
        for _ in range(REPEATS):
            check_tensor(scale(x=x, factor=2.0), [2.0, -4.0], "float32")
        for _ in range(REPEATS):  # back to the positional tensors after keywords
            check_tensor(scale(x, ug.tensor(np.float32(-1.0))), [-1.0, 2.0], "float32")


@pytest.mark.parametrize("target", TARGETS)
def test_a_switch_of_target_runs_on_the_new_one(target):
    add = ug.function(lambda x, y: x + y)
    x, y = np.float32([1.25]), np.float32([2.0])
    with on(target):
        tx, ty = ug.tensor(x), ug.tensor(y)
        for _ in range(REPEATS):
            first = add(tx, ty)
            check_tensor(first, [3.25], "float32")
        backend = first._backend
    for other in ("numpy:static", "torch:static", "numpy:eager"):
        with on(other):
            for _ in range(REPEATS):
                # the tensors of `target`'s backend, fed to another target (converted)
                result = add(tx, ty)
                check_tensor(result, [3.25], "float32")
            assert result._backend is ug.function.__globals__["backend_of"](
                Target.parse(other))
    with on(target):
        for _ in range(REPEATS):
            result = add(tx, ty)
            check_tensor(result, [3.25], "float32")
            assert result._backend is backend


@pytest.mark.parametrize("target", TARGETS)
def test_outputs_fed_back_and_tuples(target):
    # A counter's outputs fed to the next call (a static run's output holds an array, no
    # native, on numpy:static), and a tuple of outputs
    step = ug.function(lambda a, b: (a + 2, b + 1))
    with on(target):
        a, b = ug.tensor(np.int64(0)), ug.tensor(np.int64(10))
        for i in range(1, 2 * REPEATS):
            a, b = step(a, b)
            check_tensor(a, 2 * i, "int64")
            check_tensor(b, 10 + i, "int64")


@pytest.mark.parametrize("target", TARGETS)
def test_a_call_inside_a_trace_joins_it(target):
    inner = ug.function(lambda x: x * 3.0)

    @ug.function
    def outer(x):
        return inner(x) + 1.0

    with on(target):
        x = ug.tensor(np.float32([1.0, 2.0]))
        for _ in range(REPEATS):  # inner's caller made and used at the top level
            check_tensor(inner(x), [3.0, 6.0], "float32")
        for _ in range(REPEATS):  # then inside outer's trace: its ops join outer's graph
            check_tensor(outer(x), [4.0, 7.0], "float32")
        assert not open_builders
        if Target.parse(target).mode != "eager":
            assert sum(inner._traces.values()) == 1  # inlined in outer: not traced again
            ops = [node.op for node in outer.trace(x).nodes]
            assert "mul" in ops and "add" in ops, ops
        assert not open_builders  # every trace closed what it opened


@pytest.mark.parametrize("target", TARGETS)
def test_a_recursive_call_while_tracing_is_refused(target):
    @ug.function
    def forever(x):
        return forever(x - 1.0)

    with on(target):
        x = ug.tensor(np.float32(1.0))
        if Target.parse(target).mode == "eager":
            return  # eager runs it as Python does: no trace to refuse
        messages = set()
        for _ in range(REPEATS):
            with pytest.raises(TracingError) as caught:
                forever(x)
            messages.add(str(caught.value))
        assert len(messages) == 1 and "calls itself" in messages.pop()
        assert not open_builders


@pytest.mark.parametrize("target", TARGETS)
def test_input_spec_refusals_on_repeats(target):
    @ug.function(input_spec=[ug.Spec((None, 2), "float32")])
    def double(x):
        return x * 2.0

    with on(target):
        good = ug.tensor(np.float32([[1.0, 2.0]]))
        bad = [ug.tensor(np.float64([[1.0, 2.0]])),  # dtype
               ug.tensor(np.float32([[1.0, 2.0, 3.0]])),  # shape
               ug.tensor(np.float32([1.0, 2.0]))]  # rank
        for x in bad:
            messages = set()
            for _ in range(REPEATS):
                check_tensor(double(good), [[2.0, 4.0]], "float32")
                with pytest.raises(ShapeError) as caught:
                    double(x)
                messages.add(str(caught.value))
            assert len(messages) == 1, messages


@pytest.mark.parametrize("target", TARGETS)
def test_a_run_error_is_translated_on_every_repeat(target):
    take = ug.function(lambda x, i: ug.take(x, i))
    x = np.float32([1.0, 2.0, 4.0])
    with on(target):
        tx = ug.tensor(x)
        for _ in range(REPEATS):
            check_tensor(take(tx, ug.tensor(np.int64([2, 0]))), [4.0, 1.0], "float32")
        messages = set()
        for _ in range(REPEATS):  # the same types: the caller's run fails
            with pytest.raises(IndexOutOfRangeError) as caught:
                take(tx, ug.tensor(np.int64([3, 0])))
            messages.add(str(caught.value))
        assert len(messages) == 1, messages
        message = messages.pop()  # in the user's terms: the target and the op's line
        assert message.startswith(f"take on {target} at "), message
        assert "test_direct_callers.py:" in message
        assert "index 3 is out of range for size 3" in message
        for _ in range(REPEATS):  # and the caller still runs good calls
            check_tensor(take(tx, ug.tensor(np.int64([1, 1]))), [2.0, 2.0], "float32")
