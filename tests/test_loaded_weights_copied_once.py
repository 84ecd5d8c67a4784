"""A loaded weight is copied once: `load_state_dict` copies the caller's array, and on
numpy:eager the first forward takes that private copy as the weight's native array
(`Backend.adopt_native`) instead of copying it again. Checked on all 9 targets: the caller's
arrays are never aliased, training from there gives the same bits whether or not the user
read the weights first (a read shares the copy, which is then copied as before), and a
value the user read keeps its numbers through the steps."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


def _state():
    rng = np.random.default_rng(11)
    return {"0.weight": rng.standard_normal((3, 4)).astype(np.float32),
            "0.bias": rng.standard_normal(4).astype(np.float32),
            "1.weight": rng.standard_normal((4, 2)).astype(np.float32),
            "1.bias": rng.standard_normal(2).astype(np.float32)}


def _address(array) -> int:
    return array.__array_interface__["data"][0]


def _train(target, read_first):
    """Load, run the forward once, then two SGD steps: (parameters' values after each
    step, the values read after the forward, the caller's state, whether each parameter's
    native is the array `load_state_dict` made)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    state = _state()
    given = {key: array.copy() for key, array in state.items()}
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = ug.nn.Sequential(ug.nn.Linear(3, 4, act="relu"), ug.nn.Linear(4, 2))
        model.load_state_dict(state)
        params = model.parameters()
        loaded = [_address(param._array) for param in params]
        read = [param.numpy() for param in params] if read_first else None
        ug.function(model)(x)
        backend = ug.dispatch.current_backend()
        entries = [param._natives.get(backend.name) for param in params]
        same = [entry is not None and _address(np.asarray(entry[1])) == address
                for entry, address in zip(entries, loaded)]
        del entries
        held = [param.numpy() for param in params]
        before = [np.array(value) for value in held]
        optimizer = ug.optim.SGD(params, lr=0.1)

        @ug.function
        def step(x, y):
            def loss_fn():
                r = model(x) - y
                return ug.mean(r * r)

            loss, grads = ug.value_and_grad(loss_fn, wrt=optimizer.params)()
            optimizer.step(grads)
            return loss

        steps = []
        for _ in range(2):
            step(x, y)
            steps.append([np.array(param.numpy()) for param in params])
        for value, copy in zip(held, before):
            np.testing.assert_array_equal(value, copy)  # a value read keeps its numbers
        del read
    for key, array in state.items():
        np.testing.assert_array_equal(array, given[key])  # the caller's arrays: unchanged
        assert not any(np.shares_memory(array, value) for value in steps[-1])
    return steps, before, same


@pytest.mark.parametrize("target", TARGETS)
def test_a_loaded_weight_is_copied_once_and_trains_to_the_same_bits(target):
    steps, before, same = _train(target, read_first=False)
    steps_read, before_read, same_read = _train(target, read_first=True)
    for got, want in zip(before, before_read):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(steps, steps_read):
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    if target == "numpy:eager":  # the backend whose natives are NumPy arrays: no 2nd copy
        assert all(same)
        assert not any(same_read)  # a weight the user read is copied, as before
