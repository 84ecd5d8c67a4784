"""Eager optimizer state updated in place (`Optimizer.write`): Momentum's velocity and
Adam's moments, like the parameters, are written into their own tensors from the second step
on where the backend has the in-place lowerings (`mul_`, `add_`). Checked on all 9 targets:
the numbers against float64 by hand and bit for bit against the allocating path, which
lowerings ran, the slot's tensor kept across steps, and a slot value the user took out
(`state_dict()`, `.numpy()`) keeping its numbers."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data, trained_by_formula
from optim_steps import least_squares_step

import unigraph as ug
from unigraph.config import Target

# The eager targets whose Momentum/Adam slots are written in place.
SLOTS_IN_PLACE = {"numpy:eager", "torch:eager", "paddle:eager"}
IN_PLACE_LOWERINGS = ("sub_", "add_", "mul_", "div_", "sqrt_")
LR, MU, STEPS = 0.1, 0.9, 5


class Counter:
    """Wraps the current backend's in-place lowerings: counts, per name, the calls that
    wrote their first input (returned that very tensor) and those that made a new one.
    `allocating=True` removes them instead, so every update takes the allocating path."""

    def __init__(self, monkeypatch, allocating=False):
        from unigraph.dispatch import current_backend

        backend = current_backend()
        backend.load()
        self.counts = {}
        table = backend.lowerings
        for name in IN_PLACE_LOWERINGS:
            if table is None or name not in table:
                continue
            if allocating:
                monkeypatch.delitem(table, name)
                continue
            monkeypatch.setitem(table, name, self._counted(name, table[name]))

    def _counted(self, name, original):
        def counted(x, *rest):
            out = original(x, *rest)
            done, new = self.counts.get(name, (0, 0))
            self.counts[name] = (done + 1, new) if out is x else (done, new + 1)
            return out

        return counted


def _data():
    return least_squares_data(seed=11, rows=6)


def _reference(name, steps):
    """(params, slots) after `steps`, float64, by the documented formulas."""
    return trained_by_formula(name, _data(), steps, LR, MU)


MAKERS = {
    "sgd": lambda p: ug.optim.SGD(p, lr=LR),
    "momentum": lambda p: ug.optim.Momentum(p, lr=LR, momentum=MU),
    "momentum_nesterov": lambda p: ug.optim.Momentum(p, lr=LR, momentum=MU, nesterov=True),
    "adam": lambda p: ug.optim.Adam(p, lr=LR),
}
SLOTS = {"sgd": (), "momentum": ("velocity",), "momentum_nesterov": ("velocity",),
         "adam": ("m", "v")}


def _setup(name):
    x, y, w, b = _data()
    params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
    optimizer = MAKERS[name](params)

    step = least_squares_step(x, y, params, optimizer)

    return params, optimizer, step


def _train(target, name, monkeypatch, allocating):
    """(parameters, {slot key: value}, lowering counts) after STEPS steps."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup(name)
        counter = Counter(monkeypatch, allocating)
        for _ in range(STEPS):
            step()
        values = [p.numpy().copy() for p in params]
        state = optimizer.state_dict()
    monkeypatch.undo()
    return values, state, counter.counts


def _expected_counts(target, name) -> dict:
    """{lowering: (writes, new tensors)} over STEPS steps: a parameter's sub_ from the second
    step on; a slot's mul_ from the second step on, and its add_ from the first (it writes
    the tensor the first step's allocating mul has just made); Adam's temporaries from the
    first; nothing where the target does not write in place."""
    later, every = 2 * (STEPS - 1), 2 * STEPS  # two parameters: steps after the first, all
    expected = {}
    if target in SLOTS_IN_PLACE and SLOTS[name]:
        expected["mul_"] = (later * len(SLOTS[name]), 0)
        expected["add_"] = (every * len(SLOTS[name]), 0)
    if target in SLOTS_IN_PLACE and name == "adam":
        # Its temporaries, every step: (g * g) * (1 - b2), m_hat * lr, sqrt(v_hat) + eps,
        # and the division by that.
        expected["mul_"] = (expected["mul_"][0] + 2 * every, 0)
        expected["add_"] = (expected["add_"][0] + every, 0)
        expected["div_"] = expected["sqrt_"] = (every, 0)
    if target in SLOTS_IN_PLACE | {"numpy:eager"}:
        expected["sub_"] = (later, 0)
    return expected


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("target", TARGETS)
def test_updates_match_float64_and_the_allocating_path(target, name, monkeypatch):
    """Five steps: parameters and slots within float32 rounding of the float64 formulas,
    bit for bit the numbers of the allocating path; the in-place lowerings ran where
    promised (`_expected_counts`) and never wrote a tensor on the other targets."""
    values, state, counts = _train(target, name, monkeypatch, allocating=False)
    same_values, same_state, _ = _train(target, name, monkeypatch, allocating=True)
    want_params, want_slots = _reference(name, STEPS)
    for got, same, want in zip(values, same_values, want_params):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    for key, value in state.items():
        np.testing.assert_array_equal(value, same_state[key], err_msg=key)
    for prefix, slots in zip(("w", "b"), want_slots):
        for slot in SLOTS[name]:
            np.testing.assert_allclose(state[f"{prefix}.{slot}"], slots[slot], rtol=2e-5,
                                       atol=1e-7, err_msg=f"{prefix}.{slot}")
    assert {k: v for k, v in counts.items() if v[0]} == _expected_counts(target, name)


def _address(native) -> int:
    """Where a native tensor's data lies (a NumPy array's or a torch/Paddle tensor's)."""
    if isinstance(native, np.ndarray):
        return native.__array_interface__["data"][0]
    return native.data_ptr()


@pytest.mark.parametrize("name", ["momentum", "adam"])
@pytest.mark.parametrize("target", TARGETS)
def test_slots_keep_their_storage_and_what_the_user_took_keeps_its_numbers(target, name):
    """Eager targets that write slots in place keep each slot's tensor and memory from the
    second step on. On every target a slot value the user took (`state_dict()`'s copies,
    a `.numpy()` view, which may share the slot's memory) keeps its numbers through the
    next steps (the first allocates, the later ones write the new tensor in place), and
    the slot goes on following the formula."""
    t = Target.parse(target)
    slot = SLOTS[name][0]
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup(name)
        step()
        step()
        holder = optimizer.state(params[0], slot)
        if target in SLOTS_IN_PLACE:
            # A weak reference: holding the tensor itself would stop in-place writes.
            tensor = weakref.ref(holder._natives[t.backend][1])
            address = _address(tensor())
        for _ in range(2):
            step()
            if target in SLOTS_IN_PLACE:
                assert holder._natives[t.backend][1] is tensor()
                assert _address(tensor()) == address
        taken = optimizer.state_dict()
        view = holder.numpy()  # read-only, may share the slot's memory
        numbers = view.copy()
        for _ in range(3):
            step()
        np.testing.assert_array_equal(view, numbers)
        np.testing.assert_array_equal(taken[f"w.{slot}"], numbers)
        final = optimizer.state_dict()
    np.testing.assert_allclose(numbers, _reference(name, 4)[1][0][slot], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(final[f"w.{slot}"], _reference(name, 7)[1][0][slot], rtol=2e-5,
                               atol=1e-7)


@pytest.mark.parametrize("target", TARGETS)
def test_a_slot_assigned_to_another_parameter_keeps_its_numbers(target):
    """`ug.assign(copy, slot)` shares the slot's tensor eagerly: the next update of the slot
    makes a new tensor, so the copy keeps the value it was given."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup("momentum")
        step()
        step()
        velocity = optimizer.state(params[0], "velocity")
        copy = ug.Parameter(np.zeros((3, 2), np.float32), name="copy")
        ug.function(lambda: ug.assign(copy, velocity))()
        step()
        step()
        held = copy.numpy().copy()
    np.testing.assert_allclose(held, _reference("momentum", 2)[1][0]["velocity"], rtol=2e-5,
                               atol=1e-7)


@pytest.mark.parametrize("target", TARGETS)
def test_registering_a_plugin_keeps_the_slots_in_place(target, monkeypatch):
    """Registering a plugin rebuilds every backend object. A Python number's cached operand
    (Momentum's 0.9) made before must not stand for the new backend, or its velocity would
    silently stop being written in place (the suite caught it: a plugin test ran first)."""
    before = _train(target, "momentum", monkeypatch, allocating=False)

    class Plugin:
        pass

    ug.plugins.register_plugin(Plugin(), name="a plugin with no hooks")
    try:
        after = _train(target, "momentum", monkeypatch, allocating=False)
    finally:
        ug.plugins.unregister_plugin(ug.plugins.plugin_manager().get_plugin(
            "a plugin with no hooks"))
    want_params, _ = _reference("momentum", STEPS)
    for got, same, want in zip(after[0], before[0], want_params):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    written = {k: v for k, v in after[2].items() if v[0]}
    assert written == _expected_counts(target, "momentum")
