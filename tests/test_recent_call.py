"""A static @ug.function call repeating the latest call's target and argument types runs the
caller that call used (`Function._recent`) without building its key; every change (a shape,
a dtype, an array for a tensor, another target, a new trace) must still reach the caller or
trace of its own types. Each case runs on all 9 targets (eager ones take the eager path: the
same results) and checks values computed by hand."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def values(result):
    return result.numpy().tolist()


@pytest.mark.parametrize("target", TARGETS)
def test_each_changed_argument_type_gets_its_own_graph(target):
    double = ug.function(lambda x: x * 2)
    f32 = np.array([1.5, -2.0], np.float32)
    with on(target):
        calls = [
            (ug.tensor(f32), [3.0, -4.0], "float32"),
            (ug.tensor(f32), [3.0, -4.0], "float32"),
            (ug.tensor(f32[:1]), [3.0], "float32"),  # a new shape
            (ug.tensor(f32.astype(np.float64)), [3.0, -4.0], "float64"),  # a new dtype
            (ug.tensor(np.array([7, 1], np.int64)), [14, 2], "int64"),
            (f32[:1], [3.0], "float32"),  # an array, not a tensor
            (ug.tensor(f32[:1]), [3.0], "float32"),
            (ug.tensor(f32), [3.0, -4.0], "float32"),
        ]
        for x, expected, dtype in calls:
            for _ in range(2):  # the second call of a type: through `_recent`
                result = double(x)
                assert values(result) == expected
                assert result.dtype == dtype and result.shape == (len(expected),)
        for _ in range(2):  # a Python number after tensors: made a float32 tensor
            result = double(1.5)
            assert (values(result), result.dtype, result.shape) == (3.0, "float32", ())
        if Target.parse(target).mode != "eager":
            assert sum(double._traces.values()) == 5  # float32 [2], [1], []; float64; int64


@pytest.mark.parametrize("target", TARGETS)
def test_a_call_on_another_target_is_that_targets(target):
    add = ug.function(lambda x, y: x + y)
    x, y = np.float32(1.25), np.float32(2.0)
    with on(target):
        first = [add(ug.tensor(x), ug.tensor(y)) for _ in range(2)]
    with ug.use_backend("numpy", "eager"):
        other = [add(ug.tensor(x), ug.tensor(y)) for _ in range(2)]
    with on(target):
        again = [add(ug.tensor(x), ug.tensor(y)) for _ in range(2)]
    for result in first + again:
        assert float(result.numpy()) == 3.25
        assert result._backend.name == Target.parse(target).backend
    for result in other:
        assert float(result.numpy()) == 3.25 and result._backend.name == "numpy"


@pytest.mark.parametrize("target", TARGETS)
def test_python_state_read_by_the_trace_is_checked_every_call(target):
    @ug.function
    def count_to(n):
        return ug.while_loop(lambda i: i < n, lambda i: i + 1, ug.zeros((), "int64"))

    with on(target):
        n = ug.tensor(np.int64(50))
        assert int(count_to(n).numpy()) == 50
        assert int(count_to(n).numpy()) == 50
        with ug.control_flow.loop_limit(10):  # the limit changed: not the last call's graph
            with pytest.raises(ControlFlowError, match="ran more than 10 iterations"):
                count_to(n)
            with pytest.raises(ControlFlowError, match="ran more than 10 iterations"):
                count_to(n)
        assert int(count_to(n).numpy()) == 50


@pytest.mark.parametrize("target", TARGETS)
def test_a_module_switched_to_eval_is_traced_again(target):
    class Scale(ug.nn.Module):
        def forward(self, x):
            return x * (2.0 if self.training else 3.0)

    scale = Scale()
    run = ug.function(lambda x: scale(x))
    x = np.array([1.0, 2.0], np.float32)
    with on(target):
        assert [values(run(x)) for _ in range(2)] == [[2.0, 4.0]] * 2
        scale.eval()
        assert [values(run(x)) for _ in range(2)] == [[3.0, 6.0]] * 2
        scale.train()
        assert [values(run(x)) for _ in range(2)] == [[2.0, 4.0]] * 2


@pytest.mark.parametrize("target", TARGETS)
def test_arguments_are_tensors_inside_whatever_the_call_before(target):
    @ug.function
    def tensor_or_zero(x):
        return x * (1.0 if isinstance(x, ug.Tensor) else 0.0)

    x = np.array([1.5, 2.0], np.float32)
    with on(target):
        for argument in [ug.tensor(x), ug.tensor(x), x, x, ug.tensor(x), 1.5, 1.5]:
            assert values(tensor_or_zero(argument)) == values(ug.tensor(argument))
