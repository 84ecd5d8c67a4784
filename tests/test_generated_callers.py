"""A static @ug.function call of a signature seen before runs a generated caller
(`function._caller`) that compares the arguments with its key's types itself, so that
`Function._recent` hands it the next call without a check of its own. Every change of the
arguments (count, rank, shape, dtype, a Python number, keywords, another target) must
reach the caller or trace of its own types, and a bad call must raise what the first call
of those types raises. Each case runs on all 9 targets (eager ones take the eager path: the
same results) and checks values computed by hand, on repeated calls (the second and later
ones go through `_recent`)."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def static(target) -> bool:
    return Target.parse(target).mode != "eager"


def repeated(fn, *args, **kwargs):
    """`fn`'s results for three identical calls (the later ones through `_recent`)."""
    return [fn(*args, **kwargs) for _ in range(3)]


@pytest.mark.parametrize("target", TARGETS)
def test_rank_shape_and_dtype_changes_after_repeated_calls(target):
    halve = ug.function(lambda x: x * 0.5)
    f32 = np.array([[2.0, -4.0]], np.float32)
    cases = [
        (ug.tensor(f32), [[1.0, -2.0]], "float32"),
        (ug.tensor(f32[0]), [1.0, -2.0], "float32"),  # a lower rank
        (ug.tensor(f32[0, 0]), 1.0, "float32"),  # rank 0
        (ug.tensor(f32[0, :1]), [1.0], "float32"),  # another shape, same rank
        (ug.tensor(f32.astype(np.float64)), [[1.0, -2.0]], "float64"),  # another dtype
        (f32, [[1.0, -2.0]], "float32"),  # an array where a tensor was
        (ug.tensor(f32), [[1.0, -2.0]], "float32"),  # the first signature again
    ]
    with on(target):
        for x, expected, dtype in cases:
            for result in repeated(halve, x):
                assert result.numpy().tolist() == expected
                assert (result.dtype, result.shape) == (dtype, np.shape(expected))
    if static(target):
        # [1, 2], [2], [], [1] float32; [1, 2] float64 (the array shares the tensor's graph)
        assert sum(halve._traces.values()) == 5


@pytest.mark.parametrize("target", TARGETS)
def test_another_argument_count_after_repeated_calls(target):
    @ug.function
    def total(*xs):
        result = xs[0]
        for x in xs[1:]:
            result = result + x
        return result

    one, two, three = (ug.tensor(np.float32(v)) for v in (1.0, 2.0, 3.0))
    with on(target):
        for arguments, expected in [((one, two), 3.0), ((one, two, three), 6.0),
                                    ((one,), 1.0), ((one, two), 3.0)]:
            for result in repeated(total, *arguments):
                assert float(result.numpy()) == expected


@pytest.mark.parametrize("target", TARGETS)
def test_no_arguments_and_many_arguments(target):
    @ug.function
    def constant():
        return ug.tensor(np.float32(2.5)) * 2.0

    @ug.function
    def total(*xs):
        return ug.sum(ug.stack(list(xs)))

    many = [ug.tensor(np.float32(i)) for i in range(300)]
    with on(target):
        assert [float(r.numpy()) for r in repeated(constant)] == [5.0] * 3
        assert [float(r.numpy()) for r in repeated(total, *many)] == [44850.0] * 3
        with pytest.raises(TypeError):
            constant(many[0])  # an argument the function does not take: Python's error


@pytest.mark.parametrize("target", TARGETS)
def test_python_numbers_and_tensors_alternate(target):
    scale = ug.function(lambda x, y: x * y)
    x = ug.tensor(np.array([1.5, -2.0], np.float32))
    with on(target):
        for y, expected, dtype in [(ug.tensor(np.float32(2.0)), [3.0, -4.0], "float32"),
                                   (2.0, [3.0, -4.0], "float32"),
                                   (ug.tensor(np.float32(2.0)), [3.0, -4.0], "float32"),
                                   (np.float64(2.0), [3.0, -4.0], "float64"),
                                   (3, [4.5, -6.0], "float64")]:
            for result in repeated(scale, x, y):
                assert result.numpy().tolist() == expected and result.dtype == dtype
        for result in repeated(scale, 2, 3):  # Python ints: int64 tensors
            assert (int(result.numpy()), result.dtype) == (6, "int64")


@pytest.mark.parametrize("target", TARGETS)
def test_keyword_arguments_between_positional_calls(target):
    @ug.function
    def affine(x, w, b=None):
        return x * w if b is None else x * w + b

    x, w, b = (ug.tensor(np.array(v, np.float32)) for v in ([1.0, 2.0], [3.0, 3.0], [0.5, 0.5]))
    with on(target):
        for args, kwargs, expected in [((x, w), {}, [3.0, 6.0]),
                                       ((x,), {"w": w}, [3.0, 6.0]),
                                       ((x, w), {"b": b}, [3.5, 6.5]),
                                       ((x, w), {}, [3.0, 6.0]),
                                       ((), {"x": x, "w": w, "b": b}, [3.5, 6.5]),
                                       ((x, w, b), {}, [3.5, 6.5])]:
            for result in repeated(affine, *args, **kwargs):
                assert result.numpy().tolist() == expected


@pytest.mark.parametrize("target", TARGETS)
def test_switching_targets_between_repeated_calls(target):
    add = ug.function(lambda x, y: (x + y, x - y))
    x, y = np.float32(1.25), np.float32(2.0)
    name = Target.parse(target).backend
    for backend, mode in [(name, Target.parse(target).mode), ("numpy", "static"),
                          ("numpy", "eager"), (name, Target.parse(target).mode)]:
        with ug.use_backend(backend, mode):
            for pair in repeated(add, ug.tensor(x), ug.tensor(y)):
                assert type(pair) is tuple and len(pair) == 2
                total, difference = pair
                assert (float(total.numpy()), float(difference.numpy())) == (3.25, -0.75)
                assert total._backend.name == difference._backend.name == backend


@pytest.mark.parametrize("target", TARGETS)
def test_output_structures_and_a_loop_on_repeated_calls(target):
    @ug.function
    def count(a, b):
        a, b = ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
        return {"a": a, "pair": (b, a + b)}

    with on(target):
        for a, b, expected in [(0, 10, (20, 20, 40)), (5, 6, (7, 7, 14)), (0, 10, (20, 20, 40))]:
            for result in repeated(count, np.int64(a), np.int64(b)):
                got = (int(result["a"].numpy()), int(result["pair"][0].numpy()),
                       int(result["pair"][1].numpy()))
                assert got == expected and type(result["pair"]) is tuple


@pytest.mark.parametrize("target", TARGETS)
def test_a_bad_call_after_repeated_calls_raises_what_a_first_call_raises(target):
    def matmul_and_take(x, w, i):
        return ug.take(x @ w, i)

    good = (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.array([1, 0]))
    bad_shape = (np.ones((2, 5), np.float32), *good[1:])
    bad_rank = (np.ones((3,), np.float32), *good[1:])
    bad_dtype = (*good[:2], np.array([1.0, 0.0], np.float32))
    with on(target):
        repeated_fn = ug.function(matmul_and_take)
        for result in repeated(repeated_fn, *good):
            assert result.numpy().tolist() == [[3.0] * 4] * 2
        for bad, expected in [(bad_shape, "a is float32\\[2, 5\\], b is float32\\[3, 4\\]"),
                              (bad_rank, "a is float32\\[3\\], but matmul needs rank >= 2"),
                              (bad_dtype, "indices is float32\\[2\\], but take needs")]:
            with pytest.raises(ShapeError, match=expected) as first:
                ug.function(matmul_and_take)(*bad)  # a first call of those types
            for _ in range(2):
                with pytest.raises(ShapeError) as again:
                    repeated_fn(*bad)
                assert str(again.value) == str(first.value)
            assert repeated_fn(*good).numpy().tolist() == [[3.0] * 4] * 2


@pytest.mark.parametrize("target", TARGETS)
def test_input_spec_mismatch_after_repeated_calls(target):
    @ug.function(input_spec=[ug.Spec((None, 2), "float32")])
    def double(x):
        return x * 2.0

    with on(target):
        for rows in (1, 3, 1):
            for result in repeated(double, np.ones((rows, 2), np.float32)):
                assert result.numpy().tolist() == [[2.0, 2.0]] * rows
        for bad in (np.ones((2, 3), np.float32), np.ones((2, 2), np.float64),
                    np.ones((2,), np.float32)):
            messages = set()
            for _ in range(2):
                with pytest.raises(ShapeError, match="input_spec|Spec") as error:
                    double(bad)
                messages.add(str(error.value))
            assert len(messages) == 1


@pytest.mark.parametrize("target", TARGETS)
def test_parameters_updated_read_and_replaced_between_repeated_calls(target):
    w = ug.Parameter(np.array([1.0, 2.0], np.float32))

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(w * x), wrt=[w])()
        ug.assign(w, w - 0.5 * grads[0])
        return loss

    x = ug.tensor(np.array([1.0, 1.0], np.float32))
    with on(target):
        assert [float(step(x).numpy()) for _ in range(3)] == [3.0, 2.0, 1.0]
        assert w.numpy().tolist() == [-0.5, 0.5]  # the executable's value, read back
        assert float(step(x).numpy()) == 0.0
        w.set_value(np.array([4.0, 4.0], np.float32))  # a new value: loaded before the run
        assert [float(step(x).numpy()) for _ in range(2)] == [8.0, 7.0]
        assert w.numpy().tolist() == [3.0, 3.0]


@pytest.mark.parametrize("target", TARGETS)
def test_random_inputs_are_drawn_on_each_repeated_call(target):
    drop = ug.nn.Dropout(0.5)
    forward = ug.function(lambda x: drop(x))
    x = np.ones((8, 64), np.float32)
    with on(target):
        results = [forward(x).numpy() for _ in range(3)]
    for result in results:
        assert set(np.unique(result)) == {0.0, 2.0}  # inverted dropout: kept values doubled
    assert not np.array_equal(results[1], results[2])  # a new mask each call


@pytest.mark.filterwarnings("ignore:@ug.function")  # RetraceWarning: traced 70 times
@pytest.mark.parametrize("target", TARGETS)
def test_callers_are_made_on_a_second_call_and_dropped_with_their_entry(target):
    from unigraph.function import MAX_CACHED

    double = ug.function(lambda x: x * 2.0)
    with on(target):
        assert float(double(np.array(1.5, np.float32)).numpy()) == 3.0
        if static(target):
            assert double._callers == {next(iter(double._cache)): {}}  # one call: none yet
        for _ in range(2):
            assert float(double(np.array(1.5, np.float32)).numpy()) == 3.0
        if static(target):
            assert [len(c) for c in double._callers.values()] == [1]
        for size in range(1, MAX_CACHED + 6):  # more signatures than the cache keeps
            for _ in range(2):
                result = double(np.full(size, 0.5, np.float32))
                assert result.numpy().tolist() == [1.0] * size
    if static(target):
        assert len(double._cache) == MAX_CACHED
        assert set(double._callers) <= {compiled.key for compiled in double._cache.values()}


@pytest.mark.parametrize("target", TARGETS)
def test_alternating_module_states_reuse_their_callers(target):
    class Scale(ug.nn.Module):
        def forward(self, x):
            return x * (2.0 if self.training else 3.0)

    scale = Scale()
    run = ug.function(lambda x: scale(x))
    x = ug.tensor(np.array([1.0, 2.0], np.float32))
    with on(target):
        for _ in range(3):
            scale.train()
            assert [run(x).numpy().tolist() for _ in range(2)] == [[2.0, 4.0]] * 2
            scale.eval()
            assert [run(x).numpy().tolist() for _ in range(2)] == [[3.0, 6.0]] * 2
        callers = [caller for made in run._callers.values() for caller in made.values()]
        scale.train()
        run(x)
        scale.eval()
        run(x)
        again = [caller for made in run._callers.values() for caller in made.values()]
    if static(target):
        assert len(callers) == 2 and again == callers  # one per state, made once
