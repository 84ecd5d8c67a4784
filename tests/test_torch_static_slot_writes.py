"""torch:static writes an optimizer's slots and Adam's parameter in their own tensors
(`unigraph_torch.fusions`: a slot's `s * c` as `slot_mul`, `p - d` as `sub_update`) while
nothing else holds them, else makes new tensors with the same kernels.

On all 9 targets: Adam and Momentum steps give the same bits whether or not the user holds a
view of a moment or velocity between steps, and the held view keeps its numbers. On
torch:static: the slot and parameter tensors are the ones written (no new tensor a step),
and not while a view of them is held."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data
from optim_steps import least_squares_step

import unigraph as ug
from unigraph.config import Target

OPTIMIZERS = {
    "adam": (lambda params: ug.optim.Adam(params, lr=0.05), "m"),
    "momentum": (lambda params: ug.optim.Momentum(params, lr=0.05, momentum=0.9), "velocity"),
}


def _setup(name):
    x, y, w, b = least_squares_data(seed=11, rows=9)
    params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
    make, slot = OPTIMIZERS[name]
    optimizer = make(params)

    step = least_squares_step(x, y, params, optimizer)

    return params, optimizer, slot, step


def _trained(target, name, hold):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, slot, step = _setup(name)
        step()
        held = ug.reshape(optimizer.state(params[0], slot), [-1]) if hold else None
        before = None if held is None else np.array(held.numpy())
        for _ in range(3):
            step()
        if held is not None:  # the view keeps its numbers
            np.testing.assert_array_equal(np.asarray(held.numpy()), before)
        state = {key: np.array(value) for key, value in optimizer.state_dict().items()
                 if isinstance(value, np.ndarray)}
        return [np.array(p.numpy()) for p in params], state


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("target", TARGETS)
def test_held_slots_keep_their_numbers_and_the_bits(target, name):
    free_params, free_state = _trained(target, name, hold=False)
    held_params, held_state = _trained(target, name, hold=True)
    for free, held in zip(free_params, held_params):
        np.testing.assert_array_equal(free.view(np.uint32), held.view(np.uint32))
    assert free_state.keys() == held_state.keys() and free_state
    for key, free in free_state.items():
        np.testing.assert_array_equal(free, held_state[key])


def _executable(step):
    return next(iter(step._cache.values())).executable


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_torch_static_writes_the_slots_and_parameters_in_place(name):
    with ug.use_backend("torch", "static"):
        params, optimizer, slot, step = _setup(name)
        step()
        executable = _executable(step)
        run_source = executable.source.split("\n\n\n")[0]
        assert "op_slot_mul(" in run_source
        assert ("op_sub_update(" in run_source) == (name == "adam")
        # the slot's and the weight's tensors, found by their numbers
        index, weight = (
            next(i for i, tensor in enumerate(executable.params)
                 if np.array_equal(tensor.numpy(), np.asarray(value.numpy())))
            for value in (optimizer.state(params[0], slot), params[0]))
        stored = weakref.ref(executable.params[index])
        stored_weight = weakref.ref(executable.params[weight])
        step()
        assert executable.params[index] is stored()  # the slot written in place
        if name == "adam":
            assert executable.params[weight] is stored_weight()
        view = stored().t()  # someone else holds its memory: a new tensor, the view unchanged
        kept = view.clone()
        step()
        assert executable.params[index] is not stored()
        np.testing.assert_array_equal(view.numpy(), kept.numpy())
