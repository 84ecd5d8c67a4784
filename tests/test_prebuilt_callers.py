"""A static @ug.function call whose positional tensors or arrays have a signature seen before
runs through a prebuilt caller (`function._caller`, kept in `Function._fast`, which feeds
through `Executable.run_known`, skipping the input checks the key makes redundant). Every
case runs on all 9 targets (eager ones take the eager path: the same results) and checks the
caller's result against hand-computed values on its second and third calls, where a
divergence from the general path would show."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError, IndexOutOfRangeError


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def calls(fn, *argument_lists):
    return [fn(*args) for args in argument_lists]


@pytest.mark.parametrize("target", TARGETS)
def test_one_trace_one_caller_and_each_output_shape(target):
    @ug.function
    def shapes(x, y):
        return {"sum": x + y, "pair": (x * y, x - y)}

    a, b = np.float32(3.0), np.float32(0.5)
    with on(target):
        results = calls(shapes, *[(ug.tensor(a), ug.tensor(b))] * 3)
        if Target.parse(target).mode != "eager":
            assert sum(shapes._traces.values()) == 1
            assert len(shapes._fast) == 1
    for result in results:
        assert float(result["sum"].numpy()) == 3.5
        assert [float(t.numpy()) for t in result["pair"]] == [1.5, 2.5]


@pytest.mark.parametrize("target", TARGETS)
def test_output_never_aliases_a_fed_array(target):
    identity = ug.function(lambda x: x)
    x = np.array([1.0, 2.0], np.float32)
    with on(target):
        results = calls(identity, (x,), (x,), (x,))
        x[0] = 99.0  # the caller's later write must not reach an earlier output
        for result in results:
            np.testing.assert_array_equal(result.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("target", TARGETS)
def test_byte_swapped_and_foreign_arguments_are_converted(target):
    double = ug.function(lambda x: x * 2.0)
    swapped = np.array([1.5, -2.0], ">f4")
    with ug.use_backend("numpy", "eager"):
        foreign = ug.tensor([0.25, 4.0])  # a tensor of another backend (but on numpy targets)
    with on(target):
        for result in calls(double, (swapped,), (swapped,), (swapped,)):
            np.testing.assert_array_equal(result.numpy(), [3.0, -4.0])
        for result in calls(double, (foreign,), (foreign,), (foreign,)):
            np.testing.assert_array_equal(result.numpy(), [0.5, 8.0])


@pytest.mark.parametrize("target", TARGETS)
def test_train_and_eval_graphs_follow_the_module_state(target):
    drop = ug.nn.Dropout(0.5)
    forward = ug.function(lambda x: drop(x))
    x = np.ones((4, 64), np.float32)
    with on(target):
        drop.eval()
        kept = calls(forward, (x,), (x,))
        drop.train()
        trained = forward(x).numpy()
        drop.eval()
        again = forward(x).numpy()
    for result in kept:
        np.testing.assert_array_equal(result.numpy(), x)
    assert set(np.unique(trained)) <= {0.0, 2.0} and 0.0 in trained  # inverted dropout
    np.testing.assert_array_equal(again, x)


@pytest.mark.parametrize("target", TARGETS)
def test_errors_from_a_prebuilt_call_are_the_general_paths(target):
    take = ug.function(lambda x, i: ug.take(x, i))

    @ug.function
    def count_to(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 1, b), (a, b))[0]

    x = np.array([1.0, 2.0, 4.0], np.float32)
    with on(target), ug.loop_limit(50):
        np.testing.assert_array_equal(take(x, np.array([2, 0])).numpy(), [4.0, 1.0])
        np.testing.assert_array_equal(take(x, np.array([1, 1])).numpy(), [2.0, 2.0])
        with pytest.raises(IndexOutOfRangeError, match="index 5 is out of range for size 3"):
            take(x, np.array([0, 5]))
        assert int(count_to(np.int64(0), np.int64(10)).numpy()) == 10
        assert int(count_to(np.int64(0), np.int64(20)).numpy()) == 20
        with pytest.raises(ControlFlowError, match="test_prebuilt_callers.py"):
            count_to(np.int64(0), np.int64(1000))
