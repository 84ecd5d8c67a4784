"""A repeated static training step: numpy:static's executable runs it from the plan's second
run as one generated function (`executable._whole_run`: the plan's function, each
parameter's new value stored frozen, an output that may share a feed's memory copied),
which a @ug.function's caller calls itself (`direct_run`), testing inline which parameters
need loading and noting the updates without a loop. Every case runs on all 9 targets,
several calls in a row (the first, the one that makes the caller, the caller's own), and
checks the numbers against hand-written NumPy, the parameters between calls (a value set
from outside is loaded again), a bad label's error on every call, and outputs that never
share memory with a fed array."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
import unigraph.nn.functional as F
from unigraph.config import Target

STEPS = 5  # the first call, the second (makes the caller), the caller's own calls


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def _data():
    rng = np.random.default_rng(19)
    x = (rng.standard_normal((6, 5)) * 0.5).astype(np.float32)
    y = rng.integers(0, 3, 6).astype(np.int64)
    w = (rng.standard_normal((5, 3)) * 0.3).astype(np.float32)
    return x, y, w, np.zeros(3, np.float32)


def _hand_step(x, y, w, b, lr):
    """One SGD step of mean softmax cross-entropy, in float64: (loss, new w, new b)."""
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    logits = x @ w + b
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = np.mean(np.log(total[:, 0]) - shifted[rows, y])
    d = exp / total
    d[rows, y] -= 1
    d /= len(y)
    return loss, w - lr * (x.T @ d), b - lr * d.sum(axis=0)


def _step(model, lr):
    optimizer = ug.optim.SGD(model.parameters(), lr=lr)

    @ug.function
    def train_step(x, y):
        loss, grads = ug.value_and_grad(lambda: F.cross_entropy(model(x), y),
                                        wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    return train_step


@pytest.mark.parametrize("target", TARGETS)
def test_training_steps_follow_hand_written_numpy(target):
    x, y, w, b = _data()
    with on(target):
        model = ug.nn.Linear(5, 3)
        model.load_state_dict({"weight": w, "bias": b})
        step = _step(model, 0.5)
        tx, ty = ug.tensor(x), ug.tensor(y)
        for i in range(2 * STEPS):
            if i == STEPS:  # a value set from outside: the next call loads it
                w = w * np.float32(0.5)
                model.weight.set_value(w)
            loss, w, b = _hand_step(x, y, w, b, 0.5)
            result = step(tx, ty)
            assert result.shape == () and result.dtype == "float32"
            np.testing.assert_allclose(result.numpy(), loss, rtol=1e-5)
            np.testing.assert_allclose(model.weight.numpy(), w, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(model.bias.numpy(), b, rtol=1e-5, atol=1e-7)
            w, b = model.weight.numpy().copy(), model.bias.numpy().copy()


@pytest.mark.parametrize("target", TARGETS)
def test_a_bad_label_raises_on_every_call_and_updates_nothing(target):
    x, y, w, b = _data()
    with on(target):
        model = ug.nn.Linear(5, 3)
        model.load_state_dict({"weight": w, "bias": b})
        step = _step(model, 0.5)
        tx = ug.tensor(x)
        for _ in range(STEPS):
            step(tx, ug.tensor(y))
        before = model.weight.numpy().copy(), model.bias.numpy().copy()
        bad = y.copy()
        bad[2] = 7
        for _ in range(STEPS):
            with pytest.raises(ug.IndexOutOfRangeError, match="7"):
                step(tx, ug.tensor(bad))
        np.testing.assert_array_equal(model.weight.numpy(), before[0])
        np.testing.assert_array_equal(model.bias.numpy(), before[1])
        step(tx, ug.tensor(y))  # and the good labels run again
        assert not np.array_equal(model.weight.numpy(), before[0])


@pytest.mark.parametrize("target", TARGETS)
def test_an_output_that_is_a_fed_array_is_a_copy(target):
    x, y, w, b = _data()
    with on(target):
        model = ug.nn.Linear(5, 3)
        model.load_state_dict({"weight": w, "bias": b})
        optimizer = ug.optim.SGD(model.parameters(), lr=0.1)

        @ug.function
        def step(x, y):
            loss, grads = ug.value_and_grad(lambda: F.cross_entropy(model(x), y),
                                            wrt=optimizer.params)()
            optimizer.apply(grads)
            return x, loss

        for _ in range(STEPS):
            fed = x.copy()
            out, loss = step(fed, y)
            fed[...] = 9.0  # the caller writes its array after the call
            np.testing.assert_array_equal(out.numpy(), x)
            assert np.isfinite(loss.numpy())
        # the parameters the steps stored cannot be written through what the model gives
        with pytest.raises(ValueError):
            model.weight.numpy()[0, 0] = 1.0
