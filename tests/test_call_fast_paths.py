"""The per-call fast paths of `@ug.function` (issue 19 item 3), on all 9 targets: a call
with positional tensors or NumPy arrays of a signature seen before (a static target finds
its compiled graph by argument types alone; an eager one calls the converted function
directly), and the eager tuple-of-tensors while_loop. Each gives what the float64 NumPy
reference (or a hand count) gives, and falls back where it must: a new shape or dtype traces
again, a changed loop limit (Python state the trace read) is honoured, a mixed call with a
Python number still works, a body of the wrong type raises our error with the user's line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.control_flow import loop_limit
from unigraph.errors import ControlFlowError


def _counter():
    @ug.function
    def counter(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

    return counter


def _add_or_sub():
    @ug.function
    def add_or_sub(x, y):
        return ug.cond(ug.sum(x) > ug.sum(y), lambda: x + y, lambda: x - y)

    return add_or_sub


def _static(target: str) -> bool:
    return Target.parse(target).mode != "eager"


@pytest.mark.parametrize("target", TARGETS)
def test_repeated_calls_agree_with_the_reference(target):
    counter, add_or_sub = _counter(), _add_or_sub()
    a, b = np.asarray(0, np.int64), np.asarray(10, np.int64)
    x, y = np.float32(0.75), np.float32(-1.5)
    for _ in range(3):  # the first call compiles; the later ones take the fast path
        got_a, got_b = run_on(target, counter, a, b)
        assert (got_a.dtype, int(got_a), int(got_b)) == (np.int64, 20, 20)  # by hand
        got = run_on(target, add_or_sub, np.asarray(x), np.asarray(y))
        assert got.dtype == np.float32 and got == np.float32(x + y)
        got = run_on(target, add_or_sub, np.asarray(y), np.asarray(x))  # the other branch
        assert got == np.float32(y - x)
    if _static(target):
        # One graph each, found by argument types on the later calls.
        assert sum(counter._traces.values()) == 1 and len(counter._fast) == 1
        assert sum(add_or_sub._traces.values()) == 1


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_and_array_arguments_share_one_graph(target):
    add_or_sub = _add_or_sub()
    x = np.array([1.0, 2.5, -3.0], np.float32)
    y = np.array([0.5, 0.5, 0.5], np.float32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        tx, ty = ug.tensor(x), ug.tensor(y)
        results = [add_or_sub(tx, ty), add_or_sub(x, y), add_or_sub(tx, y), add_or_sub(tx, ty)]
        results.append(add_or_sub(x, ty))
    want = x.astype(np.float64) - y  # sum(x) = 0.5 < sum(y) = 1.5: the false branch
    for result in results:
        assert result.dtype == "float32" and result.shape == (3,)
        np.testing.assert_allclose(result.numpy(), want, rtol=1e-7)
    if _static(target):
        assert sum(add_or_sub._traces.values()) == 1


@pytest.mark.parametrize("target", TARGETS)
def test_a_new_shape_or_dtype_traces_again(target):
    add_or_sub = _add_or_sub()
    cases = [np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0], np.float32),
             np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 2.0], np.float64),
             np.array([1.0, 2.0], np.float32)]
    for x in cases:
        y = np.full_like(x, 0.25)
        got = run_on(target, add_or_sub, x, y)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_allclose(got, x.astype(np.float64) + 0.25, rtol=1e-7)
    if _static(target):
        assert sum(add_or_sub._traces.values()) == 3  # float32[2], float32[3], float64[2]


@pytest.mark.parametrize("target", TARGETS)
def test_a_changed_loop_limit_is_honoured_after_fast_calls(target):
    counter = _counter()
    a, b = np.asarray(0, np.int64), np.asarray(10, np.int64)
    run_on(target, counter, a, b)
    run_on(target, counter, a, b)  # the cached graph, by argument types
    with loop_limit(3), pytest.raises(ControlFlowError, match=r"ran more than 3 iterations"):
        run_on(target, counter, a, b)  # 10 iterations: the limit must stop it
    got_a, got_b = run_on(target, counter, a, b)  # the default limit again
    assert (int(got_a), int(got_b)) == (20, 20)


@pytest.mark.parametrize("target", TARGETS)
def test_python_numbers_and_keywords_take_the_general_path(target):
    counter = _counter()
    a = np.asarray(1, np.int64)
    for call in (lambda: counter(a, 10), lambda: counter(a, b=np.asarray(10, np.int64)),
                 lambda: counter(a, np.asarray(10, np.int64))):
        t = Target.parse(target)
        with ug.use_backend(t.backend, t.mode):
            got_a, got_b = call()
        # 1, 10 -> 3, 11 -> ... -> 19, 19: 9 iterations, by hand
        assert (int(got_a.numpy()), int(got_b.numpy())) == (19, 19)


@pytest.mark.parametrize("target", TARGETS)
def test_eager_tensor_loop_refuses_a_body_of_another_dtype(target):
    @ug.function
    def widening(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a * 0.5 + 1, b), (a, b))

    with pytest.raises(ControlFlowError, match=r"while_loop at .*test_call_fast_paths\.py:\d+.*"
                                               r"int64\[\].*float"):
        run_on(target, widening, np.asarray(0, np.int64), np.asarray(3, np.int64))


@pytest.mark.parametrize("target", TARGETS)
def test_eager_tensor_loop_with_a_list_body_and_maximum_iterations(target):
    @ug.function
    def halve(x, n):
        return ug.while_loop(lambda x, n: n > 0, lambda x, n: [x * 0.5, n - 1], (x, n),
                             maximum_iterations=3)

    x = np.array([8.0, -2.0], np.float32)
    got_x, got_n = run_on(target, halve, x, np.asarray(5, np.int64))
    np.testing.assert_array_equal(got_x, x.astype(np.float64) / 8)  # 3 iterations
    assert got_n.dtype == np.int64 and int(got_n) == 2


def _nested():
    @ug.function
    def nested(i, total):
        def outer_body(i, total):
            j, total = ug.while_loop(lambda j, t: j < 5, lambda j, t: (j + 1, t + j),
                                     (ug.zeros((), "int64"), total))
            return i + 1, total

        return ug.while_loop(lambda i, t: i < 3, outer_body, (i, total))

    return nested


@pytest.mark.parametrize("target", TARGETS)
def test_loop_guards_of_plain_nested_and_bounded_loops(target):
    # torch:static keeps a plain loop's guard as a Python int; a nested loop (which reports
    # through the counter) and maximum_iterations keep the tensor guard: every kind must
    # still count right and still stop at the limit, on every target.
    nested = _nested()
    zero = np.asarray(0, np.int64)
    for _ in range(2):
        i, total = run_on(target, nested, zero, zero)
        assert (int(i), int(total)) == (3, 30)  # 3 x (0 + 1 + 2 + 3 + 4), by hand
    with loop_limit(4), pytest.raises(ControlFlowError, match=r"ran more than 4 iterations"):
        run_on(target, nested, zero, zero)  # the inner loop runs 5 times
    counter = _counter()
    with loop_limit(10):  # exactly 10 iterations: within the limit
        a, b = run_on(target, counter, np.asarray(0, np.int64), np.asarray(10, np.int64))
    assert (int(a), int(b)) == (20, 20)
    with loop_limit(9), pytest.raises(ControlFlowError, match=r"ran more than 9 iterations"):
        run_on(target, counter, np.asarray(0, np.int64), np.asarray(10, np.int64))


def test_torch_static_keeps_a_plain_loop_guard_in_python():
    pytest.importorskip("torch")
    if "torch:static" not in TARGETS:
        pytest.skip("torch:static is not loaded")
    counter, nested = _counter(), _nested()
    zero, ten = np.asarray(0, np.int64), np.asarray(10, np.int64)
    run_on("torch:static", counter, zero, ten)
    run_on("torch:static", nested, zero, zero)
    (plain,) = counter._cache.values()
    (outer,) = nested._cache.values()
    assert "counter_tensor(" in plain.executable.source
    assert "op_less_equal" not in plain.executable.source.split("def every_value")[0]
    run_source = outer.executable.source.split("def every_value")[0]
    # The inner loop is plain: a Python int; the outer one, which the inner one reports
    # through, keeps its tensor guard.
    assert run_source.count("counter_tensor(") == 1 and "op_less_equal" in run_source


@pytest.mark.parametrize("target", TARGETS)
def test_a_byte_swapped_array_is_converted_on_every_call(target):
    add_or_sub = _add_or_sub()
    x = np.array([1.0, 2.0], np.float32)
    swapped = x.astype(">f4")  # the same values, big-endian: its dtype's name is float32
    y = np.array([0.5, 0.25], np.float32)
    for first, second in ((x, y), (swapped, y), (swapped, y), (x, y)):
        got = run_on(target, add_or_sub, first, second)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, [1.5, 2.25])  # sum(x) > sum(y): x + y


def test_parameter_names_of_plain_functions_match_their_signature():
    """The code-object shortcut gives what inspect.signature gives: positional-only,
    keyword-only and defaulted names, never *args/**kwargs or locals."""
    import functools
    import inspect

    from unigraph.function import parameter_names

    def every_kind(a, b=1, /, c=2, *args, d, e=3, **kw):
        local = a
        return local

    def plain(x, y):
        return x

    @functools.wraps(plain)
    def wrapped(*args):
        return plain(*args)

    for fn in (every_kind, plain, wrapped, lambda: 0, lambda x, *rest: x,
               functools.partial(plain, 1)):
        expected = [p.name for p in inspect.signature(fn).parameters.values()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        assert parameter_names(fn) == expected, fn


def test_parameter_names_of_callable_objects_match_their_signature():
    """The shortcut for an object called through its class's `__call__` (a Module: every
    `ug.function(model)`) gives what inspect.signature gives, wrappers and a set
    `__signature__` included."""
    import functools
    import inspect

    from unigraph.function import parameter_names

    class Call:
        def __call__(self, x, y=1, /, z=2, *args, k, **kw):
            return x

    class Static:
        @staticmethod
        def __call__(x, y):
            return x

    class Wrapped:
        @functools.wraps(lambda q, r: q)
        def __call__(self, x):
            return x

    class Bare:
        def __call__(*args):
            return args

    signed = Call()
    signed.__signature__ = inspect.Signature([inspect.Parameter(
        "only", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    model = ug.nn.Sequential(ug.nn.Linear(2, 2))
    for fn in (Call(), Static(), Wrapped(), Bare(), signed, model, ug.nn.Linear(2, 2),
               ug.function(model)):
        expected = [p.name for p in inspect.signature(fn).parameters.values()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        assert parameter_names(fn) == expected, fn


@pytest.mark.parametrize("target", TARGETS)
def test_a_wrapped_module_lends_the_function_none_of_its_attributes(target):
    """ug.function(model) keeps no copy of the model's attributes (functools.wraps copies a
    wrapped object's __dict__): `training` is the model's, read through it, and the call
    after model.eval() runs as the model now is."""
    model = ug.nn.Sequential(ug.nn.Linear(3, 2), ug.nn.Dropout(0.5))
    fn = ug.function(model)
    assert not {"training", "_parameters", "_modules"} & set(vars(fn)), sorted(vars(fn))
    model.eval()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run_on(target, fn, x)
    want = x @ model[0].weight.numpy() + model[0].bias.numpy()
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
