"""Eager optimizer updates in place (`Optimizer.subtract` through a backend's `sub_`
lowering): taken where promised, the same numbers as the allocating path and as float64,
and never under a value the user still holds (a `.numpy()` read, `ug.assign(other, param)`,
a reshape, slice or transpose of the parameter, a value returned by `ug.value_and_grad`)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data, trained_by_formula
from optim_steps import least_squares_step

import unigraph as ug
from unigraph.config import Target

# The targets whose optimizers write a parameter's own tensor from the second step on.
IN_PLACE = {"numpy:eager", "torch:eager", "paddle:eager"}
LR = 0.1


class SubCounter:
    """Replaces the current backend's `sub_` lowering (if any) by one that counts how often
    it wrote its input (returned the very tensor it was given) and how often it made a new
    one; `allocating=True` removes the entry, so every update takes the allocating path."""

    def __init__(self, monkeypatch, allocating=False):
        from unigraph.dispatch import current_backend

        backend = current_backend()
        backend.load()
        self.in_place = self.new = 0
        table = backend.lowerings
        if table is None or "sub_" not in table:
            return
        if allocating:
            monkeypatch.delitem(table, "sub_")
            return
        original = table["sub_"]

        def counted(x, y):
            out = original(x, y)
            if out is x:
                self.in_place += 1
            else:
                self.new += 1
            return out

        monkeypatch.setitem(table, "sub_", counted)

    def take(self) -> tuple:
        """(in place, new) since the last call."""
        counts = (self.in_place, self.new)
        self.in_place = self.new = 0
        return counts


def _data():
    return least_squares_data(seed=7, rows=5)


def _train(target, name, monkeypatch, allocating, steps, versions=None):
    """(the parameters' values, (in-place, new) `sub_` counts) after `steps` training steps;
    `versions`: a list given gets the parameters' versions after each step."""
    x, y, w, b = _data()
    weight, bias = ug.Parameter(w, name="w"), ug.Parameter(b, name="b")
    make = {"sgd": lambda p: ug.optim.SGD(p, lr=LR),
            "momentum": lambda p: ug.optim.Momentum(p, lr=LR, momentum=0.9),
            "adam": lambda p: ug.optim.Adam(p, lr=LR)}[name]
    optimizer = make([weight, bias])

    step = least_squares_step(x, y, [weight, bias], optimizer)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        counter = SubCounter(monkeypatch, allocating)
        for _ in range(steps):
            step()
            if versions is not None:
                versions.append((weight.version, bias.version))
        counts = counter.take()
        values = [weight.numpy().copy(), bias.numpy().copy()]
    monkeypatch.undo()
    return values, counts


@pytest.mark.parametrize("name", ["sgd", "adam"])  # momentum's last step is SGD's
@pytest.mark.parametrize("target", TARGETS)
def test_in_place_training_matches_allocating_path_and_float64(target, name, monkeypatch):
    """Four training steps: in place on IN_PLACE targets from the second step on (both
    parameters, every step), bit for bit the allocating path's numbers, and float64's."""
    steps = 4
    values, counts = _train(target, name, monkeypatch, allocating=False, steps=steps)
    allocated, _ = _train(target, name, monkeypatch, allocating=True, steps=steps)
    expected = (2 * (steps - 1), 0) if target in IN_PLACE else (0, 0)
    assert counts == expected
    want_params, _ = trained_by_formula(name, _data(), steps, LR)
    for got, same, want in zip(values, allocated, want_params):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _hold_numpy(param):
    return param.numpy()


def _hold_assigned(param):
    twin = ug.Parameter(np.zeros(param.shape, np.float32), name="twin")
    ug.assign(twin, param)
    return twin


def _hold_reshape(param):
    return ug.reshape(param, (6,))


def _hold_row(param):
    return param[1]


def _hold_transpose(param):
    return ug.transpose(param)


def _hold_grad_output(param):
    """An extra output of the differentiated function: on Paddle a view of the detached
    leaf, which shares the parameter's memory."""
    (_, view), _ = ug.value_and_grad(lambda: (ug.sum(param * param), ug.reshape(param, (6,))),
                                     wrt=[param])()
    return view


# (how the user takes a value from the parameter, the same taken from a NumPy array)
HOLDERS = [(_hold_numpy, lambda a: a), (_hold_assigned, lambda a: a),
           (_hold_reshape, lambda a: a.reshape(6)), (_hold_row, lambda a: a[1]),
           (_hold_transpose, lambda a: a.T), (_hold_grad_output, lambda a: a.reshape(6))]


def _as_array(held):
    return np.array(held if isinstance(held, np.ndarray) else held.numpy())


@pytest.mark.parametrize("target", TARGETS)
def test_values_the_user_holds_keep_their_values(target, monkeypatch):
    """For each way of holding a value taken from the parameter between steps (one at a
    time, on one compiled step): the value keeps its numbers through the next two steps,
    the first of which allocates where the value shares the tensor and the second writes
    the new tensor in place on IN_PLACE targets (nobody holds that one); once the value is
    dropped, updates stay in place. The parameter follows the SGD formula throughout."""
    start = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    grads = [np.full((2, 3), k + 1, np.float32) / 8 for k in range(3 * len(HOLDERS) + 2)]
    param = ug.Parameter(start, name="w")
    optimizer = ug.optim.SGD([param], lr=LR)

    @ug.function
    def step(g):
        optimizer.apply([g])

    def expected(steps):  # the parameter after the first `steps` gradients, in float64
        return start - LR * np.sum(grads[:steps], 0, dtype=np.float64)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        counter = SubCounter(monkeypatch)
        step(grads[0])
        step(grads[1])
        assert counter.take() == ((1, 0) if target in IN_PLACE else (0, 0))
        done = 2
        for hold, same in HOLDERS:
            name = hold.__name__
            held = hold(param)
            before = _as_array(held).copy()
            step(grads[done])
            step(grads[done + 1])
            after = _as_array(held)
            in_place_while_held, _ = counter.take()
            del held
            gc.collect()
            step(grads[done + 2])
            counts_after = counter.take()
            np.testing.assert_array_equal(after, before, err_msg=name)
            np.testing.assert_allclose(before, same(expected(done)), rtol=1e-5, atol=1e-6,
                                       err_msg=name)
            done += 3
            if target in IN_PLACE:
                # The step after the value was taken writes in place only where the value
                # is a copy (the NumPy engine's row); the step after that always does.
                assert in_place_while_held in (1, 2) and counts_after == (1, 0), name
            else:
                assert (in_place_while_held, counts_after) == (0, (0, 0)), name
        final = param.numpy().copy()
    np.testing.assert_allclose(final, expected(done), rtol=1e-5, atol=1e-6)


def test_paddle_sole_owner_sees_views_aliases_and_saved_tensors():
    """Paddle's own sharing, one kind at a time: each makes `sole_owner` False while it
    lives, and True again once it is gone (the counts it reads go back down)."""
    paddle = pytest.importorskip("paddle")
    from unigraph_paddle.inplace import sole_owner

    tensor = paddle.to_tensor(np.arange(6, dtype=np.float32))
    weight = paddle.ones([6])
    weight.stop_gradient = False
    sharers = {
        "reshape": lambda: paddle.reshape(tensor, [2, 3]),
        "slice": lambda: tensor[1:4],
        "transpose": lambda: paddle.transpose(paddle.reshape(tensor, [2, 3]), [1, 0]),
        "detach": lambda: tensor.detach(),
        "saved for backward": lambda: (tensor * weight).sum(),
        "dlpack": lambda: tensor.__dlpack__(),
    }
    assert sole_owner(tensor)
    for name, share in sharers.items():
        held = share()
        assert not sole_owner(tensor), name
        del held
        assert sole_owner(tensor), name
    copy = paddle.assign(tensor)  # a copy shares nothing
    array = tensor.numpy()  # Paddle's numpy() copies on a CPU place
    assert sole_owner(tensor) and sole_owner(copy)
    paddle._C_ops.subtract_(tensor, weight.detach())
    np.testing.assert_array_equal(array, np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("target", TARGETS)
def test_each_step_is_one_write_of_each_parameter(target, name, monkeypatch):
    """Each training step advances each parameter's version by one (what every other store,
    a compiled step's feed or another backend's tensor, reloads by), in place or not."""
    versions = []
    _train(target, name, monkeypatch, allocating=False, steps=4, versions=versions)
    assert [(w - versions[0][0], b - versions[0][1]) for w, b in versions] == \
        [(step, step) for step in range(4)]
