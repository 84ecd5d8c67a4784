"""The tensor contract, the same on all 9 targets (issue 11, items 3, 4, 5 and input errors):

* a NumPy operand on either side of an operator gives a unigraph tensor (forward and grad);
* memory: `ug.tensor(array)` copies, `.numpy()` is read-only, on every backend;
* randomness is per context: two threads give what one after the other gives;
* input conversion errors name the value and the fix.

Expected values are computed by hand or in float64 NumPy, never by the code under test.
"""

from __future__ import annotations

import operator
import threading

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

W = np.array([[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]], dtype=np.float32)
POSITIVE = np.abs(W) + 0.25  # a base for `**`
X = np.array([[0.5, 1.0, -2.0], [4.0, -0.5, 2.0]], dtype=np.float32)


def _on(target: str):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


# -- 3. NumPy operands on the left -----------------------------------------------------------
LEFT_OPERATORS = [
    ("mul", operator.mul), ("add", operator.add), ("sub", operator.sub),
    ("truediv", operator.truediv), ("pow", operator.pow), ("lt", operator.lt),
    ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge), ("eq", operator.eq),
    ("ne", operator.ne),
]


@pytest.mark.parametrize("target", TARGETS)
def test_numpy_array_on_the_left_is_a_unigraph_op(target):
    kinds = {}

    @ug.function
    def f(x):
        outs = []
        for name, op in LEFT_OPERATORS:
            out = op(POSITIVE, x)
            kinds[name] = type(out)
            outs.append(out)
        square = np.ones((3, 2), np.float32) @ x  # [3, 2] @ [2, 3]
        kinds["matmul"] = type(square)
        scalar = np.float32(2.0) * x
        kinds["np.float32"] = type(scalar)
        return outs, square, scalar

    with _on(target):
        outs, square, scalar = f(np.abs(X) + 0.5)
    assert all(kind is ug.Tensor for kind in kinds.values()), kinds
    x64 = np.abs(X).astype(np.float64) + 0.5
    for (name, op), got in zip(LEFT_OPERATORS, outs):
        want = op(POSITIVE.astype(np.float64), x64)
        assert got.dtype == ("bool" if want.dtype == bool else "float32"), name
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, err_msg=name)
    np.testing.assert_allclose(square.numpy(), np.ones((3, 2)) @ x64, rtol=1e-6)
    np.testing.assert_allclose(scalar.numpy(), 2.0 * x64, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_flows_through_numpy_operands_on_either_side(target):
    b = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    column = np.array([[2.0], [-3.0], [1.0]], dtype=np.float32)

    @ug.function
    def loss(x):
        # d/dx: W + W + 2 (from np.float32) + column summed over... see `want` below
        y = W * x + x * W + b + np.float32(2.0) * x - (b - x)
        return ug.sum(y) + ug.sum(x @ column)

    with _on(target):
        got = ug.grad(loss)(X)
    # d/dx of sum(2 W x + 2 x + x) + sum(x @ column): 2 W + 3 + column broadcast per row.
    want = 2.0 * W.astype(np.float64) + 3.0 + column.reshape(1, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_other_numpy_functions_on_a_tensor_say_what_to_use(target):
    with _on(target):
        t = ug.tensor([1.0, 2.0])
        with pytest.raises(TypeError, match=r"np\.sin\(\) on a unigraph Tensor at .*"
                                            r"test_tensor_contract\.py:\d+.*ug function"):
            np.sin(t)
        with pytest.raises(TypeError, match=r"np\.add\.reduce"):
            np.add.reduce(t)
        np.testing.assert_allclose(np.exp(t).numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


# -- 4. memory contract ----------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_tensor_copies_the_callers_array(target):
    @ug.function
    def double(x):
        return x * 2.0

    with _on(target):
        array = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        t = ug.tensor(array)
        view = ug.reshape(array, (3, 1))  # a view on numpy and torch without the copy
        array[:] = 100.0  # the caller reuses its buffer
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(view.numpy(), [[1.0], [2.0], [3.0]])
        np.testing.assert_array_equal(double(t).numpy(), [2.0, 4.0, 6.0])
        param = ug.Parameter(array)
        array[:] = -1.0
        np.testing.assert_array_equal(param.numpy(), [100.0, 100.0, 100.0])


@pytest.mark.parametrize("target", TARGETS)
def test_numpy_result_is_read_only_and_copies_are_writable(target):
    @ug.function
    def f(x):
        return x + 1.0

    with _on(target):
        out = f(np.array([1.0, 2.0], dtype=np.float32))
        eager = ug.tensor([5.0, 6.0]) * 1.0
    for tensor, values in ((out, [2.0, 3.0]), (eager, [5.0, 6.0])):
        array = tensor.numpy()
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 42.0
        copy = np.array(tensor)
        copy[0] = 42.0
        writable = tensor.numpy().copy()
        writable[1] = 42.0
        np.testing.assert_array_equal(tensor.numpy(), values)


@pytest.mark.parametrize("target", TARGETS)
def test_parameters_and_state_dict_never_alias(target):
    ug.manual_seed(0)
    net = ug.nn.Linear(3, 2)
    start = net.weight.numpy().copy()
    optimizer = ug.optim.SGD(net, lr=0.5)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(net(x)), wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    with _on(target):
        step(X)  # the newest weights now live in the target's store
    weight = net.weight.numpy()
    with pytest.raises(ValueError, match="read-only"):
        weight[0, 0] = 7.0
    state = net.state_dict()
    state["weight"][...] = 7.0
    # sum over a batch of 2 rows: d/dW = column sums of X, for each of the 2 outputs
    want = start - 0.5 * X.astype(np.float64).sum(axis=0)[:, None]
    np.testing.assert_allclose(net.weight.numpy(), want, rtol=1e-6)


# -- 5. randomness per context ---------------------------------------------------------------
def _train_with_dropout(target: str, steps: int, barrier=None) -> list:
    """Seed, build a Dropout MLP, train `steps` SGD steps on `target`; the weights after.
    `barrier` (shared with another thread) makes the two threads' draws interleave."""

    def wait():
        if barrier is not None:
            barrier.wait(timeout=120)

    ug.manual_seed(5)
    wait()
    with _on(target):
        net = ug.nn.Sequential(ug.nn.Linear(3, 8, act="relu"), ug.nn.Dropout(0.5),
                               ug.nn.Linear(8, 2))
        trainer = ug.Trainer(net, ug.nn.functional.cross_entropy, ug.optim.SGD(net, lr=0.1))
        labels = np.array([0, 1], dtype=np.int64)
        for _ in range(steps):
            wait()
            trainer.step(X, labels)
    return [p.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("target", TARGETS)
def test_dropout_training_in_two_threads_equals_one_after_the_other(target):
    other = "numpy:eager"  # a second target in the other thread (backends are not shared)
    sequential = {t: _train_with_dropout(t, 3) for t in (target, other)}
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def run(t, key):
        try:
            results[key] = _train_with_dropout(t, 3, barrier)
        except BaseException as error:  # noqa: BLE001 (re-raised in the main thread)
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(t, i)) for i, t in enumerate((target, other))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    for key, t in enumerate((target, other)):
        for got, want in zip(results[key], sequential[t]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=t)
    # Sanity: dropout did draw (weights differ from a run with another seed).
    assert not np.allclose(sequential[target][0], sequential[other][0] + 1.0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_new_thread_starts_from_the_process_seed(target):
    ug.manual_seed(11)
    ug.random.generator().random(4)  # the main context has moved on; a new thread has not
    seen = {}

    def worker():
        with _on(target):
            seen["draw"] = ug.random.uniform((3,)).numpy().copy()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    want = np.random.default_rng(11).random(3).astype(np.float32)
    np.testing.assert_array_equal(seen["draw"], want)
    # The thread's draws did not advance this context's generator.
    main = np.random.default_rng(11)
    main.random(4)
    np.testing.assert_array_equal(ug.random.generator().random(2), main.random(2))


@pytest.mark.parametrize("target", TARGETS)
def test_seeded_block_restores_the_callers_stream(target):
    ug.manual_seed(2)
    with _on(target):
        with ug.random.seeded(9):
            inside = ug.random.uniform((2,)).numpy().copy()
        after = ug.random.uniform((2,)).numpy().copy()
    np.testing.assert_array_equal(inside, np.random.default_rng(9).random(2).astype(np.float32))
    np.testing.assert_array_equal(after, np.random.default_rng(2).random(2).astype(np.float32))


def test_manual_seed_checks_its_argument():
    with pytest.raises(TypeError, match="seed must be an int, got '3'"):
        ug.manual_seed("3")
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        ug.manual_seed(-1)


# -- input conversion errors ----------------------------------------------------------------
BAD_INPUTS = [
    (lambda: ug.tensor(["a"]), TypeError, r"'a' at index \[0\] is text.*float\(s\)"),
    (lambda: ug.tensor([[1.0, 2.0], [3.0]]), ValueError,
     r"ragged \(row \[1\] has 1 item, row \[0\] has 2 items\).*pad"),
    (lambda: ug.tensor(2**70), OverflowError,
     r"integer 1180591620717411303424 does not fit in int64.*float"),
    (lambda: ug.tensor([1, 2**63]), OverflowError, r"9223372036854775808 at index \[1\]"),
    (lambda: ug.tensor([1.0, None]), TypeError, r"None at index \[1\].*float\('nan'\)"),
    (lambda: ug.tensor(np.array([1, 2], dtype=np.uint16)), TypeError,
     r"uint16 data is not supported.*astype\('int32'\)"),
    (lambda: ug.tensor([1.0], dtype="flaot32"), TypeError,
     r"dtype 'flaot32' does not exist; did you mean 'float32'"),
    (lambda: ug.cast(ug.tensor([1.0]), "complex64"), TypeError, r"'complex64'.*not supported"),
    (lambda: ug.tensor([1.0, 2.0]).item(), ValueError,
     r"`\.item\(\)` at .*test_tensor_contract\.py:\d+ on a tensor of shape \[2\].*ug\.sum"),
    (lambda: float(ug.tensor([1.0, 2.0])), TypeError, r"`float\(\)` .*shape \[2\]"),
    (lambda: ug.tensor([1.0]) + "a", TypeError, r"'a' \(a str\) at .*test_tensor_contract"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(BAD_INPUTS)))
def test_input_conversion_errors_name_the_value_and_the_fix(target, case):
    make, error, message = BAD_INPUTS[case]
    with _on(target), pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("target", TARGETS)
def test_item_and_float_of_one_element_tensors(target):
    @ug.function
    def f(x):
        return ug.sum(x), x[:1]

    with _on(target):
        total, first = f(np.array([1.5, 2.0], dtype=np.float32))
    assert total.item() == 3.5 and float(first) == 1.5 and int(first) == 1


@pytest.mark.parametrize("target", TARGETS)
def test_seeding_inside_a_function_is_refused_in_every_mode(target):
    # A compiled graph draws when it runs, after tracing: a seed set while tracing would
    # reach none of its draws, so tracing refuses it, and an eager call refuses it too (one
    # program, one meaning).
    @ug.function
    def f(x):
        with ug.random.seeded(1):
            return x * ug.random.uniform((2,))

    ones = np.ones(2, np.float32)
    with _on(target):
        with pytest.raises(ug.TracingError, match=r"ug\.random\.seeded at .*"
                                                  r"test_tensor_contract\.py:\d+"):
            f(ones)
